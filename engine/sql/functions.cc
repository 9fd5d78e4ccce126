// engine/sql/functions.cc -- the table-valued functions: recall,
// explain_recall, block_history, facts_as_of, integrity_check, stats,
// user_stats and context; and the scalar functions profile and export_user
// (docs/sql.md). Each is a FunctionTable (function_table.h).
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/memory/memory.h"
#include "engine/memory/recall.h"
#include "engine/sql/function_table.h"
#include "engine/sql/vtab.h"

namespace agentmem::engine::sql {

namespace {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;

// ====================================================================== recall

// The arguments of recall() and explain_recall(), in order.
enum RecallArg { kRaQuery, kRaUser, kRaK, kRaMode, kRaSession, kRaRole, kRaTsFrom, kRaTsTo,
                 kRaMetaKey, kRaMetaValue, kRaHalfLife, kRaMinScore, kRaQueryVector, kRaAllUsers,
                 kRaFill, kRaMinSimilarity, kRaMinBm25, kRaCount };

constexpr const char* kRecallArgs =
    "query HIDDEN, for_user HIDDEN, k HIDDEN, mode HIDDEN, for_session HIDDEN, for_role HIDDEN, "
    "ts_from HIDDEN, ts_to HIDDEN, metadata_key HIDDEN, metadata_value HIDDEN, "
    "half_life_s HIDDEN, min_score HIDDEN, query_embedding HIDDEN, all_users HIDDEN, "
    "fill HIDDEN, min_similarity HIDDEN, min_bm25 HIDDEN";

struct RecallRequest {
  RecallQuery query;
  std::string metadata_key, metadata_value;
};

Status NumberArg(sqlite3_value* v, const char* fn, const char* what, double* out) {
  int t = sqlite3_value_numeric_type(v);
  if (t != SQLITE_INTEGER && t != SQLITE_FLOAT) {
    return StatusF(kMismatch, "%s(): %s must be a number", fn, what);
  }
  *out = sqlite3_value_double(v);
  return Status::OK();
}

Status BuildRecall(const char* fn, sqlite3_value* const* a, RecallRequest* r) {
  RecallQuery& q = r->query;
  if (!IsNull(a[kRaAllUsers])) {
    std::optional<int64_t> all = ValueInt(a[kRaAllUsers]);
    if (!all || (*all != 0 && *all != 1)) {
      return StatusF(kMismatch, "%s(): all_users must be 0 or 1", fn);
    }
    q.all_users = *all == 1;
  }
  if (IsNull(a[kRaQuery]) || (IsNull(a[kRaUser]) && !q.all_users)) {
    return StatusF(kMisuse,
                   "%s() needs a query and a user_id: %s(query, user_id [, k [, mode [, "
                   "session_id [, role [, ts_from [, ts_to]]]]]])",
                   fn, fn);
  }
  q.text = ValueText(a[kRaQuery]);
  q.user_id = ValueText(a[kRaUser]);  // "" when NULL (all users)
  if (!IsNull(a[kRaK])) {
    std::optional<int64_t> k = ValueInt(a[kRaK]);
    if (!k || *k < 0 || *k > 10000) return StatusF(kRange, "%s(): k must be 0..10000", fn);
    q.k = static_cast<size_t>(*k);
  }
  if (!IsNull(a[kRaMode])) {
    std::string mode = ValueText(a[kRaMode]);
    std::transform(mode.begin(), mode.end(), mode.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (mode == "hybrid") q.mode = RecallMode::kHybrid;
    else if (mode == "bm25") q.mode = RecallMode::kBm25;
    else if (mode == "vector") q.mode = RecallMode::kVector;
    else {
      return StatusF(kMisuse, "%s(): mode must be 'hybrid', 'bm25' or 'vector', not '%s'", fn,
                     ValueText(a[kRaMode]).c_str());
    }
  }
  if (!IsNull(a[kRaSession])) q.session_id = ValueText(a[kRaSession]);
  if (!IsNull(a[kRaRole])) q.role = ValueText(a[kRaRole]);
  for (auto [arg, out, name] : {std::tuple{kRaTsFrom, &q.ts_from, "ts_from"},
                                std::tuple{kRaTsTo, &q.ts_to, "ts_to"}}) {
    if (IsNull(a[arg])) continue;
    std::optional<int64_t> v = ValueInt(a[arg]);
    if (!v) return StatusF(kMismatch, "%s(): %s must be an integer (unix microseconds)", fn, name);
    *out = *v;
  }
  if (IsNull(a[kRaMetaKey]) != IsNull(a[kRaMetaValue])) {
    return StatusF(kMisuse, "%s(): metadata_key and metadata_value go together", fn);
  }
  if (!IsNull(a[kRaMetaKey])) {
    r->metadata_key = ValueText(a[kRaMetaKey]);
    r->metadata_value = ValueText(a[kRaMetaValue]);
    if (r->metadata_key.empty()) return StatusF(kMisuse, "%s(): metadata_key is empty", fn);
  }
  if (!IsNull(a[kRaHalfLife])) {
    AGENTMEM_RETURN_IF_ERROR(NumberArg(a[kRaHalfLife], fn, "half_life_s", &q.half_life_s));
    if (!(q.half_life_s >= 0)) return StatusF(kRange, "%s(): half_life_s must be >= 0", fn);
  }
  if (!IsNull(a[kRaMinScore])) {
    AGENTMEM_RETURN_IF_ERROR(NumberArg(a[kRaMinScore], fn, "min_score", &q.min_score));
  }
  if (!IsNull(a[kRaFill])) {
    std::optional<int64_t> fill = ValueInt(a[kRaFill]);
    if (!fill || (*fill != 0 && *fill != 1)) return StatusF(kMismatch, "%s(): fill must be 0 or 1", fn);
    q.fill = *fill == 1;
  }
  if (!IsNull(a[kRaMinSimilarity])) {
    AGENTMEM_RETURN_IF_ERROR(
        NumberArg(a[kRaMinSimilarity], fn, "min_similarity", &q.min_similarity));
  }
  if (!IsNull(a[kRaMinBm25])) {
    AGENTMEM_RETURN_IF_ERROR(NumberArg(a[kRaMinBm25], fn, "min_bm25", &q.min_bm25));
  }
  std::string what = std::string(fn) + "() query_embedding";
  AGENTMEM_RETURN_IF_ERROR(VectorArg(a[kRaQueryVector], what.c_str(), &q.vector));
  return Status::OK();
}

Status RunRecall(Database* db, const char* fn, sqlite3_value* const* a,
                 std::vector<RecallHit>* hits, RecallPlan* plan) {
  RecallRequest r;
  AGENTMEM_RETURN_IF_ERROR(BuildRecall(fn, a, &r));
  return db->Recall(r.query, r.metadata_key, r.metadata_value, hits, plan);
}

enum RecallCol { kRcId, kRcUser, kRcSession, kRcRole, kRcText, kRcTs, kRcScore, kRcBm25Score,
                 kRcVectorScore, kRcBm25Rank, kRcVectorRank, kRcVisible };

class RecallCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  // The hits' episodes are read as the rows are stepped: the statement reads
  // one snapshot, so that a hit another handle forgets meanwhile is still
  // there to read.
  Status Run() override {
    hits_.clear();
    loaded_ = false;
    AGENTMEM_RETURN_IF_ERROR(pin_.Begin(db()));
    std::vector<sqlite3_value*> a(kRaCount);
    for (int i = 0; i < kRaCount; i++) a[i] = Arg(i);
    return RunRecall(db(), "recall", a.data(), &hits_, nullptr);
  }
  size_t Rows() const override { return hits_.size(); }
  Status RowColumn(sqlite3_context* ctx, int i) override {
    const RecallHit& h = hits_[pos_];
    switch (i) {
      case kRcId: sqlite3_result_int64(ctx, static_cast<int64_t>(h.id)); return Status::OK();
      case kRcScore: sqlite3_result_double(ctx, h.score); return Status::OK();
      case kRcBm25Score: sqlite3_result_double(ctx, h.bm25_score); return Status::OK();
      case kRcVectorScore: sqlite3_result_double(ctx, h.vector_score); return Status::OK();
      case kRcBm25Rank: sqlite3_result_int(ctx, h.bm25_rank); return Status::OK();
      case kRcVectorRank: sqlite3_result_int(ctx, h.vector_rank); return Status::OK();
      default: break;
    }
    if (!loaded_ || episode_.id != h.id) {
      Counters().episode_reads++;
      AGENTMEM_RETURN_IF_ERROR(db()->GetEpisode(h.id, &episode_));
      loaded_ = true;
    }
    switch (i) {
      case kRcUser: ResultText(ctx, episode_.user_id); break;
      case kRcSession: ResultText(ctx, episode_.session_id); break;
      case kRcRole: ResultText(ctx, episode_.role); break;
      case kRcText: ResultText(ctx, episode_.text); break;
      case kRcTs: sqlite3_result_int64(ctx, episode_.ts); break;
      default: sqlite3_result_null(ctx);
    }
    return Status::OK();
  }

 private:
  ReadPin pin_;  // the statement's snapshot, from Filter to close
  std::vector<RecallHit> hits_;
  EpisodeRecord episode_;
  bool loaded_ = false;
};

class RecallTable : public FunctionTable {
 public:
  explicit RecallTable(Session* s) : FunctionTable(s, kRcVisible, kRaCount, 2) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<RecallCursor>(this); }
};

// ====================================================================== explain_recall

class ExplainCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  Status Run() override {
    json_.clear();
    std::vector<sqlite3_value*> a(kRaCount);
    for (int i = 0; i < kRaCount; i++) a[i] = Arg(i);
    std::vector<RecallHit> hits;
    RecallPlan plan;
    AGENTMEM_RETURN_IF_ERROR(RunRecall(db(), "explain_recall", a.data(), &hits, &plan));
    json_ = ExplainJson(plan, hits);
    return Status::OK();
  }
  size_t Rows() const override { return json_.empty() ? 0 : 1; }
  Status RowColumn(sqlite3_context* ctx, int) override {
    ResultText(ctx, json_);
    sqlite3_result_subtype(ctx, 'J');  // JSON, for the json functions
    return Status::OK();
  }

