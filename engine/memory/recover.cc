// engine/memory/recover.cc -- salvage of a damaged file (recover.h, docs/recovery.md).
//
// Four passes over the source, which is opened read-only:
//   1. Pages. From the first page on, each page is read and validated as the
//      recovery scan does (PageReader, scan.h). Where no valid page starts,
//      the bytes are damage up to the next offset, in steps of 16, where a
//      valid page starts again (pages are 16-byte aligned and carry their own
//      page number and the file's salt, so the next one is found for sure).
//   2. Transactions. Between two valid commit pages lie the pages of one
//      transaction (or of several, when a commit page is lost). The one that
//      the later commit page describes -- txn_start, page_count, all pages
//      valid, none missing -- is whole and kept; everything else there is a
//      dropped transaction. Pages after the last commit are a torn tail
//      unless the newest superblock vouches for them.
//   3. Settings: the meta records of the kept transactions give the new
//      file's vector space and tokenizer.
//   4. Replay. Each kept transaction is decoded (Database::DecodeScanned) and
//      its records written, ids and versions kept, as one transaction of the
//      new file through the commit path, which tokenizes the texts and
//      inserts the vectors again. The forget records on valid pages of a
//      dropped transaction are applied too, at their place: a salvage never
//      brings back what was forgotten, where it can tell.
// A checkpoint (docs/format.md §5.8) names, for every record live before it,
// the page and slot that hold it. With the newest whole one whose state
// section decodes, a dropped transaction before it gives up every record on
// its valid pages that the checkpoint names (the checkpoint proves that the
// transaction was committed), and when the replay reaches the checkpoint,
// every episode, fact and block written so far that it does not name as live
// is forgotten in the new file (a forget on a damaged page still counts).
// Without such a checkpoint, a dropped transaction with a damaged page may
// have held forgets that are lost: the report names what was written before
// it (forgets_unknown).
// Then the episode ids that the source's commits say were assigned, and that
// neither a kept record nor a kept commit accounts for, are reported lost.
#include "engine/memory/recover.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include "engine/memory/database.h"
#include "engine/json/json_writer.h"
#include "engine/storage/scan.h"
#include "format/checkpoint.h"
#include "format/coding.h"
#include "format/page.h"

namespace agentmem::engine {

using format::PageType;

namespace {

// A valid page, or a run of bytes where no valid page starts.
struct Unit {
  uint64_t offset = 0, end = 0;
  bool valid = false;
  uint8_t type = 0;
  format::CommitRecord commit;  // a valid commit page's record
  std::string error;            // why an invalid run is invalid
};

// Units [first, last) and the commit unit that ends them (-1: none).
struct Group {
  size_t first = 0, last = 0;
  long commit = -1;
  bool kept = false;
  bool checkpoint = false;
  bool committed = false;  // a valid commit page follows it somewhere
  std::string reason;
};

bool IsCommit(const Unit& u) { return u.valid && u.type == static_cast<uint8_t>(PageType::kCommit); }

}  // namespace

class Salvage {
 public:
  Salvage(const std::string& src, const std::string& dst, const Options& opts, RecoverReport* r)
      : src_(src), dst_path_(dst), opts_(opts), r_(r) {
    env_ = opts.env ? opts.env : Env::Posix();
  }

  Status Run() {
    *r_ = RecoverReport{};
    r_->source = src_;
    r_->destination = dst_path_;
    if (!dst_path_.empty() && env_->Exists(dst_path_)) {
      return Status(kCantOpenExists, "recover: " + dst_path_ + " exists; give a new file name");
    }
    AGENTMEM_RETURN_IF_ERROR(env_->Open(src_, OpenMode{true}, &file_));
    AGENTMEM_RETURN_IF_ERROR(file_->Size(&size_));
    r_->file_bytes = size_;
    AGENTMEM_RETURN_IF_ERROR(ReadHead());
    reader_ = std::make_unique<PageReader>(file_.get(), size_, salt_);
    AGENTMEM_RETURN_IF_ERROR(ReadUnits());
    FormGroups();
    AGENTMEM_RETURN_IF_ERROR(LoadCheckpoint());
    std::map<std::string, std::string> meta;
    AGENTMEM_RETURN_IF_ERROR(CollectMeta(&meta));
    if (!dst_path_.empty()) AGENTMEM_RETURN_IF_ERROR(CreateDestination(meta));
    Status s = Replay();
    if (s.ok() && dst_) s = Finish();
    if (!s.ok()) {
      if (dst_) {
        dst_->Close().IgnoreError();
        dst_.reset();
        env_->Delete(dst_path_).IgnoreError();
      }
      return s;
    }
    ReportLoss();
    return Status::OK();
  }

