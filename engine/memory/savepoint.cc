// engine/memory/savepoint.cc -- savepoints in a transaction (SQL's SAVEPOINT, RELEASE
// and ROLLBACK TO): marks on the pending writes, and the undo of the writes
// made after one.
//
// A transaction's writes are appended to the pending vectors (episodes,
// blocks, facts, meta entries, forgets), and what the next
// writes get -- the next episode id, fact id and block version -- is computed
// from those vectors (episode_id_limit, NextFactId, NextIds). So a savepoint
// is the size of each vector plus counters_floor_ (ReserveIds), and a
// rollback to it cuts every vector back to its size. Two things are not
// appends:
//  - PutPendingFact replaces a pending fact in place when the transaction
//    supersedes (or corrects) a fact it wrote itself. The version it replaces
//    is kept in replaced_facts_ while a savepoint would need it, and a
//    rollback puts it back.
//  - pending_embed_ (episodes waiting for the application's embedder) is
//    emptied when a batch is embedded. A rollback drops the entries of the
//    episodes it drops; a kept episode whose vector was computed after the
//    savepoint keeps it (the commit would compute the same).
// Nothing else moves before a commit: the catalog, the indexes and the
// snapshot's counters change only when a commit is read back (ApplyScanned).
// Nothing here does I/O, and a rollback allocates nothing.
#include <algorithm>
#include <string>
#include <utility>

#include "engine/memory/database.h"

namespace agentmem::engine {

namespace {

Status NoSuchSavepoint(const std::string& name) {
  return Status(kNotFound, "no such savepoint: " + name);
}

// The newest savepoint named `name`, or marks.size().
template <typename Marks>
size_t FindSavepoint(const Marks& marks, const std::string& name) {
  for (size_t i = marks.size(); i-- > 0;) {
    if (marks[i].name == name) return i;
  }
  return marks.size();
}

template <typename V>
void CutTo(V* v, size_t n) {
  if (n < v->size()) v->erase(v->begin() + static_cast<std::ptrdiff_t>(n), v->end());
}

}  // namespace

Status Database::Savepoint(std::string name) {
  bool began = false;
  if (!explicit_txn_) {
    AGENTMEM_RETURN_IF_ERROR(Begin());  // refuses a closed or poisoned handle
    began = true;
  } else {
    // Refuses a closed or poisoned handle; a transaction's snapshot stays.
    AGENTMEM_RETURN_IF_ERROR(RefreshForRead());
  }
  PendingMarks m;
  m.name = std::move(name);
  m.episodes = pending_episodes_.size();
  m.blocks = pending_blocks_.size();
  m.facts = pending_facts_.size();
  m.meta = pending_meta_.entries.size();
  m.forgets = pending_forgets_.size();
  m.replaced_facts = replaced_facts_.size();
  m.floor = counters_floor_;
  m.began = began;
  savepoints_.push_back(std::move(m));
  return Status::OK();
}

Status Database::Release(const std::string& name) {
  if (closed_) return Status(kMisuse, "database is closed");
  const size_t i = FindSavepoint(savepoints_, name);
  if (i == savepoints_.size()) return NoSuchSavepoint(name);
  const bool commit = savepoints_[i].began;
  CutTo(&savepoints_, i);
  if (savepoints_.empty()) replaced_facts_.clear();
  return commit ? Commit() : Status::OK();
}

Status Database::RollbackTo(const std::string& name) {
  AGENTMEM_RETURN_IF_ERROR(RefreshForRead());  // refuses a closed or poisoned handle
  const size_t i = FindSavepoint(savepoints_, name);
  if (i == savepoints_.size()) return NoSuchSavepoint(name);
  const PendingMarks& m = savepoints_[i];
  // Pending facts replaced in place since the mark, newest first: the
  // version the mark saw is the oldest one kept.
  while (replaced_facts_.size() > m.replaced_facts) {
    auto& [index, record] = replaced_facts_.back();
    if (index < m.facts) pending_facts_[index] = std::move(record);
    replaced_facts_.pop_back();
  }
  CutTo(&pending_episodes_, m.episodes);
  std::erase_if(pending_embed_, [&](size_t e) { return e >= m.episodes; });
  CutTo(&pending_blocks_, m.blocks);
  CutTo(&pending_facts_, m.facts);
  CutTo(&pending_meta_.entries, m.meta);
  CutTo(&pending_forgets_, m.forgets);
  counters_floor_ = m.floor;
  CutTo(&savepoints_, i + 1);
  return Status::OK();
}

void Database::NoteFactReplaced(size_t i) {
  // A fact written after the innermost savepoint is dropped whole by any
  // rollback; one written before it must come back as it was.
  if (savepoints_.empty() || i >= savepoints_.back().facts) return;
  replaced_facts_.emplace_back(i, pending_facts_[i]);
}

void Database::ClearSavepoints() {
  savepoints_.clear();
  replaced_facts_.clear();
}

}  // namespace agentmem::engine