 private:
  std::string json_;
};

class ExplainTable : public FunctionTable {
 public:
  explicit ExplainTable(Session* s) : FunctionTable(s, 1, kRaCount, 2) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<ExplainCursor>(this); }
};

// ====================================================================== block_history

class HistoryCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  Status Run() override {
    rows_.clear();
    if (IsNull(Arg(0)) || IsNull(Arg(1))) {
      return Status(kMisuse, "block_history() needs a user_id and a block name: "
                             "block_history(user_id, name)");
    }
    return db()->ListBlockHistory(ValueText(Arg(0)), ValueText(Arg(1)), &rows_);
  }
  size_t Rows() const override { return rows_.size(); }
  Status RowColumn(sqlite3_context* ctx, int i) override {
    BlockRow(ctx, rows_[pos_], i);
    return Status::OK();
  }

 private:
  std::vector<BlockRecord> rows_;
};

class HistoryTable : public FunctionTable {
 public:
  explicit HistoryTable(Session* s) : FunctionTable(s, kBlockColumns, 2, 2) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<HistoryCursor>(this); }
};

// ====================================================================== facts_as_of

class AsOfCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  Status Run() override {
    rows_.clear();
    if (IsNull(Arg(0))) {
      return Status(kMisuse, "facts_as_of() needs a user_id: facts_as_of(user_id [, valid_at "
                             "[, known_at]])");
    }
    const int64_t now = NowMicros(db());
    int64_t at = now, known = now;
    for (int a : {1, 2}) {
      if (IsNull(Arg(a))) continue;
      std::optional<int64_t> v = ValueInt(Arg(a));
      if (!v) {
        return StatusF(kMismatch, "facts_as_of(): %s must be an integer (unix microseconds)",
                       a == 1 ? "valid_at" : "known_at");
      }
      (a == 1 ? at : known) = *v;
    }
    std::vector<FactRecord> all;
    AGENTMEM_RETURN_IF_ERROR(db()->ListFacts(ValueText(Arg(0)), nullptr, nullptr, &all));
    for (FactRecord& f : all) {
      // Valid at the instant, by the records as the file knew them at `known`.
      if (f.valid_from <= at && at < f.valid_to && f.recorded_at <= known &&
          known < f.expired_at) {
        rows_.push_back(std::move(f));
      }
    }
    return Status::OK();
  }
  size_t Rows() const override { return rows_.size(); }
  Status RowColumn(sqlite3_context* ctx, int i) override {
    FactColumn(ctx, rows_[pos_], i);
    return Status::OK();
  }

 private:
  std::vector<FactRecord> rows_;
};