 private:
  // The header gives the salt; when its checksum fails, a valid superblock
  // (which repeats the salt) does.
  Status ReadHead() {
    std::string head;
    AGENTMEM_RETURN_IF_ERROR(file_->ReadAt(0, format::kFirstPageOffset, &head));
    if (head.empty()) return Status(kNotADb, "file is not an agentmem database: " + src_ + " is empty");
    format::FileHeader h;
    Status s = format::DecodeFileHeader(head, &h);
    if (s.code() == kNotADb || s.code() == kFormatVersion) return s;
    if (head.size() < format::kFirstPageOffset) {
      return AGENTMEM_CORRUPTION(kCorruptHeader, 0, "file is cut short inside its header (%zu bytes)",
                                 head.size());
    }
    std::optional<format::Superblock> best;
    for (uint64_t off : format::kSuperblockOffset) {
      std::string_view bytes = std::string_view(head).substr(off, format::kSuperblockSize);
      uint64_t salt = s.ok() ? h.salt : format::DecodeFixed64(bytes.data() + 16);
      format::Superblock sb;
      if (salt != 0 && format::DecodeSuperblock(bytes, salt, &sb).ok() &&
          (!best || sb.generation > best->generation)) {
        best = sb;
      }
    }
    if (!s.ok()) {
      if (!best) return s;
      r_->header_damaged = true;
      Damage(0, format::kHeaderSize, s.message(), 0);
      salt_ = best->salt;
    } else {
      salt_ = h.salt;
      page_size_ = h.page_size;
    }
    if (best) vouched_ = best->durable_through;
    return Status::OK();
  }

  void Damage(uint64_t offset, uint64_t bytes, std::string error, uint64_t seq) {
    r_->damage.push_back({offset, bytes, std::move(error), seq});
  }

  // Pass 1.
  Status ReadUnits() {
    uint64_t pos = format::kFirstPageOffset;
    while (pos < size_) {
      DecodedPage page;
      Status s = reader_->Read(pos, &page);
      if (s.primary() == kIoErr) return s;
      if (s.ok()) {
        Unit u;
        u.offset = pos;
        u.end = pos + format::PaddedPageSize(page.header.length);
        u.type = page.header.type;
        u.valid = true;
        r_->pages_valid++;
        if (u.type == static_cast<uint8_t>(PageType::kCommit)) {
          const int64_t page_no = static_cast<int64_t>(page.header.page_no);
          s = format::DecodeCommit(page.payload, page_no, &u.commit);
          if (s.ok() && page.header.record_count != 1) {
            s = AGENTMEM_CORRUPTION(kCorruptPage, page_no, "page %lld (commit): record count %u, not 1",
                                    static_cast<long long>(page_no), page.header.record_count);
          }
          if (!s.ok()) {  // checksum-valid, but not a usable commit record
            u.valid = false;
            u.error = s.message();
          }
        }
        units_.push_back(std::move(u));
        pos = units_.back().end;
        continue;
      }
      // No valid page here: find where one starts again.
      Unit bad;
      bad.offset = pos;
      bad.error = s.message();
      uint64_t next = pos + format::kPageAlign;
      for (; next + format::kPageHeaderSize <= size_; next += format::kPageAlign) {
        bool plausible = false;
        AGENTMEM_RETURN_IF_ERROR(reader_->Plausible(next, &plausible));
        if (!plausible) continue;
        DecodedPage probe;
        Status p = reader_->Read(next, &probe);
        if (p.primary() == kIoErr) return p;
        if (p.ok()) break;
      }
      if (next + format::kPageHeaderSize > size_) next = size_;
      bad.end = next;
      units_.push_back(std::move(bad));
      pos = next;
    }
    return Status::OK();
  }

