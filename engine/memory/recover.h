// engine/memory/recover.h -- salvage of a damaged file (docs/recovery.md): every page
// that passes its checksum is read, scanning past damage; every committed
// transaction that is whole is written, in file order, into a new file
// through the ordinary commit path (so its indexes are built again); and
// what could not be kept is reported.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/memory/options.h"
#include "format/status.h"

namespace agentmem::engine {

struct RecoverReport {
  // A run of bytes where no valid page starts: from `offset` to the next
  // valid page (or the end of the file).
  struct Damage {
    uint64_t offset = 0;
    uint64_t bytes = 0;
    std::string error;        // why the page at `offset` is not valid
    uint64_t commit_seq = 0;  // the transaction it belongs to; 0: not known
  };
  // A committed transaction that is not whole (or whose records do not
  // decode): nothing of it is written, except its forget records (below).
  struct Dropped {
    uint64_t first_offset = 0;   // its first page (as far as known)
    uint64_t commit_offset = 0;  // its commit page; 0: the commit page is lost
    uint64_t commit_seq = 0;     // 0: not known
    std::string reason;
    std::vector<uint64_t> episodes;  // episode ids lost with it, where knowable
  };
  std::string source, destination;  // destination empty: a check only
  uint64_t file_bytes = 0;
  uint64_t pages_valid = 0;  // pages that passed their checksum
  bool header_damaged = false;  // the file header's checksum failed (a superblock gave the salt)
  std::vector<Damage> damage;
  uint64_t torn_bytes = 0;  // after the last commit, vouched for by nothing: an interrupted write
  uint64_t transactions_kept = 0;
  std::vector<Dropped> dropped;
  uint64_t forgets_from_dropped = 0;  // forget records of dropped transactions, still applied
  bool settings_lost = false;  // no file settings survived: defaults were used
  uint64_t checkpoint_offset = 0;  // the newest whole checkpoint whose state decodes (0: none)
  // Records of dropped transactions before it that it names as live, written;
  // and episodes written that it names as forgotten or absent, forgotten.
  uint64_t records_from_checkpoint = 0;
  uint64_t forgets_from_checkpoint = 0;
  // Written into the new file (before the forgets it holds apply).
  uint64_t episodes_written = 0, block_versions_written = 0, fact_records_written = 0;
  // Episode ids the source had assigned and this salvage could not keep,
  // as [first, last] ranges, and their number.
  std::vector<std::pair<uint64_t, uint64_t>> episodes_lost;
  uint64_t episodes_lost_count = 0;
  std::vector<uint64_t> fact_versions_dropped;  // new versions of facts whose first record was lost
  // A dropped transaction with a damaged or missing page that no checkpoint
  // after it covers: a forget record on that page is lost, so the records
  // written before it (ids and versions below these) may include some it
  // forgot, which the new file holds.
  struct ForgetsUnknown {
    uint64_t commit_seq = 0;  // 0: not known
    uint64_t episodes_below = 0, facts_below = 0, block_versions_below = 0;
  };
  std::vector<ForgetsUnknown> forgets_unknown;
  bool clean() const { return damage.empty() && dropped.empty() && !header_damaged; }
};

// Salvages `src` into a new file `dst` (empty: only reads and reports). src
// is opened read-only and never written; dst must not exist
// (kCantOpenExists) and gets src's permission bits. `opts` supplies the Env
// and the policies of the new file; its vector space and tokenizer are those
// that src records. Errors: kCantOpen, kNotADb, kFormatVersion, kIoErr*, and
// kCorruptHeader when neither the header nor a superblock gives the salt.
// A file with nothing salvageable still gives a new, empty file.
Status Recover(const std::string& src, const std::string& dst, const Options& opts,
               RecoverReport* report);

// The report as one JSON object (docs/recovery.md lists the fields).
std::string RecoverReportJson(const RecoverReport& r);

}  // namespace agentmem::engine
