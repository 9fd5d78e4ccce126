// engine/sql/function_table.h -- the shape every table-valued function of
// the SQL front end shares (functions.cc, changes.cc): an eponymous-only
// virtual table whose arguments are HIDDEN columns after its result columns,
// so that f(a, b) is f WHERE a_col = a AND b_col = b.
//
// xBestIndex hands every argument to xFilter (in column order, the bitmask
// of the arguments present in idxNum) and refuses plans where an argument
// would come from a table scanned later in a join.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <vector>

#include "engine/sql/vtab.h"

namespace agentmem::engine::sql {

// A function table: `visible` result columns, then `args` hidden columns.
class FunctionTable : public VTable {
 public:
  FunctionTable(Session* s, int visible, int args, int required)
      : VTable(s), visible_(visible), args_(args), required_(required) {}

  Status BestIndex(sqlite3_index_info* info) override {
    std::vector<int> chosen(static_cast<size_t>(args_), -1);
    for (int i = 0; i < info->nConstraint; i++) {
      const auto& c = info->aConstraint[i];
      int a = c.iColumn - visible_;
      if (a < 0 || a >= args_ || c.op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
      if (!c.usable) return Status(kConstraint, "argument not available in this plan");
      if (chosen[a] < 0) chosen[a] = i;
    }
    int n = 0, mask = 0;
    for (int a = 0; a < args_; a++) {
      if (chosen[a] < 0) continue;
      info->aConstraintUsage[chosen[a]].argvIndex = ++n;
      info->aConstraintUsage[chosen[a]].omit = 1;
      mask |= 1 << a;
    }
    info->idxNum = mask;
    int need = (1 << required_) - 1;
    // Plans without the required arguments fail in xFilter with a message
    // that says what is missing; make them the last resort.
    info->estimatedCost = (mask & need) == need ? 10.0 : 1e15;
    info->estimatedRows = 10;
    return Status::OK();
  }

  int visible() const { return visible_; }
  int args() const { return args_; }

 private:
  int visible_, args_, required_;
};

class FunctionCursor : public VCursor {
 public:
  explicit FunctionCursor(FunctionTable* t) : table_(t) {}
  ~FunctionCursor() override { FreeArgs(); }

  Status Filter(int idx_num, const char*, int argc, sqlite3_value** argv) override {
    FreeArgs();
    args_.assign(static_cast<size_t>(table_->args()), nullptr);
    int j = 0;
    for (int a = 0; a < table_->args() && j < argc; a++) {
      if (idx_num & (1 << a)) args_[a] = sqlite3_value_dup(argv[j++]);
    }
    pos_ = 0;
    return Run();
  }
  Status Next() override {
    pos_++;
    return Status::OK();
  }
  bool Eof() const override { return pos_ >= Rows(); }
  int64_t Rowid() const override { return static_cast<int64_t>(pos_) + 1; }
  Status Column(sqlite3_context* ctx, int i) override {
    if (i >= table_->visible()) {
      sqlite3_value* v = args_[static_cast<size_t>(i - table_->visible())];
      if (v) sqlite3_result_value(ctx, v);
      else sqlite3_result_null(ctx);
      return Status::OK();
    }
    return RowColumn(ctx, i);
  }

 protected:
  virtual Status Run() = 0;
  virtual size_t Rows() const = 0;
  virtual Status RowColumn(sqlite3_context* ctx, int i) = 0;
  sqlite3_value* Arg(int a) const { return args_[static_cast<size_t>(a)]; }
  Database* db() const { return table_->db(); }

  FunctionTable* table_;
  size_t pos_ = 0;

 private:
  void FreeArgs() {
    for (sqlite3_value* v : args_) sqlite3_value_free(v);
    args_.clear();
  }
  std::vector<sqlite3_value*> args_;
};

// The ModuleSpec::make of a table class.
template <typename T>
VTable* Make(Session* s) {
  return new T(s);
}

// The specs of changes.cc: changes() and change_log().
std::vector<ModuleSpec> ChangeFeedSpecs();

}  // namespace agentmem::engine::sql