  // Pass 2.
  void FormGroups() {
    size_t start = 0;
    uint64_t prev_end = format::kFirstPageOffset;
    for (size_t i = 0; i < units_.size(); i++) {
      if (!IsCommit(units_[i])) continue;
      const format::CommitRecord& c = units_[i].commit;
      // Where the transaction this commit describes starts among units [start, i).
      size_t k = i;
      bool whole = c.durable_through <= c.txn_start && c.txn_start >= prev_end &&
                   c.txn_start <= units_[i].offset;
      if (whole && c.txn_start < units_[i].offset) {
        k = start;
        while (k < i && units_[k].offset < c.txn_start) k++;
        whole = k < i && units_[k].offset == c.txn_start;
      }
      for (size_t j = k; whole && j < i; j++) whole = units_[j].valid;
      whole = whole && i - k == c.page_count;
      Group g;
      g.commit = static_cast<long>(i);
      g.committed = true;
      if (whole) {
        if (k > start) {
          Group lost;
          lost.first = start;
          lost.last = k;
          lost.committed = true;
          lost.reason = "its commit page is lost";
          groups_.push_back(lost);
        }
        g.first = k;
        g.last = i;
        g.kept = true;
        g.checkpoint = k < i && units_[k].type == static_cast<uint8_t>(PageType::kCheckpoint);
      } else {
        g.first = start;
        g.last = i;
        g.reason = "not whole: a page of it is damaged or missing";
        for (size_t j = start; j < i; j++) {
          if (!units_[j].valid) g.reason = "page " + std::to_string(format::PageNoOf(units_[j].offset)) + " is damaged";
        }
      }
      groups_.push_back(g);
      start = i + 1;
      prev_end = units_[i].end;
    }
    // After the last commit: an interrupted write, unless the newest
    // superblock vouches for those bytes.
    if (start < units_.size()) {
      if (units_[start].offset < vouched_) {
        Group g;
        g.first = start;
        g.last = units_.size();
        g.committed = true;  // the superblock says it was synced
        g.reason = "not whole, and the superblock vouches for it";
        groups_.push_back(g);
      } else {
        r_->torn_bytes = size_ - units_[start].offset;
        units_.resize(start);
      }
    }
    for (const Group& g : groups_) {
      const uint64_t seq = g.commit >= 0 && !g.kept ? units_[g.commit].commit.commit_seq : 0;
      for (size_t j = g.first; j < g.last; j++) {
        if (!units_[j].valid) Damage(units_[j].offset, units_[j].end - units_[j].offset, units_[j].error, seq);
      }
    }
    for (size_t i = 0; i < units_.size(); i++) {
      if (IsCommit(units_[i])) {
        const format::CommitRecord& c = units_[i].commit;
        seq_after_.emplace(c.commit_seq, c.next_episode_id);
        max_next_ = {std::max(max_next_.episode, c.next_episode_id),
                     std::max(max_next_.fact, c.next_fact_id),
                     std::max(max_next_.block, c.next_block_version)};
      }
    }
  }

  Status ReadTxn(const Group& g, ScannedTxn* t) {
    for (size_t j = g.first; j < g.last; j++) {
      if (!units_[j].valid) continue;
      t->pages.emplace_back();
      AGENTMEM_RETURN_IF_ERROR(reader_->Read(units_[j].offset, &t->pages.back()));
    }
    if (g.commit >= 0) {
      t->commit = units_[g.commit].commit;
      t->commit_offset = units_[g.commit].offset;
      t->end = units_[g.commit].end;
    }
    return Status::OK();
  }

  // The newest whole checkpoint whose state section decodes.
  Status LoadCheckpoint() {
    for (size_t i = groups_.size(); i-- > 0;) {
      const Group& g = groups_[i];
      if (!g.kept || !g.checkpoint) continue;
      for (size_t j = g.first; j < g.last; j++) {
        DecodedPage page;
        AGENTMEM_RETURN_IF_ERROR(reader_->Read(units_[j].offset, &page, /*checkpoint_payload=*/true));
        const int64_t page_no = static_cast<int64_t>(page.header.page_no);
        format::CheckpointSection kind;
        std::string_view body;
        if (!format::SplitSection(page.payload, page_no, &kind, &body).ok() ||
            kind != format::CheckpointSection::kState) {
          continue;
        }
        auto st = std::make_unique<format::CheckpointState>();
        Status s = format::DecodeCheckpointState(body, page_no, st.get());
        if (s.primary() == kNoMem) return s;
        if (!s.ok()) break;
        for (size_t e = 0; e < st->episodes.size(); e++) {
          const auto& c = st->episodes[e];
          if (c.page_offset != 0 && !c.forgotten) live_.insert({c.page_offset, c.slot});
        }
        for (const auto& b : st->blocks) live_.insert({b.page_offset, b.slot});
        for (const auto& f : st->facts) live_.insert({f.page_offset, f.slot});
        checkpoint_ = std::move(st);
        checkpoint_group_ = i;
        r_->checkpoint_offset = units_[g.first].offset;
        return Status::OK();
      }
    }
    return Status::OK();
  }

