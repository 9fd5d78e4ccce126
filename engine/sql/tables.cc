// engine/sql/tables.cc -- the virtual tables episodes, blocks and facts over
// engine::Database (schemas and pushdown in docs/sql.md).
//
// Plans. xBestIndex passes the constraints the engine can answer without a
// scan to xFilter, named in idxStr (shown by EXPLAIN QUERY PLAN):
//   episodes: "id=" (GetEpisode; IN runs it once per value), "user_id="
//             and "session_id=" (ListEpisodeIds), "ts>", "ts>=", "ts<",
//             "ts<=" (checked on each record as it is read, before SQLite
//             sees the row); no id or user_id: every user (ListUsers).
//   blocks:   "user_id=" (ListBlocks), with "name=" (GetBlock).
//   facts:    "user_id=" (ListFacts), "subject=", "predicate=".
// Constraints are never marked omitted: SQLite checks every row again, so a
// plan only has to return a superset of the matching rows.
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/json/json_reader.h"
#include "engine/sql/vtab.h"

namespace agentmem::engine::sql {

namespace {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;

constexpr const char* kAppendOnly =
    "are append-only: they cannot be updated, and are removed with FORGET (FORGET EPISODE id, "
    "FORGET FACT id, FORGET USER 'u' [SESSION 's' | BEFORE t] [PURGE]; docs/lifecycle.md), "
    "not DELETE";

// The idxStr of a plan: tokens separated by spaces, one per argv value, in
// order; "scan" when there is none.
std::vector<std::string> Tokens(const char* idx_str) {
  std::vector<std::string> out;
  std::istringstream in(idx_str ? idx_str : "");
  std::string t;
  while (in >> t) {
    if (t != "scan") out.push_back(t);
  }
  return out;
}

// Builds a plan from the usable constraints chosen by the caller.
class PlanBuilder {
 public:
  explicit PlanBuilder(sqlite3_index_info* info) : info_(info) {}
  void Use(int constraint, const std::string& token) {
    info_->aConstraintUsage[constraint].argvIndex = ++argc_;
    info_->aConstraintUsage[constraint].omit = 0;
    if (!str_.empty()) str_ += " ";
    str_ += token;
  }
  void Finish(double cost, int64_t rows, bool unique) {
    info_->idxStr = sqlite3_mprintf("%s", str_.empty() ? "scan" : str_.c_str());
    info_->needToFreeIdxStr = 1;
    info_->estimatedCost = cost;
    info_->estimatedRows = rows;
    if (unique) info_->idxFlags |= SQLITE_INDEX_SCAN_UNIQUE;
  }

