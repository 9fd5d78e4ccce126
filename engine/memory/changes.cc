// engine/memory/changes.cc -- the change feed (changes.h): committed
// transactions read back from the log with a TxnReader
// (engine/storage/scan.h), decoded and checked as an open decodes them
// (Database::DecodeScanned), and turned into rows with JSON fields.
#include "engine/memory/changes.h"

#include <cinttypes>
#include <cstdio>

#include "engine/json/json_writer.h"
#include "format/file_header.h"
#include "format/page.h"

namespace agentmem::engine {

using format::ForgetKind;

const char* ChangeKindName(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kEpisode: return "episode";
    case ChangeKind::kBlock: return "block";
    case ChangeKind::kFact: return "fact";
    case ChangeKind::kForget: return "forget";
    case ChangeKind::kRetention: return "retention";
    case ChangeKind::kMeta: return "meta";
    case ChangeKind::kCommit: return "commit";
  }
  return "unknown";
}

namespace {

const char* ForgetScope(ForgetKind k) {
  switch (k) {
    case ForgetKind::kUser: return "user";
    case ForgetKind::kSession: return "session";
    case ForgetKind::kBefore: return "before";
    case ForgetKind::kEpisode: return "episode";
    case ForgetKind::kFact: return "fact";
    case ForgetKind::kBlock: return "block";
    case ForgetKind::kRetention: return "retention";
  }
  return "unknown";
}

std::string LogName(uint64_t log_id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, log_id);
  return buf;
}

Change Row(ChangeKind kind, uint64_t id, const std::string& user_id) {
  Change c;
  c.kind = kind;
  c.id = id;
  c.user_id = user_id;
  return c;
}

Change EpisodeChange(format::EpisodeRecord& r) {
  Change c = Row(ChangeKind::kEpisode, r.id, r.user_id);
  JsonWriter w(&c.data);
  w.BeginObject();
  w.Field("id", r.id);
  w.Field("user_id", r.user_id);
  w.Field("session_id", r.session_id);
  w.Field("role", r.role);
  w.Field("text", r.text);
  w.Field("ts", r.ts);
  w.Field("created_at", r.created_at);
  w.Field("metadata", r.metadata);
  w.Field("dim", r.vector.size());
  w.EndObject();
  c.vector = std::move(r.vector);
  return c;
}

Change BlockChange(const format::BlockRecord& r) {
  Change c = Row(ChangeKind::kBlock, r.version, r.user_id);
  JsonWriter w(&c.data);
  w.BeginObject();
  w.Field("version", r.version);
  w.Field("user_id", r.user_id);
  w.Field("name", r.name);
  w.Field("value", r.value);
  w.Field("limit", r.limit);
  w.Field("pinned_order", r.pinned_order);
  w.Field("updated_at", r.updated_at);
  w.EndObject();
  return c;
}

// `is_new`: the id is above every fact id before the transaction (a new
// fact), else the record is a new version of that fact.
Change FactChange(const format::FactRecord& r, bool is_new) {
  Change c = Row(ChangeKind::kFact, r.id, r.user_id);
  JsonWriter w(&c.data);
  w.BeginObject();
  w.Field("id", r.id);
  w.Field("new", is_new);
  w.Field("user_id", r.user_id);
  w.Field("subject", r.subject);
  w.Field("predicate", r.predicate);
  w.Field("object", r.object);
  w.Field("confidence", static_cast<double>(r.confidence));
  w.Key("source_episode_ids");
  w.BeginArray();
  for (uint64_t id : r.source_episode_ids) w.Value(id);
  w.EndArray();
  w.Field("valid_from", r.valid_from);
  w.Field("valid_to", r.valid_to);
  w.Field("recorded_at", r.recorded_at);
  w.Field("expired_at", r.expired_at);
  w.EndObject();
  return c;
}

Change ForgetChange(const format::ForgetRecord& r) {
  const bool retention = r.kind == ForgetKind::kRetention;
  Change c = Row(retention ? ChangeKind::kRetention : ChangeKind::kForget, r.id, r.user_id);
  JsonWriter w(&c.data);
  w.BeginObject();
  w.Field("scope", ForgetScope(r.kind));
  w.Field("user_id", r.user_id);
  w.Field("session_id", r.session_id);
  w.Field("name", r.name);
  w.Field("before", r.before);
  w.Field("id", r.id);
  w.EndObject();
  return c;
}

Change MetaChange(const std::string& key, const std::string& value) {
  Change c = Row(ChangeKind::kMeta, 0, "");
  JsonWriter w(&c.data);
  w.BeginObject();
  w.Field("key", key);
  w.Field("value", value);
  w.EndObject();
  return c;
}

Change CommitChange(const format::CommitRecord& r, bool checkpoint) {
  Change c = Row(ChangeKind::kCommit, 0, "");
  JsonWriter w(&c.data);
  w.BeginObject();
  w.Field("commit_ts", r.commit_ts);
  w.Field("next_episode_id", r.next_episode_id);
  w.Field("next_fact_id", r.next_fact_id);
  w.Field("next_block_version", r.next_block_version);
  w.Field("checkpoint", checkpoint);
  w.EndObject();
  return c;
}

}  // namespace