  // The records of a dropped transaction before the checkpoint that the
  // checkpoint names as live, from its valid pages.
  Status FromCheckpoint(const ScannedTxn& t, Database::DecodedTxn* d) {
    std::vector<std::string_view> records;
    for (const DecodedPage& page : t.pages) {
      const auto type = static_cast<PageType>(page.header.type);
      if (type != PageType::kEpisodes && type != PageType::kBlocks && type != PageType::kFacts) continue;
      const int64_t page_no = static_cast<int64_t>(page.header.page_no);
      if (!format::SplitRecords(page.payload, page.header.record_count, page_no, &records).ok()) continue;
      for (uint32_t slot = 0; slot < records.size(); slot++) {
        if (!live_.count({page.offset, slot})) continue;
        RecordLoc loc{page.offset, slot};
        if (type == PageType::kEpisodes) {
          format::EpisodeRecord e;
          if (format::DecodeEpisode(records[slot], page_no, &e).ok()) d->episodes.emplace_back(std::move(e), loc);
        } else if (type == PageType::kBlocks) {
          format::BlockRecord b;
          if (format::DecodeBlock(records[slot], page_no, &b).ok()) d->blocks.emplace_back(std::move(b), loc);
        } else {
          format::FactRecord f;
          if (format::DecodeFact(records[slot], page_no, &f).ok()) d->facts.emplace_back(std::move(f), loc);
        }
      }
    }
    r_->records_from_checkpoint += d->episodes.size() + d->blocks.size() + d->facts.size();
    return Status::OK();
  }

  // The episode ids on the valid pages of a dropped transaction: the source
  // gave them, even when no readable commit says so.
  void NoteIds(const ScannedTxn& t) {
    std::vector<std::string_view> records;
    for (const DecodedPage& page : t.pages) {
      if (page.header.type != static_cast<uint8_t>(PageType::kEpisodes)) continue;
      const int64_t page_no = static_cast<int64_t>(page.header.page_no);
      if (!format::SplitRecords(page.payload, page.header.record_count, page_no, &records).ok()) continue;
      for (std::string_view rec : records) {
        format::EpisodeRecord e;
        if (format::DecodeEpisode(rec, page_no, &e).ok() && e.id != UINT64_MAX) {
          max_next_.episode = std::max(max_next_.episode, e.id + 1);
        }
      }
    }
  }

  // A dropped transaction with an unreadable page, which may have held
  // forget records: what was written before it may include what it forgot.
  void NoteForgetsUnknown(const Group& g) {
    bool damaged = false;
    for (size_t j = g.first; j < g.last; j++) damaged = damaged || !units_[j].valid;
    if (!damaged) return;
    RecoverReport::ForgetsUnknown f;
    f.commit_seq = g.commit >= 0 ? units_[g.commit].commit.commit_seq : 0;
    f.episodes_below = next_written_.episode;
    f.facts_below = next_written_.fact;
    f.block_versions_below = next_written_.block;
    r_->forgets_unknown.push_back(f);
  }

  // At the checkpoint: what it does not name as live is forgotten --
  // episodes, facts and whole blocks written so far.
  Status ForgetPerCheckpoint() {
    Database::DecodedTxn d;
    for (uint64_t id : written_) {
      if (id > checkpoint_->episodes.size()) break;
      const auto& c = checkpoint_->episodes[id - 1];
      if (c.page_offset != 0 && !c.forgotten) continue;
      if (dst_ && !dst_->catalog_.FindEpisode(id)) continue;  // forgotten already
      format::ForgetRecord f;
      f.kind = format::ForgetKind::kEpisode;
      f.id = id;
      d.forgets.push_back(std::move(f));
    }
    ForgetFactsPerCheckpoint(&d);
    ForgetBlocksPerCheckpoint(&d);
    r_->forgets_from_checkpoint = d.forgets.size();
    return d.forgets.empty() ? Status::OK() : Write(d);
  }

  void ForgetFactsPerCheckpoint(Database::DecodedTxn* d) const {
    std::unordered_set<uint64_t> live;
    for (const format::CheckpointFact& c : checkpoint_->facts) live.insert(c.id);
    std::vector<uint64_t> ids(facts_.begin(), facts_.end());
    std::sort(ids.begin(), ids.end());
    for (uint64_t id : ids) {
      if (id >= checkpoint_->next_fact_id || live.count(id)) continue;
      if (dst_ && !dst_->catalog_.FindFact(id)) continue;  // forgotten already
      format::ForgetRecord f;
      f.kind = format::ForgetKind::kFact;
      f.id = id;
      d->forgets.push_back(std::move(f));
    }
  }