class AsOfTable : public FunctionTable {
 public:
  explicit AsOfTable(Session* s) : FunctionTable(s, kFactColumns, 3, 1) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<AsOfCursor>(this); }
};

// ====================================================================== integrity_check

class CheckCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  Status Run() override {
    rows_.clear();
    AGENTMEM_RETURN_IF_ERROR(db()->Check(&rows_));
    if (rows_.empty()) rows_.push_back("ok");
    return Status::OK();
  }
  size_t Rows() const override { return rows_.size(); }
  Status RowColumn(sqlite3_context* ctx, int) override {
    ResultText(ctx, rows_[pos_]);
    return Status::OK();
  }

 private:
  std::vector<std::string> rows_;
};

class CheckTable : public FunctionTable {
 public:
  explicit CheckTable(Session* s) : FunctionTable(s, 1, 0, 0) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<CheckCursor>(this); }
};

// ====================================================================== stats

class StatsCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  Status Run() override {
    return db()->GetStats(&stats_);
  }
  size_t Rows() const override { return 1; }
  Status RowColumn(sqlite3_context* ctx, int i) override {
    const uint64_t values[] = {stats_.file_bytes, stats_.episodes,   stats_.blocks,
                               stats_.block_versions, stats_.facts,  stats_.users,
                               stats_.commits,    stats_.text_bytes, stats_.pages,
                               stats_.syncs,      stats_.torn_bytes};
    sqlite3_result_int64(ctx, static_cast<int64_t>(values[i]));
    return Status::OK();
  }

 private:
  Stats stats_;
};