Status ChangeFeed::Open(Database* db, uint64_t log_id, uint64_t since,
                        std::unique_ptr<ChangeFeed>* out) {
  out->reset();
  std::unique_ptr<ChangeFeed> f(new ChangeFeed(db, since));
  AGENTMEM_RETURN_IF_ERROR(f->pin_.Begin(db));
  const Log& log = *db->log_;
  f->log_id_ = log.header().salt;
  f->last_seq_ = log.seq();
  f->generation_ = db->log_generation_;
  if ((log_id != 0 && log_id != f->log_id_) || since > f->last_seq_) {
    const std::string asked = log_id != 0 ? "log " + LogName(log_id) : "this file's log";
    return StatusF(kNotFoundChanges,
                   "changes after commit %" PRIu64 " of %s are not in this file: it holds log "
                   "%s, commits 1 to %" PRIu64 "; read its changes from 0 to start again",
                   since, asked.c_str(), LogName(f->log_id_).c_str(), f->last_seq_);
  }
  // Start at the snapshot's end when nothing follows `since`; where the last
  // feed that read to its end stopped, when that is not after `since`; else
  // at the first page.
  const Database::FeedMark& m = db->feed_mark_;
  uint64_t from = format::kFirstPageOffset, seq = 0;
  f->next_ = Database::Counters{};
  if (since == f->last_seq_) {
    from = log.end();
    seq = f->last_seq_;
    f->next_ = Database::Counters{db->next_episode_id_, db->next_fact_id_, db->next_block_version_};
  } else if (m.generation == f->generation_ && m.seq <= since && m.end <= log.end()) {
    from = m.end;
    seq = m.seq;
    f->next_ = m.next;
  }
  f->reader_ = std::make_unique<TxnReader>(log.file(), f->log_id_, from, seq, log.end());
  *out = std::move(f);
  return Status::OK();
}

Status ChangeFeed::Head(Database* db, uint64_t* log_id, uint64_t* seq) {
  AGENTMEM_RETURN_IF_ERROR(db->RefreshForRead());
  *log_id = db->log_->header().salt;
  *seq = db->log_->seq();
  return Status::OK();
}

ChangeFeed::~ChangeFeed() = default;

Status ChangeFeed::Next(Change* out, bool* done) {
  *done = false;
  if (row_ >= rows_.size()) {
    AGENTMEM_RETURN_IF_ERROR(Fill(done));
    if (*done) return Status::OK();
  }
  *out = std::move(rows_[row_++]);
  return Status::OK();
}

Status ChangeFeed::Fill(bool* done) {
  if (db_->closed_ || !db_->log_ || db_->log_generation_ != generation_) {
    return Status(kMisuse, "the change feed's file was closed or replaced (VACUUM) while it was "
                           "read: open a new feed");
  }
  rows_.clear();
  row_ = 0;
  while (rows_.empty()) {
    ScannedTxn txn;
    AGENTMEM_RETURN_IF_ERROR(reader_->Next(&txn, done));
    if (*done) {
      db_->feed_mark_ = Database::FeedMark{generation_, reader_->seq(), reader_->pos(), next_};
      return Status::OK();
    }
    if (txn.commit.commit_seq > since_) AGENTMEM_RETURN_IF_ERROR(Decode(txn));
    next_ = Database::Counters{txn.commit.next_episode_id, txn.commit.next_fact_id,
                               txn.commit.next_block_version};
  }
  return Status::OK();
}

// One transaction after `since_` into rows_, checked as an open checks it;
// next_ holds the counters before it.
Status ChangeFeed::Decode(ScannedTxn& txn) {
  Database::DecodedTxn d;
  AGENTMEM_RETURN_IF_ERROR(Database::DecodeScanned(txn, next_, &d));
  const bool checkpoint =
      !txn.pages.empty() &&
      txn.pages.front().header.type == static_cast<uint8_t>(format::PageType::kCheckpoint);
  for (const auto& [key, value] : d.meta) rows_.push_back(MetaChange(key, value));
  for (auto& e : d.episodes) rows_.push_back(EpisodeChange(e.first));
  for (const auto& b : d.blocks) rows_.push_back(BlockChange(b.first));
  for (const auto& f : d.facts) rows_.push_back(FactChange(f.first, f.first.id >= next_.fact));
  for (const auto& g : d.forgets) rows_.push_back(ForgetChange(g));
  rows_.push_back(CommitChange(txn.commit, checkpoint));
  for (Change& c : rows_) {
    c.log_id = log_id_;
    c.seq = txn.commit.commit_seq;
    c.commit_ts = txn.commit.commit_ts;
  }
  return Status::OK();
}

}  // namespace agentmem::engine