  // A block with no version in the checkpoint was forgotten (a forget takes
  // every version of a block).
  void ForgetBlocksPerCheckpoint(Database::DecodedTxn* d) const {
    std::set<std::pair<std::string, std::string>> live;
    for (const format::CheckpointBlock& c : checkpoint_->blocks) {
      if (c.user < checkpoint_->strings.size()) live.emplace(checkpoint_->strings[c.user], c.name);
    }
    for (const auto& [user, name] : blocks_) {
      if (live.count({user, name})) continue;
      if (dst_) {
        const UserEntry* u = dst_->catalog_.FindUser(user);
        if (!u || !u->blocks.count(name)) continue;  // forgotten already
      }
      format::ForgetRecord f;
      f.kind = format::ForgetKind::kBlock;
      f.user_id = user;
      f.name = name;
      d->forgets.push_back(std::move(f));
    }
  }

  // Pass 3.
  Status CollectMeta(std::map<std::string, std::string>* meta) {
    if (checkpoint_) {
      for (const auto& [k, v] : checkpoint_->meta) (*meta)[k] = v;
    }
    std::vector<std::string_view> records;
    for (const Group& g : groups_) {
      if (!g.kept) continue;
      for (size_t j = g.first; j < g.last; j++) {
        if (units_[j].type != static_cast<uint8_t>(PageType::kMeta)) continue;
        DecodedPage page;
        AGENTMEM_RETURN_IF_ERROR(reader_->Read(units_[j].offset, &page));
        const int64_t page_no = static_cast<int64_t>(page.header.page_no);
        if (!format::SplitRecords(page.payload, page.header.record_count, page_no, &records).ok()) continue;
        for (std::string_view rec : records) {
          format::MetaRecord m;
          if (!format::DecodeMeta(rec, page_no, &m).ok()) continue;
          for (auto& [k, v] : m.entries) (*meta)[k] = v;
        }
      }
    }
    return Status::OK();
  }

  Status CreateDestination(const std::map<std::string, std::string>& meta) {
    Options o = opts_;
    o.env = env_;
    o.create = true;
    o.read_only = false;
    o.sync = SyncMode::kOff;  // synced once, at the end
    o.checkpoint_bytes = 0;   // written at the end
    o.auto_vacuum = false;
    o.salt = 0;
    if (page_size_ != 0) o.page_size = page_size_;  // the source's packing target
    auto get = [&](const char* k) -> const std::string* {
      auto it = meta.find(k);
      return it == meta.end() ? nullptr : &it->second;
    };
    const std::string *embedder = get("vector.embedder"), *dim = get("vector.dim"),
                      *metric = get("vector.metric");
    if (dim && metric) {
      o.space.embedder = embedder ? *embedder : "";
      o.space.dim = static_cast<uint32_t>(std::strtoul(dim->c_str(), nullptr, 10));
      o.space.metric = *metric;
    } else {
      r_->settings_lost = true;
    }
    o.space_given = true;
    o.tokenizer = index::TokenizerOptions{};
    if (const std::string* t = get("text.tokenizer")) {
      auto parsed = index::ParseTokenizerConfig(*t);
      if (!parsed.ok()) return Status(kFormatVersion, "recover: the file uses tokenizer \"" + *t + "\", unknown to this version");
      o.tokenizer = parsed.value();
    }
    o.tokenizer_given = false;
    Status s = Database::Open(dst_path_, o, &dst_);
    if (!s.ok()) {  // the path did not exist when this began: what is there now is ours
      if (env_->Exists(dst_path_)) env_->Delete(dst_path_).IgnoreError();
      return s;
    }
    s = env_->CopyPermissions(src_, dst_path_);
    if (!s.ok()) {
      dst_->Close().IgnoreError();
      dst_.reset();
      env_->Delete(dst_path_).IgnoreError();
    }
    return s;
  }