class StatsTable : public FunctionTable {
 public:
  explicit StatsTable(Session* s) : FunctionTable(s, 11, 0, 0) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<StatsCursor>(this); }
};

// ====================================================================== user_stats

struct UserRow {
  std::string user_id;
  int64_t episodes = 0, blocks = 0, facts = 0;
};

class UserStatsCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  Status Run() override {
    rows_.clear();
    std::vector<std::string> users;
    if (!IsNull(Arg(0))) {
      users.push_back(ValueText(Arg(0)));
    } else {
      Counters().user_scans++;
      AGENTMEM_RETURN_IF_ERROR(db()->ListUsers(&users));
    }
    std::vector<uint64_t> ids;
    std::vector<BlockRecord> blocks;
    std::vector<FactRecord> facts;
    for (const std::string& u : users) {
      UserRow r;
      r.user_id = u;
      AGENTMEM_RETURN_IF_ERROR(db()->ListEpisodeIds(u, nullptr, &ids));
      AGENTMEM_RETURN_IF_ERROR(db()->ListBlocks(u, &blocks));
      AGENTMEM_RETURN_IF_ERROR(db()->ListFacts(u, nullptr, nullptr, &facts));
      r.episodes = static_cast<int64_t>(ids.size());
      r.blocks = static_cast<int64_t>(blocks.size());
      r.facts = static_cast<int64_t>(facts.size());
      rows_.push_back(std::move(r));
    }
    return Status::OK();
  }
  size_t Rows() const override { return rows_.size(); }
  Status RowColumn(sqlite3_context* ctx, int i) override {
    const UserRow& r = rows_[pos_];
    switch (i) {
      case 0: ResultText(ctx, r.user_id); break;
      case 1: sqlite3_result_int64(ctx, r.episodes); break;
      case 2: sqlite3_result_int64(ctx, r.blocks); break;
      default: sqlite3_result_int64(ctx, r.facts); break;
    }
    return Status::OK();
  }

 private:
  std::vector<UserRow> rows_;
};