 private:
  sqlite3_index_info* info_;
  int argc_ = 0;
  std::string str_;
};

// Whether ORDER BY is exactly "<column> ASC" (or rowid) -- our id order.
bool OrderedByIdAsc(const sqlite3_index_info* info, int id_column) {
  return info->nOrderBy == 1 && !info->aOrderBy[0].desc &&
         (info->aOrderBy[0].iColumn == id_column || info->aOrderBy[0].iColumn == -1);
}

const char* TsOp(unsigned char op) {
  switch (op) {
    case SQLITE_INDEX_CONSTRAINT_GT: return "ts>";
    case SQLITE_INDEX_CONSTRAINT_GE: return "ts>=";
    case SQLITE_INDEX_CONSTRAINT_LT: return "ts<";
    case SQLITE_INDEX_CONSTRAINT_LE: return "ts<=";
    default: return nullptr;
  }
}

// An inclusive range of int64 narrowed by one "ts<op> value" constraint.
// Values that are not numbers leave it alone (SQLite decides those rows).
void NarrowRange(const std::string& token, sqlite3_value* v, int64_t* lo, int64_t* hi) {
  int t = sqlite3_value_numeric_type(v);
  if (t != SQLITE_INTEGER && t != SQLITE_FLOAT) return;
  double d = sqlite3_value_double(v);
  bool is_int = t == SQLITE_INTEGER;
  int64_t i = is_int ? sqlite3_value_int64(v) : 0;
  auto clamp = [](double x) {
    if (x <= -9.2e18) return std::numeric_limits<int64_t>::min();
    if (x >= 9.2e18) return std::numeric_limits<int64_t>::max();
    return static_cast<int64_t>(x);
  };
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (token == "ts>") {
    if (is_int && i == kMax) {  // nothing is greater
      *lo = kMax;
      *hi = kMin;
      return;
    }
    *lo = std::max(*lo, is_int ? i + 1 : clamp(std::floor(d) + 1));
  } else if (token == "ts>=") {
    *lo = std::max(*lo, is_int ? i : clamp(std::ceil(d)));
  } else if (token == "ts<") {
    if (is_int && i == kMin) {  // nothing is smaller
      *lo = kMax;
      *hi = kMin;
      return;
    }
    *hi = std::min(*hi, is_int ? i - 1 : clamp(std::ceil(d) - 1));
  } else if (token == "ts<=") {
    *hi = std::min(*hi, is_int ? i : clamp(std::floor(d)));
  }
}

Status AllUsers(Database* db, std::vector<std::string>* users) {
  Counters().user_scans++;
  return db->ListUsers(users);
}

// "[1,2,3]" for a list of ids.
std::string IdsJson(const std::vector<uint64_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); i++) {
    if (i) s += ",";
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

// A required column of an INSERT that the engine assigns.
Status MustBeNull(sqlite3_value* v, const char* table, const char* column) {
  if (IsNull(v)) return Status::OK();
  return StatusF(kConstraint, "%s.%s is assigned by the engine; leave it out of the INSERT",
                 table, column);
}

// A TEXT column of an INSERT: NULL gives `if_null`, or an error when null.
Status TextArg(sqlite3_value* v, const char* table, const char* column, const char* if_null,
               std::string* out) {
  if (IsNull(v)) {
    if (!if_null) return StatusF(kConstraint, "%s.%s must not be NULL", table, column);
    out->assign(if_null);
    return Status::OK();
  }
  if (sqlite3_value_type(v) == SQLITE_BLOB) {
    return StatusF(kMismatch, "%s.%s must be text, not a BLOB", table, column);
  }
  *out = ValueText(v);
  return Status::OK();
}

Status IntArg(sqlite3_value* v, const char* table, const char* column, int64_t if_null,
              int64_t* out) {
  if (IsNull(v)) {
    *out = if_null;
    return Status::OK();
  }
  std::optional<int64_t> i = ValueInt(v);
  if (!i) {
    return StatusF(kMismatch, "%s.%s must be an integer, not '%s'", table, column,
                   ValueText(v).c_str());
  }
  *out = *i;
  return Status::OK();
}

// ====================================================================== episodes

enum EpisodeCol { kEpId, kEpUser, kEpSession, kEpRole, kEpText, kEpTs, kEpCreated, kEpMeta,
                  kEpEmbedding };

constexpr const char* kEpisodesSchema =
    "CREATE TABLE x(id INTEGER, user_id TEXT, session_id TEXT, role TEXT, text TEXT, "
    "ts INTEGER, created_at INTEGER, metadata TEXT, embedding BLOB HIDDEN)";

class EpisodesCursor : public VCursor {
 public:
  explicit EpisodesCursor(Database* db) : db_(db) {}

  Status Filter(int, const char* idx_str, int argc, sqlite3_value** argv) override {
    // The rows are read lazily: the statement reads one snapshot, so that a
    // row another handle forgets meanwhile is still there to read.
    AGENTMEM_RETURN_IF_ERROR(pin_.Begin(db_));
    ids_.clear();
    pos_ = 0;
    loaded_ = false;
    lo_ = std::numeric_limits<int64_t>::min();
    hi_ = std::numeric_limits<int64_t>::max();
    std::vector<std::string> tokens = Tokens(idx_str);
    std::optional<int64_t> id;
    bool by_id = false, by_user = false, none = false;
    std::string user, session;
    bool has_session = false;
    for (size_t i = 0; i < tokens.size() && static_cast<int>(i) < argc; i++) {
      const std::string& t = tokens[i];
      if (t == "id=") {
        by_id = true;
        id = ValueInt(argv[i]);
        if (!id || *id <= 0) none = true;
      } else if (t == "user_id=") {
        by_user = true;
        if (IsNull(argv[i])) none = true;
        user = ValueText(argv[i]);
      } else if (t == "session_id=") {
        has_session = true;
        if (IsNull(argv[i])) none = true;
        session = ValueText(argv[i]);
      } else {
        NarrowRange(t, argv[i], &lo_, &hi_);
      }
    }
    if (none || lo_ > hi_) return Status::OK();
    if (by_id) {
      // A point lookup: read the record now to know whether it exists.
      Status s = Load(static_cast<uint64_t>(*id));
      if (s.code() == kNotFound) return Status::OK();
      AGENTMEM_RETURN_IF_ERROR(s);
      ids_.push_back(static_cast<uint64_t>(*id));
    } else if (by_user) {
      Counters().user_lists++;
      AGENTMEM_RETURN_IF_ERROR(db_->ListEpisodeIds(user, has_session ? &session : nullptr, &ids_));
    } else {
      std::vector<std::string> users;
      AGENTMEM_RETURN_IF_ERROR(AllUsers(db_, &users));
      std::vector<uint64_t> one;
      for (const std::string& u : users) {
        AGENTMEM_RETURN_IF_ERROR(db_->ListEpisodeIds(u, nullptr, &one));
        ids_.insert(ids_.end(), one.begin(), one.end());
      }
      std::sort(ids_.begin(), ids_.end());
    }
    return SkipFiltered();
  }

  Status Next() override {
    pos_++;
    loaded_ = false;
    return SkipFiltered();
  }
  bool Eof() const override { return pos_ >= ids_.size(); }
  int64_t Rowid() const override { return static_cast<int64_t>(ids_[pos_]); }

  Status Column(sqlite3_context* ctx, int i) override {
    if (i == kEpId) {
      sqlite3_result_int64(ctx, static_cast<int64_t>(ids_[pos_]));
      return Status::OK();
    }
    AGENTMEM_RETURN_IF_ERROR(Load(ids_[pos_]));
    switch (i) {
      case kEpUser: ResultText(ctx, rec_.user_id); break;
      case kEpSession: ResultText(ctx, rec_.session_id); break;
      case kEpRole: ResultText(ctx, rec_.role); break;
      case kEpText: ResultText(ctx, rec_.text); break;
      case kEpTs: sqlite3_result_int64(ctx, rec_.ts); break;
      case kEpCreated: sqlite3_result_int64(ctx, rec_.created_at); break;
      case kEpMeta:
        if (rec_.metadata.empty()) sqlite3_result_null(ctx);
        else ResultText(ctx, rec_.metadata);
        break;
      case kEpEmbedding:
        if (rec_.vector.empty()) {
          sqlite3_result_null(ctx);
        } else {
          sqlite3_result_blob64(ctx, rec_.vector.data(), rec_.vector.size() * sizeof(float),
                                SQLITE_TRANSIENT);
        }
        break;
      default: sqlite3_result_null(ctx);
    }
    return Status::OK();
  }

 private:
  ReadPin pin_;  // the statement's snapshot, from Filter to close
  Status Load(uint64_t id) {
    if (loaded_ && rec_.id == id) return Status::OK();
    Counters().episode_reads++;
    AGENTMEM_RETURN_IF_ERROR(db_->GetEpisode(id, &rec_));
    loaded_ = true;
    return Status::OK();
  }
  // Moves past rows outside the ts range (reading their records).
  Status SkipFiltered() {
    bool ranged = lo_ != std::numeric_limits<int64_t>::min() ||
                  hi_ != std::numeric_limits<int64_t>::max();
    while (ranged && pos_ < ids_.size()) {
      AGENTMEM_RETURN_IF_ERROR(Load(ids_[pos_]));
      if (rec_.ts >= lo_ && rec_.ts <= hi_) break;
      pos_++;
      loaded_ = false;
    }
    return Status::OK();
  }

  Database* db_;
  std::vector<uint64_t> ids_;
  size_t pos_ = 0;
  bool loaded_ = false;
  EpisodeRecord rec_;
  int64_t lo_ = 0, hi_ = 0;
};

}  // namespace

// An embedding given to INSERT: a float32 BLOB or a JSON array of numbers.
Status VectorArg(sqlite3_value* v, const char* what, std::vector<float>* out) {
  out->clear();
  if (IsNull(v)) return Status::OK();
  if (sqlite3_value_type(v) == SQLITE_BLOB) {
    int n = sqlite3_value_bytes(v);
    if (n == 0 || n % 4 != 0) {
      return StatusF(kMismatchDimension,
                     "%s BLOB is %d bytes: it must hold float32 values (4 bytes each)", what,
                     n);
    }
    out->resize(static_cast<size_t>(n) / 4);
    std::memcpy(out->data(), sqlite3_value_blob(v), static_cast<size_t>(n));
    return Status::OK();
  }
  if (sqlite3_value_type(v) != SQLITE_TEXT) {
    return StatusF(kMismatch, "%s must be a float32 BLOB or a JSON array of numbers", what);
  }
  JsonTokens j;  // not an nlohmann::json tree: its destructor allocates (json_reader.h)
  if (!ParseJson(ValueText(v), &j) || j[0].kind != JsonToken::kBeginArray || j.size() == 2) {
    return StatusF(kMismatchJson, "%s text must be a non-empty JSON array of numbers", what);
  }
  out->reserve(j.size() - 2);
  for (size_t p = 1; j[p].kind != JsonToken::kEndArray; p = JsonValueEnd(j, p)) {
    switch (j[p].kind) {  // as nlohmann's get<float>() converts
      case JsonToken::kDouble: out->push_back(static_cast<float>(j[p].d)); break;
      case JsonToken::kInt: out->push_back(static_cast<float>(j[p].i)); break;
      case JsonToken::kUint: out->push_back(static_cast<float>(j[p].u)); break;
      default:
        return StatusF(kMismatchJson, "%s JSON array holds a value that is not a number", what);
    }
  }
  return Status::OK();
}

namespace {

class EpisodesTable : public VTable {
 public:
  using VTable::VTable;