  // Writes one transaction's records into the new file (or, for a check,
  // only notes what it would keep).
  Status Write(Database::DecodedTxn& d) {
    if (dst_) {
      AGENTMEM_RETURN_IF_ERROR(dst_->Begin());
      Status s = dst_->AcquireWriteLock();
      if (!s.ok()) {
        dst_->Rollback().IgnoreError();
        return s;
      }
    }
    uint64_t episode_limit = dst_ ? dst_->episode_id_limit() : next_written_.episode;
    for (auto& [e, loc] : d.episodes) {
      if (e.id < episode_limit) continue;  // ids only increase (a crafted file)
      episode_limit = e.id + 1;
      written_.push_back(e.id);
      r_->episodes_written++;
      if (dst_) dst_->pending_episodes_.push_back(std::move(e));
    }
    next_written_.episode = episode_limit;
    for (auto& [b, loc] : d.blocks) {
      if (b.version < next_written_.block) continue;
      next_written_.block = b.version + 1;
      r_->block_versions_written++;
      blocks_.emplace(b.user_id, b.name);
      if (dst_) dst_->pending_blocks_.push_back(std::move(b));
    }
    for (auto& [f, loc] : d.facts) {
      const bool version = f.id < next_written_.fact;
      const bool exists = dst_ ? dst_->catalog_.FindFact(f.id) != nullptr : facts_.count(f.id) > 0;
      if (version && !exists) {
        r_->fact_versions_dropped.push_back(f.id);
        continue;
      }
      next_written_.fact = std::max(next_written_.fact, f.id + 1);
      facts_.insert(f.id);
      r_->fact_records_written++;
      if (dst_) dst_->pending_facts_.push_back(std::move(f));
    }
    if (!dst_) return Status::OK();
    for (auto& kv : d.meta) dst_->pending_meta_.entries.push_back(std::move(kv));
    for (auto& f : d.forgets) dst_->pending_forgets_.push_back(std::move(f));
    return dst_->Commit();
  }

  // Pass 4.
  Status Replay() {
    for (size_t i = 0; i < groups_.size(); i++) {
      Group& g = groups_[i];
      if (g.checkpoint) {
        if (checkpoint_ && i == checkpoint_group_) AGENTMEM_RETURN_IF_ERROR(ForgetPerCheckpoint());
        continue;
      }
      ScannedTxn t;
      AGENTMEM_RETURN_IF_ERROR(ReadTxn(g, &t));
      if (g.kept) {
        Database::DecodedTxn d;
        Status s = Database::DecodeScanned(t, Database::Counters{}, &d);
        if (s.primary() == kNoMem) return s;
        if (s.ok()) {
          r_->transactions_kept++;
          AGENTMEM_RETURN_IF_ERROR(Write(d));
          continue;
        }
        g.kept = false;  // checksums matched, records did not decode
        g.reason = "its records do not decode: " + s.ToString();
      }
      // A dropped transaction: what the checkpoint after it names as live,
      // and its forget records, from its valid pages.
      if (!g.committed) continue;
      if (!(checkpoint_ && i < checkpoint_group_)) NoteForgetsUnknown(g);
      Database::DecodedTxn d;
      NoteIds(t);
      if (checkpoint_ && i < checkpoint_group_) AGENTMEM_RETURN_IF_ERROR(FromCheckpoint(t, &d));
      std::vector<std::string_view> records;
      for (DecodedPage& page : t.pages) {
        if (page.header.type != static_cast<uint8_t>(PageType::kForget)) continue;
        const int64_t page_no = static_cast<int64_t>(page.header.page_no);
        if (!format::SplitRecords(page.payload, page.header.record_count, page_no, &records).ok()) continue;
        for (std::string_view rec : records) {
          format::ForgetRecord f;
          if (format::DecodeForget(rec, page_no, &f).ok()) d.forgets.push_back(std::move(f));
        }
      }
      r_->forgets_from_dropped += d.forgets.size();
      if (!d.forgets.empty() || !d.episodes.empty() || !d.blocks.empty() || !d.facts.empty()) {
        AGENTMEM_RETURN_IF_ERROR(Write(d));
      }
    }
    return Status::OK();
  }

  // The source's counters, so that no id it gave is given again; then a
  // sync, a checkpoint when the file is large enough, and a superblock.
  Status Finish() {
    Database* d = dst_.get();
    AGENTMEM_RETURN_IF_ERROR(d->Begin());
    AGENTMEM_RETURN_IF_ERROR(d->AcquireWriteLock());
    d->counters_floor_ = max_next_;
    d->pending_meta_.entries.emplace_back("recover.last_at", std::to_string(d->Now()));
    AGENTMEM_RETURN_IF_ERROR(d->Commit());
    AGENTMEM_RETURN_IF_ERROR(d->AcquireWriteLock());
    AGENTMEM_RETURN_IF_ERROR(d->log_->SyncAll());
    if (opts_.checkpoint_bytes != 0 && d->log_->end() >= opts_.checkpoint_bytes) {
      AGENTMEM_RETURN_IF_ERROR(d->WriteCheckpoint());
    }
    AGENTMEM_RETURN_IF_ERROR(d->log_->WriteSuperblock());
    d->ReleaseWriteLock();
    Status s = d->Close();
    dst_.reset();
    return s;
  }