class UserStatsTable : public FunctionTable {
 public:
  explicit UserStatsTable(Session* s) : FunctionTable(s, 4, 1, 0) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<UserStatsCursor>(this); }
};

// ====================================================================== context

class ContextCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  Status Run() override {
    items_.clear();
    if (IsNull(Arg(0)) || IsNull(Arg(1)) || IsNull(Arg(2))) {
      return Status(kMisuse, "context() needs a user_id, a query and a token budget: "
                             "context(user_id, query, budget)");
    }
    std::optional<int64_t> budget = ValueInt(Arg(2));
    if (!budget) return Status(kMismatch, "context(): budget must be an integer (tokens)");
    return AssembleContext(db(), ValueText(Arg(0)), ValueText(Arg(1)), *budget, &items_);
  }
  size_t Rows() const override { return items_.size(); }
  Status RowColumn(sqlite3_context* ctx, int i) override {
    static const char* const kKinds[] = {"", "block", "fact", "episode"};
    const ContextItem& it = items_[pos_];
    switch (i) {
      case 0: sqlite3_result_int64(ctx, static_cast<int64_t>(pos_) + 1); break;
      case 1: sqlite3_result_text(ctx, kKinds[static_cast<int>(it.kind)], -1, SQLITE_STATIC); break;
      case 2: sqlite3_result_int64(ctx, static_cast<int64_t>(it.id)); break;
      case 3: ResultText(ctx, it.name); break;
      case 4: ResultText(ctx, it.text); break;
      case 5: sqlite3_result_int64(ctx, it.tokens); break;
      default: ResultText(ctx, it.reason); break;
    }
    return Status::OK();
  }

 private:
  std::vector<ContextItem> items_;
};

class ContextTable : public FunctionTable {
 public:
  explicit ContextTable(Session* s) : FunctionTable(s, 7, 3, 3) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<ContextCursor>(this); }
};

// ====================================================================== profile, export_user

// A scalar function of one user_id returning text made by `make`.
// No exception may leave it (a sqlite3 callback): a failed allocation is
// SQLITE_NOMEM, and poisons the handle as the C API's Guard does.
template <Status (*make)(Database*, const std::string&, std::string*)>
void UserTextFunction(sqlite3_context* ctx, int argc, sqlite3_value** argv) noexcept {
  auto* session = static_cast<Session*>(sqlite3_user_data(ctx));
  const char* fn = make == &ProfileJson ? "profile" : "export_user";
  try {
    Status s;
    std::string out;
    if (argc != 1 || IsNull(argv[0])) {
      s = StatusF(kMisuse, "%s() needs a user_id: %s(user_id)", fn, fn);
    } else {
      s = make(session->db(), ValueText(argv[0]), &out);
    }
    if (!s.ok()) {
      int rc = session->Fail(nullptr, s);
      sqlite3_result_error(ctx, s.message().c_str(), -1);
      sqlite3_result_error_code(ctx, rc);
      return;
    }
    ResultText(ctx, out);
    if (make == &ProfileJson) sqlite3_result_subtype(ctx, 'J');  // JSON, for the json functions
  } catch (...) {
    session->db()->Poison();
    sqlite3_result_error_nomem(ctx);
  }
}

// ====================================================================== forget, vacuum

// The receipt columns of forget() and vacuum() (include/agentmem.h, agentmem_receipt).
constexpr int kReceiptColumns = 8;
#define AGENTMEM_RECEIPT_SCHEMA                                                              \
  "episodes INTEGER, facts INTEGER, block_versions INTEGER, vacuumed INTEGER, "               \
  "bytes_before INTEGER, bytes_after INTEGER, needles INTEGER, residue INTEGER"

class ReceiptCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  // Maintenance commits on its own: an SQL transaction (BEGIN ... COMMIT)
  // could not carry it. (agentmem_begin() can: a forget then applies at
  // agentmem_commit().)
  Status OutsideTransaction(const char* what) const {
    if (!sqlite3_get_autocommit(table_->session()->conn())) {
      return StatusF(kMisuse, "%s cannot run inside BEGIN ... COMMIT; run it on its own", what);
    }
    return Status::OK();
  }
  size_t Rows() const override { return 1; }
  Status RowColumn(sqlite3_context* ctx, int i) override {
    const uint64_t values[kReceiptColumns] = {r_.episodes, r_.facts, r_.block_versions,
                                              r_.vacuumed ? 1u : 0u, r_.bytes_before,
                                              r_.bytes_after, r_.needles, r_.residue};
    sqlite3_result_int64(ctx, static_cast<int64_t>(values[i]));
    return Status::OK();
  }
  ForgetReceipt r_;
};

// forget(kind, user_id, session_id, before, id, name, purge): what FORGET runs.
class ForgetCursor : public ReceiptCursor {
 public:
  using ReceiptCursor::ReceiptCursor;

 protected:
  Status Run() override {
    format::ForgetRecord f;
    const std::string kind = IsNull(Arg(0)) ? "" : ValueText(Arg(0));
    const std::pair<const char*, format::ForgetKind> kinds[] = {
        {"user", format::ForgetKind::kUser},       {"session", format::ForgetKind::kSession},
        {"before", format::ForgetKind::kBefore},   {"episode", format::ForgetKind::kEpisode},
        {"fact", format::ForgetKind::kFact},       {"block", format::ForgetKind::kBlock}};
    bool known = false;
    for (const auto& [name, k] : kinds) {
      if (kind == name) {
        f.kind = k;
        known = true;
      }
    }
    if (!known) {
      return Status(kMisuse, "forget(): kind must be user, session, before, episode, fact or block");
    }
    auto text = [&](int a, const char* what, std::string* out) -> Status {
      if (IsNull(Arg(a))) return StatusF(kMisuse, "forget(): %s is missing", what);
      *out = ValueText(Arg(a));
      return Status::OK();
    };
    auto integer = [&](int a, const char* what, int64_t* out) -> Status {
      std::optional<int64_t> v = IsNull(Arg(a)) ? std::nullopt : ValueInt(Arg(a));
      if (!v) return StatusF(kMisuse, "forget(): %s must be an integer", what);
      *out = *v;
      return Status::OK();
    };
    int64_t n = 0;
    switch (f.kind) {
      case format::ForgetKind::kUser:
        AGENTMEM_RETURN_IF_ERROR(text(1, "user_id", &f.user_id));
        break;
      case format::ForgetKind::kSession:
        AGENTMEM_RETURN_IF_ERROR(text(1, "user_id", &f.user_id));
        AGENTMEM_RETURN_IF_ERROR(text(2, "session_id", &f.session_id));
        break;
      case format::ForgetKind::kBefore:
        AGENTMEM_RETURN_IF_ERROR(text(1, "user_id", &f.user_id));
        AGENTMEM_RETURN_IF_ERROR(integer(3, "before", &f.before));
        break;
      case format::ForgetKind::kEpisode:
      case format::ForgetKind::kFact:
        AGENTMEM_RETURN_IF_ERROR(integer(4, "id", &n));
        if (n <= 0) return Status(kMisuse, "forget(): id must be positive");
        f.id = static_cast<uint64_t>(n);
        break;
      case format::ForgetKind::kBlock:
        AGENTMEM_RETURN_IF_ERROR(text(1, "user_id", &f.user_id));
        AGENTMEM_RETURN_IF_ERROR(text(5, "name", &f.name));
        break;
      case format::ForgetKind::kRetention:  // written by the retention policy only
        return Status(kMisuse, "forget(): unknown kind");
    }
    const bool purge = !IsNull(Arg(6)) && ValueInt(Arg(6)).value_or(0) != 0;
    AGENTMEM_RETURN_IF_ERROR(OutsideTransaction("FORGET"));
    r_ = ForgetReceipt{};
    return purge ? db()->Purge(f, &r_) : db()->Forget(f, &r_);
  }
};