  Status BestIndex(sqlite3_index_info* info) override {
    int id_eq = -1, user_eq = -1, session_eq = -1;
    std::vector<int> ts;
    for (int i = 0; i < info->nConstraint; i++) {
      const auto& c = info->aConstraint[i];
      if (!c.usable) continue;
      if ((c.iColumn == kEpId || c.iColumn == -1) && c.op == SQLITE_INDEX_CONSTRAINT_EQ) {
        if (id_eq < 0) id_eq = i;
      } else if (c.iColumn == kEpUser && c.op == SQLITE_INDEX_CONSTRAINT_EQ) {
        if (user_eq < 0) user_eq = i;
      } else if (c.iColumn == kEpSession && c.op == SQLITE_INDEX_CONSTRAINT_EQ) {
        if (session_eq < 0) session_eq = i;
      } else if (c.iColumn == kEpTs && TsOp(c.op)) {
        ts.push_back(i);
      }
    }
    PlanBuilder plan(info);
    double cost;
    int64_t rows;
    bool unique = false;
    if (id_eq >= 0) {
      plan.Use(id_eq, "id=");
      cost = 1;
      rows = 1;
      unique = true;
    } else if (user_eq >= 0) {
      plan.Use(user_eq, "user_id=");
      cost = 1000;
      rows = 1000;
      if (session_eq >= 0) {
        plan.Use(session_eq, "session_id=");
        cost = 100;
        rows = 100;
      }
      if (OrderedByIdAsc(info, kEpId)) info->orderByConsumed = 1;
    } else {
      Stats st;
      AGENTMEM_RETURN_IF_ERROR(db()->GetStats(&st));
      rows = static_cast<int64_t>(std::max<uint64_t>(st.episodes, 1));
      cost = 1e7 + 10.0 * static_cast<double>(rows);
      if (OrderedByIdAsc(info, kEpId)) info->orderByConsumed = 1;
    }
    if (id_eq < 0) {
      for (int i : ts) plan.Use(i, TsOp(info->aConstraint[i].op));
      if (!ts.empty()) {
        cost *= 0.5;
        rows = std::max<int64_t>(rows / 4, 1);
      }
    }
    plan.Finish(cost, rows, unique);
    return Status::OK();
  }