  // Episode ids below the source's counter that no kept record holds and
  // no kept commit accounts for (a kept transaction whose predecessor's
  // commit is readable accounts for every id between the two counters: the
  // ids it skipped were never given).
  void ReportLoss() {
    std::vector<std::pair<uint64_t, uint64_t>> known;  // [first, end)
    for (const Group& g : groups_) {
      if (!g.kept || g.commit < 0) continue;
      const format::CommitRecord& c = units_[g.commit].commit;
      uint64_t before = 0;
      if (c.commit_seq == 1) {
        before = 1;
      } else if (auto it = seq_after_.find(c.commit_seq - 1); it != seq_after_.end()) {
        before = it->second;
      }
      if (before != 0 && before < c.next_episode_id) known.emplace_back(before, c.next_episode_id);
    }
    for (uint64_t id : written_) known.emplace_back(id, id + 1);
    if (checkpoint_) {  // ids it names as absent or forgotten are not lost
      for (uint64_t id = 1; id <= checkpoint_->episodes.size(); id++) {
        const auto& c = checkpoint_->episodes[id - 1];
        if (c.page_offset == 0 || c.forgotten) known.emplace_back(id, id + 1);
      }
    }
    std::sort(known.begin(), known.end());
    uint64_t at = 1;
    auto lose = [&](uint64_t first, uint64_t end) {
      r_->episodes_lost_count += end - first;
      if (r_->episodes_lost.size() < kMaxRanges) r_->episodes_lost.emplace_back(first, end - 1);
    };
    for (const auto& [first, end] : known) {
      if (first >= max_next_.episode) break;
      if (first > at) lose(at, first);
      at = std::max(at, end);
    }
    if (at < max_next_.episode) lose(at, max_next_.episode);
    // Each dropped transaction's share: the lost ids between the counter
    // before it and its own (or the next commit's, when its own is lost).
    uint64_t before = 1;
    for (size_t i = 0; i < groups_.size(); i++) {
      const Group& g = groups_[i];
      uint64_t after = 0;
      if (g.commit >= 0) after = units_[g.commit].commit.next_episode_id;
      if (!g.kept && !g.checkpoint) {
        RecoverReport::Dropped out;
        out.first_offset = units_[g.first < g.last ? g.first : g.commit].offset;
        out.reason = g.reason;
        if (g.commit >= 0) {
          out.commit_offset = units_[g.commit].offset;
          out.commit_seq = units_[g.commit].commit.commit_seq;
        }
        uint64_t end = after;
        for (size_t j = i + 1; end == 0 && j < groups_.size(); j++) {
          if (groups_[j].commit >= 0) end = units_[groups_[j].commit].commit.next_episode_id;
        }
        if (end == 0) end = max_next_.episode;
        for (const auto& [first, last] : r_->episodes_lost) {
          for (uint64_t id = std::max(first, before); id <= last && id < end; id++) {
            if (out.episodes.size() >= kMaxIds) break;
            out.episodes.push_back(id);
          }
        }
        r_->dropped.push_back(std::move(out));
      }
      if (after != 0) before = after;
    }
    std::sort(r_->damage.begin(), r_->damage.end(),
              [](const auto& a, const auto& b) { return a.offset < b.offset; });
  }

  static constexpr size_t kMaxRanges = 10000;  // listed; the count is exact
  static constexpr size_t kMaxIds = 10000;

