// engine/sql/changes.cc -- the change feed in SQL (docs/replication.md):
// changes(since [, log]) streams the rows of engine/memory/changes.h as the
// statement steps, and change_log() names the file's log and its last
// commit.
#include <sqlite3.h>

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/memory/changes.h"
#include "engine/sql/function_table.h"
#include "engine/sql/vtab.h"

namespace agentmem::engine::sql {

namespace {

std::string LogText(uint64_t log_id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, log_id);
  return buf;
}

// A log id as change_log() and the rows write it: 1 to 16 hex digits.
Status ParseLog(const std::string& text, uint64_t* out) {
  *out = 0;
  if (text.empty() || text.size() > 16) {
    return Status(kMismatch, "changes(): log must be 1 to 16 hexadecimal digits, as change_log() "
                             "returns it");
  }
  for (char c : text) {
    int v = c >= '0' && c <= '9' ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0) {
      return Status(kMismatch, "changes(): log must be 1 to 16 hexadecimal digits, as "
                               "change_log() returns it");
    }
    *out = *out << 4 | static_cast<uint64_t>(v);
  }
  return Status::OK();
}

enum ChangeCol { kCcSeq, kCcKind, kCcId, kCcUser, kCcData, kCcVector, kCcCommitTs, kCcLog,
                 kCcVisible };

// Reads the feed as the statement steps: one transaction's rows in memory.
class ChangesCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

  Status Next() override {
    pos_++;
    return Read();
  }
  bool Eof() const override { return done_; }

 protected:
  Status Run() override {
    feed_.reset();
    done_ = true;
    std::optional<int64_t> since = IsNull(Arg(0)) ? std::nullopt : ValueInt(Arg(0));
    if (!since) {
      return Status(kMisuse, "changes() needs the commit sequence number to read after: "
                             "changes(since [, log])");
    }
    if (*since < 0) return Status(kRange, "changes(): since must be >= 0");
    uint64_t log_id = 0;
    if (!IsNull(Arg(1))) AGENTMEM_RETURN_IF_ERROR(ParseLog(ValueText(Arg(1)), &log_id));
    AGENTMEM_RETURN_IF_ERROR(ChangeFeed::Open(db(), log_id, static_cast<uint64_t>(*since), &feed_));
    log_text_ = LogText(feed_->log_id());
    return Read();
  }
  size_t Rows() const override { return 0; }  // not used: Eof() is done_
  Status RowColumn(sqlite3_context* ctx, int i) override {
    switch (i) {
      case kCcSeq: sqlite3_result_int64(ctx, static_cast<int64_t>(row_.seq)); break;
      case kCcKind: sqlite3_result_text(ctx, ChangeKindName(row_.kind), -1, SQLITE_STATIC); break;
      case kCcId: sqlite3_result_int64(ctx, static_cast<int64_t>(row_.id)); break;
      case kCcUser: ResultText(ctx, row_.user_id); break;
      case kCcData: ResultText(ctx, row_.data); break;
      case kCcVector:
        if (row_.vector.empty()) {
          sqlite3_result_null(ctx);
        } else {
          sqlite3_result_blob(ctx, row_.vector.data(),
                              static_cast<int>(row_.vector.size() * sizeof(float)),
                              SQLITE_TRANSIENT);
        }
        break;
      case kCcCommitTs: sqlite3_result_int64(ctx, row_.commit_ts); break;
      case kCcLog: ResultText(ctx, log_text_); break;
      default: sqlite3_result_null(ctx);
    }
    return Status::OK();
  }

 private:
  Status Read() {
    done_ = true;
    if (!feed_) return Status::OK();
    bool done = false;
    AGENTMEM_RETURN_IF_ERROR(feed_->Next(&row_, &done));
    done_ = done;
    return Status::OK();
  }

  std::unique_ptr<ChangeFeed> feed_;  // holds the statement's snapshot
  Change row_;
  std::string log_text_;
  bool done_ = true;
};

class ChangesTable : public FunctionTable {
 public:
  explicit ChangesTable(Session* s) : FunctionTable(s, kCcVisible, 2, 1) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<ChangesCursor>(this); }
};

class ChangeLogCursor : public FunctionCursor {
 public:
  using FunctionCursor::FunctionCursor;

 protected:
  Status Run() override { return ChangeFeed::Head(db(), &log_id_, &seq_); }
  size_t Rows() const override { return 1; }
  Status RowColumn(sqlite3_context* ctx, int i) override {
    if (i == 0) ResultText(ctx, LogText(log_id_));
    else sqlite3_result_int64(ctx, static_cast<int64_t>(seq_));
    return Status::OK();
  }

 private:
  uint64_t log_id_ = 0, seq_ = 0;
};

class ChangeLogTable : public FunctionTable {
 public:
  explicit ChangeLogTable(Session* s) : FunctionTable(s, 2, 0, 0) {}
  std::unique_ptr<VCursor> Open() override { return std::make_unique<ChangeLogCursor>(this); }
};

}  // namespace

std::vector<ModuleSpec> ChangeFeedSpecs() {
  return {
      {"changes", nullptr,
       "CREATE TABLE x(seq INTEGER, kind TEXT, id INTEGER, user_id TEXT, data TEXT, "
       "vector BLOB, commit_ts INTEGER, log TEXT, since HIDDEN, for_log HIDDEN)",
       false, Make<ChangesTable>},
      {"change_log", nullptr, "CREATE TABLE x(log TEXT, seq INTEGER)", false,
       Make<ChangeLogTable>},
  };
}

}  // namespace agentmem::engine::sql