class ForgetTable : public FunctionTable {
 public:
  explicit ForgetTable(Session* s) : FunctionTable(s, kReceiptColumns, 7, 1) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<ForgetCursor>(this); }
};

class VacuumCursor : public ReceiptCursor {
 public:
  using ReceiptCursor::ReceiptCursor;

 protected:
  Status Run() override {
    AGENTMEM_RETURN_IF_ERROR(OutsideTransaction("VACUUM"));
    r_ = ForgetReceipt{};
    return db()->Vacuum({}, &r_);
  }
};

class VacuumTable : public FunctionTable {
 public:
  explicit VacuumTable(Session* s) : FunctionTable(s, kReceiptColumns, 0, 0) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<VacuumCursor>(this); }
};

// retention(): the file's retention policy (max_age_s, keep_cited) as one
// row; retention(max_age_s [, keep_cited]) sets it first (SET RETENTION).
class RetentionCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  Status Run() override {
    if (!IsNull(Arg(0))) {
      std::optional<int64_t> age = ValueInt(Arg(0));
      if (!age) return Status(kMisuse, "retention(): max_age_s must be an integer (seconds)");
      std::optional<int64_t> keep = IsNull(Arg(1)) ? std::optional<int64_t>(0) : ValueInt(Arg(1));
      if (!keep) return Status(kMisuse, "retention(): keep_cited must be 0 or 1");
      // A table-valued function takes no part in an SQL transaction: like
      // FORGET, setting the policy runs on its own.
      if (!sqlite3_get_autocommit(table_->session()->conn())) {
        return Status(kMisuse, "SET RETENTION cannot run inside BEGIN ... COMMIT; run it on its own");
      }
      AGENTMEM_RETURN_IF_ERROR(db()->SetRetention(*age, *keep != 0));
    } else if (!IsNull(Arg(1))) {
      return Status(kMisuse, "retention(): keep_cited needs max_age_s");
    }
    db()->Retention(&max_age_s_, &keep_cited_);
    return Status::OK();
  }
  size_t Rows() const override { return 1; }
  Status RowColumn(sqlite3_context* ctx, int i) override {
    sqlite3_result_int64(ctx, i == 0 ? max_age_s_ : keep_cited_ ? 1 : 0);
    return Status::OK();
  }

 private:
  int64_t max_age_s_ = 0;
  bool keep_cited_ = false;
};

class RetentionTable : public FunctionTable {
 public:
  explicit RetentionTable(Session* s) : FunctionTable(s, 2, 2, 0) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<RetentionCursor>(this); }
};

// reindex(): what REINDEX runs (Database::Reindex).
class ReindexCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  Status Run() override {
    if (!sqlite3_get_autocommit(table_->session()->conn())) {
      return Status(kMisuse, "REINDEX cannot run inside BEGIN ... COMMIT; run it on its own");
    }
    r_ = ReindexReceipt{};
    return db()->Reindex(&r_);
  }
  size_t Rows() const override { return 1; }
  Status RowColumn(sqlite3_context* ctx, int i) override {
    const uint64_t values[] = {r_.episodes, r_.vectors, format::PageNoOf(r_.checkpoint_offset)};
    sqlite3_result_int64(ctx, static_cast<int64_t>(values[i]));
    return Status::OK();
  }
  ReindexReceipt r_;
};

class ReindexTable : public FunctionTable {
 public:
  explicit ReindexTable(Session* s) : FunctionTable(s, 3, 0, 0) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<ReindexCursor>(this); }
};

const std::string& RecallSchema() {
  static const std::string s =
      std::string("CREATE TABLE x(id INTEGER, user_id TEXT, session_id TEXT, role TEXT, "
                  "text TEXT, ts INTEGER, score REAL, bm25_score REAL, vector_score REAL, "
                  "bm25_rank INTEGER, vector_rank INTEGER, ") +
      kRecallArgs + ")";
  return s;
}