  std::unique_ptr<VCursor> Open() override { return std::make_unique<EpisodesCursor>(db()); }

  Status Update(int argc, sqlite3_value** argv, sqlite3_int64* rowid) override {
    if (argc == 1 || !IsNull(argv[0])) {
      return StatusF(kError, "episodes %s", kAppendOnly);
    }
    sqlite3_value** col = argv + 2;
    if (!IsNull(argv[1]) || !IsNull(col[kEpId])) {
      return Status(kConstraint, "episodes.id is assigned by the engine; leave it out of the "
                                 "INSERT (last_insert_rowid() gives it)");
    }
    AGENTMEM_RETURN_IF_ERROR(MustBeNull(col[kEpCreated], "episodes", "created_at"));
    EpisodeRecord r;
    AGENTMEM_RETURN_IF_ERROR(TextArg(col[kEpUser], "episodes", "user_id", "", &r.user_id));
    AGENTMEM_RETURN_IF_ERROR(
        TextArg(col[kEpSession], "episodes", "session_id", "", &r.session_id));
    AGENTMEM_RETURN_IF_ERROR(TextArg(col[kEpRole], "episodes", "role", "", &r.role));
    AGENTMEM_RETURN_IF_ERROR(TextArg(col[kEpText], "episodes", "text", nullptr, &r.text));
    AGENTMEM_RETURN_IF_ERROR(IntArg(col[kEpTs], "episodes", "ts", 0, &r.ts));
    AGENTMEM_RETURN_IF_ERROR(TextArg(col[kEpMeta], "episodes", "metadata", "", &r.metadata));
    AGENTMEM_RETURN_IF_ERROR(VectorArg(col[kEpEmbedding], "episodes.embedding", &r.vector));
    uint64_t id = 0;
    AGENTMEM_RETURN_IF_ERROR(db()->Remember(std::move(r), &id));
    *rowid = static_cast<sqlite3_int64>(id);
    return Status::OK();
  }
};

// ====================================================================== blocks

enum BlockCol { kBlUser, kBlName, kBlValue, kBlVersion, kBlLimit, kBlPinned, kBlUpdated };

constexpr const char* kBlocksSchema =
    "CREATE TABLE x(user_id TEXT, name TEXT, value TEXT, version INTEGER, char_limit INTEGER, "
    "pinned_order INTEGER, updated_at INTEGER)";

// One row of blocks or block_history.
void BlockColumn(sqlite3_context* ctx, const BlockRecord& b, int i) {
  switch (i) {
    case kBlUser: ResultText(ctx, b.user_id); break;
    case kBlName: ResultText(ctx, b.name); break;
    case kBlValue: ResultText(ctx, b.value); break;
    case kBlVersion: sqlite3_result_int64(ctx, static_cast<int64_t>(b.version)); break;
    case kBlLimit: sqlite3_result_int64(ctx, b.limit); break;
    case kBlPinned:
      if (b.pinned_order < 0) sqlite3_result_null(ctx);
      else sqlite3_result_int64(ctx, b.pinned_order);
      break;
    case kBlUpdated: sqlite3_result_int64(ctx, b.updated_at); break;
    default: sqlite3_result_null(ctx);
  }
}

class BlocksTable;

class BlocksCursor : public VCursor {
 public:
  explicit BlocksCursor(BlocksTable* t);
  Status Filter(int, const char* idx_str, int argc, sqlite3_value** argv) override;
  Status Next() override {
    pos_++;
    return Status::OK();
  }
  bool Eof() const override { return pos_ >= rows_.size(); }
  int64_t Rowid() const override { return static_cast<int64_t>(rows_[pos_].version); }
  Status Column(sqlite3_context* ctx, int i) override;