  std::string src_, dst_path_;
  Options opts_;
  RecoverReport* r_;
  Env* env_ = nullptr;
  std::unique_ptr<File> file_;
  uint64_t size_ = 0;
  uint64_t salt_ = 0;
  uint32_t page_size_ = 0;  // the source header's (0: the header is damaged)
  uint64_t vouched_ = 0;
  std::unique_ptr<PageReader> reader_;
  std::vector<Unit> units_;
  std::vector<Group> groups_;
  std::map<uint64_t, uint64_t> seq_after_;  // commit_seq -> next_episode_id after it
  Database::Counters max_next_;             // the largest counters of any valid commit
  Database::Counters next_written_;
  std::unordered_set<uint64_t> facts_;  // fact ids written
  std::set<std::pair<std::string, std::string>> blocks_;  // blocks written (user, name)
  std::vector<uint64_t> written_;       // episode ids written, increasing
  std::unique_ptr<Database> dst_;
  std::unique_ptr<format::CheckpointState> checkpoint_;  // the one used, if any
  size_t checkpoint_group_ = 0;
  std::set<std::pair<uint64_t, uint32_t>> live_;  // (page offset, slot) it names as live
};

Status Recover(const std::string& src, const std::string& dst, const Options& opts,
               RecoverReport* report) {
  Salvage s(src, dst, opts, report);
  return s.Run();
}

namespace {

// The pieces of RecoverReportJson, each one value.

void UintOrNull(JsonWriter& w, uint64_t v) {  // 0: null
  if (v) {
    w.Uint(v);
  } else {
    w.Null();
  }
}

void PageOrNull(JsonWriter& w, uint64_t offset) {  // the page number of offset; 0: null
  if (offset) {
    w.Uint(format::PageNoOf(offset));
  } else {
    w.Null();
  }
}

void DamageJson(JsonWriter& w, const RecoverReport::Damage& d) {
  w.BeginObject();
  w.Field("page", format::PageNoOf(d.offset));
  w.Field("offset", d.offset);
  w.Field("bytes", d.bytes);
  w.Key("commit_seq");
  UintOrNull(w, d.commit_seq);
  w.Field("error", d.error);
  w.EndObject();
}

void DroppedJson(JsonWriter& w, const RecoverReport::Dropped& d) {
  w.BeginObject();
  w.Field("first_page", format::PageNoOf(d.first_offset));
  w.Key("commit_page");
  PageOrNull(w, d.commit_offset);
  w.Key("commit_seq");
  UintOrNull(w, d.commit_seq);
  w.Field("reason", d.reason);
  w.Key("episodes");
  w.BeginArray();
  for (uint64_t id : d.episodes) w.Uint(id);
  w.EndArray();
  w.EndObject();
}

// Ranges of ids: a single id as a number, a longer range as [first, last].
void RangesJson(JsonWriter& w, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  w.BeginArray();
  for (const auto& [first, last] : ranges) {
    if (first == last) {
      w.Uint(first);
    } else {
      w.BeginArray();
      w.Uint(first);
      w.Uint(last);
      w.EndArray();
    }
  }
  w.EndArray();
}

void ForgetsUnknownJson(JsonWriter& w, const RecoverReport::ForgetsUnknown& f) {
  w.BeginObject();
  w.Key("commit_seq");
  UintOrNull(w, f.commit_seq);
  w.Field("episodes_below", f.episodes_below);
  w.Field("facts_below", f.facts_below);
  w.Field("block_versions_below", f.block_versions_below);
  w.EndObject();
}

}  // namespace

std::string RecoverReportJson(const RecoverReport& r) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Field("source", r.source);
  w.Key("destination");
  if (r.destination.empty()) {
    w.Null();
  } else {
    w.String(r.destination);
  }
  w.Field("clean", r.clean());
  w.Field("file_bytes", r.file_bytes);
  w.Field("pages_valid", r.pages_valid);
  w.Field("header_damaged", r.header_damaged);
  w.Key("damaged");
  w.BeginArray();
  for (const auto& d : r.damage) DamageJson(w, d);
  w.EndArray();
  w.Field("torn_bytes", r.torn_bytes);
  w.Field("transactions_kept", r.transactions_kept);
  w.Key("transactions_dropped");
  w.BeginArray();
  for (const auto& d : r.dropped) DroppedJson(w, d);
  w.EndArray();
  w.Field("forgets_from_dropped", r.forgets_from_dropped);
  w.Field("settings_lost", r.settings_lost);
  w.Field("records_from_checkpoint", r.records_from_checkpoint);
  w.Field("forgets_from_checkpoint", r.forgets_from_checkpoint);
  w.Key("checkpoint_page");
  PageOrNull(w, r.checkpoint_offset);
  w.Field("episodes_written", r.episodes_written);
  w.Field("block_versions_written", r.block_versions_written);
  w.Field("fact_records_written", r.fact_records_written);
  w.Field("episodes_lost_count", r.episodes_lost_count);
  w.Key("episodes_lost");
  RangesJson(w, r.episodes_lost);
  w.Key("fact_versions_dropped");
  w.BeginArray();
  for (uint64_t id : r.fact_versions_dropped) w.Uint(id);
  w.EndArray();
  w.Key("forgets_unknown");
  w.BeginArray();
  for (const auto& f : r.forgets_unknown) ForgetsUnknownJson(w, f);
  w.EndArray();
  w.EndObject();
  return out;
}

}  // namespace agentmem::engine