const std::string& ExplainSchema() {
  static const std::string s = std::string("CREATE TABLE x(plan TEXT, ") + kRecallArgs + ")";
  return s;
}

}  // namespace

std::vector<ModuleSpec> FunctionSpecs() {
  return {
      {"recall", nullptr, RecallSchema().c_str(), false, Make<RecallTable>},
      {"explain_recall", nullptr, ExplainSchema().c_str(), false, Make<ExplainTable>},
      {"block_history", nullptr,
       "CREATE TABLE x(user_id TEXT, name TEXT, value TEXT, version INTEGER, "
       "char_limit INTEGER, pinned_order INTEGER, updated_at INTEGER, for_user HIDDEN, "
       "for_name HIDDEN)",
       false, Make<HistoryTable>},
      {"facts_as_of", nullptr,
       "CREATE TABLE x(id INTEGER, user_id TEXT, subject TEXT, predicate TEXT, object TEXT, "
       "confidence REAL, source_episode_ids TEXT, valid_from INTEGER, valid_to INTEGER, "
       "recorded_at INTEGER, expired_at INTEGER, for_user HIDDEN, valid_at HIDDEN, known_at HIDDEN)",
       false, Make<AsOfTable>},
      {"integrity_check", nullptr, "CREATE TABLE x(integrity_check TEXT)", false,
       Make<CheckTable>},
      {"stats", nullptr,
       "CREATE TABLE x(file_bytes INTEGER, episodes INTEGER, blocks INTEGER, "
       "block_versions INTEGER, facts INTEGER, users INTEGER, commits INTEGER, "
       "text_bytes INTEGER, pages INTEGER, syncs INTEGER, torn_bytes INTEGER)",
       false, Make<StatsTable>},
      {"user_stats", nullptr,
       "CREATE TABLE x(user_id TEXT, episodes INTEGER, blocks INTEGER, facts INTEGER, "
       "for_user HIDDEN)",
       false, Make<UserStatsTable>},
      {"forget", nullptr,
       "CREATE TABLE x(" AGENTMEM_RECEIPT_SCHEMA ", kind HIDDEN, for_user HIDDEN, "
       "for_session HIDDEN, before HIDDEN, for_id HIDDEN, for_name HIDDEN, purge HIDDEN)",
       false, Make<ForgetTable>},
      {"vacuum", nullptr, "CREATE TABLE x(" AGENTMEM_RECEIPT_SCHEMA ")", false, Make<VacuumTable>},
      {"retention", nullptr,
       "CREATE TABLE x(max_age_s INTEGER, keep_cited INTEGER, set_max_age_s HIDDEN, "
       "set_keep_cited HIDDEN)",
       false, Make<RetentionTable>},
      {"reindex", nullptr, "CREATE TABLE x(episodes INTEGER, vectors INTEGER, checkpoint_page INTEGER)",
       false, Make<ReindexTable>},
      {"context", nullptr,
       "CREATE TABLE x(position INTEGER, kind TEXT, id INTEGER, name TEXT, text TEXT, "
       "tokens INTEGER, reason TEXT, for_user HIDDEN, for_query HIDDEN, budget HIDDEN)",
       false, Make<ContextTable>},
  };
}

Status RegisterScalarFunctions(Session* session) {
  struct Fn {
    const char* name;
    void (*f)(sqlite3_context*, int, sqlite3_value**);
  };
  for (Fn fn : {Fn{"profile", UserTextFunction<&ProfileJson>},
                Fn{"export_user", UserTextFunction<&ExportUser>}}) {
    int rc = sqlite3_create_function_v2(session->conn(), fn.name, 1, SQLITE_UTF8, session, fn.f,
                                        nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) {
      return StatusF(kError, "cannot register the SQL function %s: %s", fn.name,
                     sqlite3_errmsg(session->conn()));
    }
  }
  return Status::OK();
}

}  // namespace agentmem::engine::sql