 private:
  BlocksTable* table_;
  std::vector<BlockRecord> rows_;
  size_t pos_ = 0;
};

class BlocksTable : public VTable {
 public:
  using VTable::VTable;

  Status BestIndex(sqlite3_index_info* info) override {
    int user_eq = -1, name_eq = -1;
    for (int i = 0; i < info->nConstraint; i++) {
      const auto& c = info->aConstraint[i];
      if (!c.usable || c.op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
      if (c.iColumn == kBlUser && user_eq < 0) user_eq = i;
      if (c.iColumn == kBlName && name_eq < 0) name_eq = i;
    }
    PlanBuilder plan(info);
    if (user_eq >= 0 && name_eq >= 0) {
      plan.Use(user_eq, "user_id=");
      plan.Use(name_eq, "name=");
      plan.Finish(1, 1, true);
    } else if (user_eq >= 0) {
      plan.Use(user_eq, "user_id=");
      plan.Finish(100, 20, false);
    } else {
      plan.Finish(1e7, 1000, false);
    }
    return Status::OK();
  }

  std::unique_ptr<VCursor> Open() override { return std::make_unique<BlocksCursor>(this); }

  Status Update(int argc, sqlite3_value** argv, sqlite3_int64* rowid) override {
    if (argc == 1) {
      return Status(kError, "blocks are removed with FORGET BLOCK 'user' 'name' [PURGE] "
                               "(docs/lifecycle.md), not DELETE");
    }
    sqlite3_value** col = argv + 2;
    BlockRecord r;
    AGENTMEM_RETURN_IF_ERROR(TextArg(col[kBlUser], "blocks", "user_id", "", &r.user_id));
    AGENTMEM_RETURN_IF_ERROR(TextArg(col[kBlName], "blocks", "name", nullptr, &r.name));
    AGENTMEM_RETURN_IF_ERROR(TextArg(col[kBlValue], "blocks", "value", nullptr, &r.value));
    int64_t limit = 0, pinned = -1;
    AGENTMEM_RETURN_IF_ERROR(IntArg(col[kBlLimit], "blocks", "char_limit", 0, &limit));
    AGENTMEM_RETURN_IF_ERROR(IntArg(col[kBlPinned], "blocks", "pinned_order", -1, &pinned));
    if (limit < 0 || limit > std::numeric_limits<uint32_t>::max()) {
      return Status(kRange, "blocks.char_limit must be between 0 (no limit) and 4294967295");
    }
    if (!IsNull(col[kBlPinned]) && (pinned < 0 || pinned > std::numeric_limits<int32_t>::max())) {
      return Status(kRange, "blocks.pinned_order must be NULL (not pinned) or >= 0");
    }
    r.limit = static_cast<uint32_t>(limit);
    r.pinned_order = static_cast<int32_t>(pinned);
    if (IsNull(argv[0])) {  // INSERT
      if (!IsNull(argv[1])) {
        return Status(kConstraint, "blocks.version is assigned by the engine; leave it out of "
                                   "the INSERT");
      }
      AGENTMEM_RETURN_IF_ERROR(MustBeNull(col[kBlVersion], "blocks", "version"));
      AGENTMEM_RETURN_IF_ERROR(MustBeNull(col[kBlUpdated], "blocks", "updated_at"));
    } else {  // UPDATE of the current version: a new version
      int64_t old = sqlite3_value_int64(argv[0]);
      BlockRecord was;
      AGENTMEM_RETURN_IF_ERROR(FindVersion(old, &was));
      if (was.user_id != r.user_id || was.name != r.name) {
        return Status(kConstraint,
                      "a block's user_id and name cannot change: write the value under the "
                      "new name with INSERT (and FORGET BLOCK the old one)");
      }
      std::optional<int64_t> v = ValueInt(col[kBlVersion]), u = ValueInt(col[kBlUpdated]);
      if (!v || *v != old || sqlite3_value_int64(argv[1]) != old || !u ||
          *u != was.updated_at) {
        return Status(kConstraint, "blocks.version and updated_at are assigned by the engine "
                                   "and cannot be set");
      }
    }
    std::string user = r.user_id, name = r.name;
    AGENTMEM_RETURN_IF_ERROR(db()->SetBlock(std::move(r)));
    BlockRecord now;
    AGENTMEM_RETURN_IF_ERROR(db()->GetBlock(user, name, &now));
    *rowid = static_cast<sqlite3_int64>(now.version);
    return Status::OK();
  }

  // Rows the cursors returned, by version: an UPDATE names the row it
  // changes only by its rowid (the version). A bounded cache; FindVersion
  // falls back to a search when a version is not in it.
  void Saw(const BlockRecord& b) {
    if (seen_.size() >= (size_t{1} << 20)) seen_.clear();
    Key& k = seen_[static_cast<int64_t>(b.version)];
    k.user_id = b.user_id;
    k.name = b.name;
    k.updated_at = b.updated_at;
  }

 private:
  Status FindVersion(int64_t version, BlockRecord* out) {
    if (auto it = seen_.find(version); it != seen_.end()) {
      out->user_id = it->second.user_id;
      out->name = it->second.name;
      out->updated_at = it->second.updated_at;
      return Status::OK();
    }
    std::vector<std::string> users;
    AGENTMEM_RETURN_IF_ERROR(AllUsers(db(), &users));
    std::vector<BlockRecord> blocks;
    for (const std::string& u : users) {
      AGENTMEM_RETURN_IF_ERROR(db()->ListBlocks(u, &blocks));
      for (BlockRecord& b : blocks) {
        if (static_cast<int64_t>(b.version) == version) {
          *out = std::move(b);
          return Status::OK();
        }
      }
    }
    return StatusF(kNotFound, "block version %lld is no longer the current version of its block",
                   static_cast<long long>(version));
  }

  struct Key {
    std::string user_id, name;
    int64_t updated_at = 0;
  };
  std::unordered_map<int64_t, Key> seen_;
};

BlocksCursor::BlocksCursor(BlocksTable* t) : table_(t) {}

Status BlocksCursor::Filter(int, const char* idx_str, int argc, sqlite3_value** argv) {
  rows_.clear();
  pos_ = 0;
  Database* db = table_->db();
  std::vector<std::string> tokens = Tokens(idx_str);
  std::optional<std::string> user, name;
  for (size_t i = 0; i < tokens.size() && static_cast<int>(i) < argc; i++) {
    if (IsNull(argv[i])) return Status::OK();
    if (tokens[i] == "user_id=") user = ValueText(argv[i]);
    if (tokens[i] == "name=") name = ValueText(argv[i]);
  }
  if (user && name) {
    BlockRecord b;
    Status s = db->GetBlock(*user, *name, &b);
    if (s.code() == kNotFound) return Status::OK();
    AGENTMEM_RETURN_IF_ERROR(s);
    rows_.push_back(std::move(b));
  } else if (user) {
    Counters().user_lists++;
    AGENTMEM_RETURN_IF_ERROR(db->ListBlocks(*user, &rows_));
  } else {
    std::vector<std::string> users;
    AGENTMEM_RETURN_IF_ERROR(AllUsers(db, &users));
    std::vector<BlockRecord> one;
    for (const std::string& u : users) {
      AGENTMEM_RETURN_IF_ERROR(db->ListBlocks(u, &one));
      for (BlockRecord& b : one) rows_.push_back(std::move(b));
    }
  }
  return Status::OK();
}

Status BlocksCursor::Column(sqlite3_context* ctx, int i) {
  if (i == 0) table_->Saw(rows_[pos_]);
  BlockColumn(ctx, rows_[pos_], i);
  return Status::OK();
}

// ====================================================================== facts

enum FactCol { kFaId, kFaUser, kFaSubject, kFaPredicate, kFaObject, kFaConfidence, kFaSources,
               kFaValidFrom, kFaValidTo, kFaRecorded, kFaExpired };

constexpr const char* kFactsSchema =
    "CREATE TABLE x(id INTEGER, user_id TEXT, subject TEXT, predicate TEXT, object TEXT, "
    "confidence REAL, source_episode_ids TEXT, valid_from INTEGER, valid_to INTEGER, "
    "recorded_at INTEGER, expired_at INTEGER)";

}  // namespace

// Shared with functions.cc (facts_as_of).
void FactColumn(sqlite3_context* ctx, const FactRecord& f, int i) {
  switch (i) {
    case kFaId: sqlite3_result_int64(ctx, static_cast<int64_t>(f.id)); break;
    case kFaUser: ResultText(ctx, f.user_id); break;
    case kFaSubject: ResultText(ctx, f.subject); break;
    case kFaPredicate: ResultText(ctx, f.predicate); break;
    case kFaObject: ResultText(ctx, f.object); break;
    case kFaConfidence: sqlite3_result_double(ctx, f.confidence); break;
    case kFaSources: ResultText(ctx, IdsJson(f.source_episode_ids)); break;
    case kFaValidFrom: sqlite3_result_int64(ctx, f.valid_from); break;
    case kFaValidTo:
      if (f.valid_to == format::kForever) sqlite3_result_null(ctx);
      else sqlite3_result_int64(ctx, f.valid_to);
      break;
    case kFaRecorded: sqlite3_result_int64(ctx, f.recorded_at); break;
    case kFaExpired:
      if (f.expired_at == format::kForever) sqlite3_result_null(ctx);
      else sqlite3_result_int64(ctx, f.expired_at);
      break;
    default: sqlite3_result_null(ctx);
  }
}

void BlockRow(sqlite3_context* ctx, const BlockRecord& b, int i) { BlockColumn(ctx, b, i); }

namespace {

class FactsCursor : public VCursor {
 public:
  explicit FactsCursor(Database* db) : db_(db) {}
  Status Filter(int, const char* idx_str, int argc, sqlite3_value** argv) override {
    rows_.clear();
    pos_ = 0;
    std::vector<std::string> tokens = Tokens(idx_str);
    std::optional<std::string> user, subject, predicate;
    std::optional<int64_t> id;
    for (size_t i = 0; i < tokens.size() && static_cast<int>(i) < argc; i++) {
      if (IsNull(argv[i])) return Status::OK();
      if (tokens[i] == "user_id=") user = ValueText(argv[i]);
      if (tokens[i] == "subject=") subject = ValueText(argv[i]);
      if (tokens[i] == "predicate=") predicate = ValueText(argv[i]);
      if (tokens[i] == "id=") {
        id = ValueInt(argv[i]);
        if (!id) return Status::OK();
      }
    }
    std::vector<std::string> users;
    if (user) {
      users.push_back(*user);
      Counters().user_lists++;
    } else {
      AGENTMEM_RETURN_IF_ERROR(AllUsers(db_, &users));
    }
    std::vector<FactRecord> one;
    for (const std::string& u : users) {
      AGENTMEM_RETURN_IF_ERROR(db_->ListFacts(u, subject ? &*subject : nullptr,
                                              predicate ? &*predicate : nullptr, &one));
      for (FactRecord& f : one) {
        if (!id || static_cast<int64_t>(f.id) == *id) rows_.push_back(std::move(f));
      }
    }
    if (!user) {
      std::sort(rows_.begin(), rows_.end(),
                [](const FactRecord& a, const FactRecord& b) { return a.id < b.id; });
    }
    return Status::OK();
  }
  Status Next() override {
    pos_++;
    return Status::OK();
  }
  bool Eof() const override { return pos_ >= rows_.size(); }
  int64_t Rowid() const override { return static_cast<int64_t>(rows_[pos_].id); }
  Status Column(sqlite3_context* ctx, int i) override {
    FactColumn(ctx, rows_[pos_], i);
    return Status::OK();
  }

 private:
  Database* db_;
  std::vector<FactRecord> rows_;
  size_t pos_ = 0;
};

// "[1, 2]" (or NULL) given to INSERT as source_episode_ids.
Status SourcesArg(sqlite3_value* v, std::vector<uint64_t>* out) {
  out->clear();
  if (IsNull(v)) return Status::OK();
  JsonTokens j;  // not an nlohmann::json tree: its destructor allocates (json_reader.h)
  if (!ParseJson(ValueText(v), &j) || j[0].kind != JsonToken::kBeginArray) {
    return Status(kMismatchJson, "facts.source_episode_ids must be a JSON array of episode ids");
  }
  for (size_t p = 1; j[p].kind != JsonToken::kEndArray; p = JsonValueEnd(j, p)) {
    // Negative integers are kInt; kUint above INT64_MAX is refused as before.
    if (j[p].kind != JsonToken::kUint || j[p].u == 0 ||
        j[p].u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status(kMismatchJson,
                    "facts.source_episode_ids must hold positive integer episode ids");
    }
    out->push_back(j[p].u);
  }
  return Status::OK();
}

class FactsTable : public VTable {
 public:
  using VTable::VTable;

  Status BestIndex(sqlite3_index_info* info) override {
    int user_eq = -1, subject_eq = -1, predicate_eq = -1, id_eq = -1;
    for (int i = 0; i < info->nConstraint; i++) {
      const auto& c = info->aConstraint[i];
      if (!c.usable || c.op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
      if (c.iColumn == kFaUser && user_eq < 0) user_eq = i;
      if (c.iColumn == kFaSubject && subject_eq < 0) subject_eq = i;
      if (c.iColumn == kFaPredicate && predicate_eq < 0) predicate_eq = i;
      if ((c.iColumn == kFaId || c.iColumn == -1) && id_eq < 0) id_eq = i;
    }
    PlanBuilder plan(info);
    double cost = 1e7;
    int64_t rows = 1000;
    if (user_eq >= 0) {
      plan.Use(user_eq, "user_id=");
      cost = 100;
      rows = 100;
      if (OrderedByIdAsc(info, kFaId)) info->orderByConsumed = 1;
    } else if (OrderedByIdAsc(info, kFaId)) {
      info->orderByConsumed = 1;
    }
    if (subject_eq >= 0) {
      plan.Use(subject_eq, "subject=");
      cost *= 0.5;
      rows = std::max<int64_t>(rows / 10, 1);
    }
    if (predicate_eq >= 0) {
      plan.Use(predicate_eq, "predicate=");
      cost *= 0.5;
      rows = std::max<int64_t>(rows / 10, 1);
    }
    if (id_eq >= 0) {
      plan.Use(id_eq, "id=");
      cost *= 0.5;
      rows = 1;
    }
    plan.Finish(cost, rows, false);
    return Status::OK();
  }

  std::unique_ptr<VCursor> Open() override { return std::make_unique<FactsCursor>(db()); }

  Status Update(int argc, sqlite3_value** argv, sqlite3_int64* rowid) override {
    if (argc == 1 || !IsNull(argv[0])) return StatusF(kError, "facts %s", kAppendOnly);
    sqlite3_value** col = argv + 2;
    if (!IsNull(argv[1]) || !IsNull(col[kFaId])) {
      return Status(kConstraint, "facts.id is assigned by the engine; leave it out of the "
                                 "INSERT (last_insert_rowid() gives it)");
    }
    AGENTMEM_RETURN_IF_ERROR(MustBeNull(col[kFaRecorded], "facts", "recorded_at"));
    AGENTMEM_RETURN_IF_ERROR(MustBeNull(col[kFaExpired], "facts", "expired_at"));
    FactRecord r;
    AGENTMEM_RETURN_IF_ERROR(TextArg(col[kFaUser], "facts", "user_id", "", &r.user_id));
    AGENTMEM_RETURN_IF_ERROR(TextArg(col[kFaSubject], "facts", "subject", nullptr, &r.subject));
    AGENTMEM_RETURN_IF_ERROR(
        TextArg(col[kFaPredicate], "facts", "predicate", nullptr, &r.predicate));
    AGENTMEM_RETURN_IF_ERROR(TextArg(col[kFaObject], "facts", "object", nullptr, &r.object));
    double confidence = 1.0;
    if (!IsNull(col[kFaConfidence])) {
      int t = sqlite3_value_numeric_type(col[kFaConfidence]);
      if (t != SQLITE_INTEGER && t != SQLITE_FLOAT) {
        return Status(kMismatch, "facts.confidence must be a number between 0 and 1");
      }
      confidence = sqlite3_value_double(col[kFaConfidence]);
    }
    if (!(confidence >= 0.0 && confidence <= 1.0)) {
      return Status(kRange, "fact confidence must be between 0 and 1");
    }
    r.confidence = static_cast<float>(confidence);
    AGENTMEM_RETURN_IF_ERROR(SourcesArg(col[kFaSources], &r.source_episode_ids));
    AGENTMEM_RETURN_IF_ERROR(IntArg(col[kFaValidFrom], "facts", "valid_from", 0, &r.valid_from));
    AGENTMEM_RETURN_IF_ERROR(IntArg(col[kFaValidTo], "facts", "valid_to", 0, &r.valid_to));
    uint64_t id = 0;
    AGENTMEM_RETURN_IF_ERROR(db()->AssertFact(std::move(r), &id));
    *rowid = static_cast<sqlite3_int64>(id);
    return Status::OK();
  }
};

template <typename T>
VTable* Make(Session* s) {
  return new T(s);
}

}  // namespace

std::vector<ModuleSpec> TableSpecs() {
  return {
      {"agentmem_episodes", "episodes", kEpisodesSchema, true, Make<EpisodesTable>},
      {"agentmem_blocks", "blocks", kBlocksSchema, true, Make<BlocksTable>},
      {"agentmem_facts", "facts", kFactsSchema, true, Make<FactsTable>},
  };
}

}  // namespace agentmem::engine::sql
