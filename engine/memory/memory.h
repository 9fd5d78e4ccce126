// engine/memory/memory.h -- what an agent asks of its memory as a whole, built over
// the public Database API: context assembly for a token budget, a per-user
// profile, and export / idempotent import of one user's memory as JSON lines
// (docs/memory.md is the contract: rules, token estimate, every field).
//
// Thread safety: none of its own. Each function runs on one Database, which
// the caller serialises (the C ABI holds the handle's mutex).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/memory/database.h"
#include "format/status.h"

namespace agentmem::engine {

// ---------------------------------------------------------------- context

enum class ContextKind : int { kBlock = 1, kFact = 2, kEpisode = 3 };

struct ContextItem {
  ContextKind kind = ContextKind::kBlock;
  uint64_t id = 0;     // block version, fact id or episode id
  std::string name;    // the block's name; "" for facts and episodes
  std::string text;    // what goes into the prompt: block value, "s p o", episode text
  uint32_t tokens = 0; // EstimateTokens(text)
  std::string reason;  // why it was included, e.g. "current fact, bm25 rank 2"
};

// The token estimate of context assembly: ceil(UTF-8 bytes / 4); 0 for "".
uint32_t EstimateTokens(std::string_view text);

// Pinned blocks (by pinned_order, then name), then the user's current facts
// (by BM25 over "subject predicate object" against the query, then
// confidence), then hybrid-recalled episodes (by fused rank), each item at
// most once, skipping an item that does not fit what is left of the budget
// (a later, smaller one may still fit). The tokens of *out never sum to more
// than token_budget. Errors: kRange for a negative budget; recall's errors.
Status AssembleContext(Database* db, const std::string& user_id, const std::string& query,
                       int64_t token_budget, std::vector<ContextItem>* out);

// ---------------------------------------------------------------- profile

// One JSON object: counts of episodes, sessions, blocks, block versions,
// facts and current facts, the event-time span of the episodes, episodes per
// role, and the top current facts by confidence (docs/memory.md, "Profile").
Status ProfileJson(Database* db, const std::string& user_id, std::string* json);

// ---------------------------------------------------------------- export / import

// One user's whole memory as JSON lines: a header line, the episodes in id
// order, every block version in write order, the facts in id order. Two
// files holding the same memory export the same bytes.
Status ExportUser(Database* db, const std::string& user_id, std::string* jsonl);
// The whole file the same way: a header of scope "file", the file's settings
// (declared predicates, the retention policy), then every user's episodes by
// id, block versions by version and facts by id (docs/export.md).
Status ExportFile(Database* db, std::string* jsonl);

struct ImportCounts {
  uint64_t episodes = 0, block_versions = 0, facts = 0;  // written
  uint64_t skipped = 0;  // already present, identical
  uint64_t added() const { return episodes + block_versions + facts; }
};

// Imports what ExportUser or ExportFile wrote (any number of exports concatenated).
// Idempotent: a record already present and identical is skipped, so a
// second import of the same text adds nothing. A record whose id is taken by
// different content, or a header whose vector space differs from the file's,
// fails the whole import with kConstraint / kMismatch and writes nothing:
// every line is checked first, then all are written in one transaction (the
// caller's, when one is open). Malformed lines: kMismatchJson naming the line.
// With new_ids, episodes and facts get the file's next ids instead (fact
// sources follow their episodes), and "present" means the same content.
Status ImportJsonl(Database* db, std::string_view jsonl, ImportCounts* counts,
                   bool new_ids = false);

}  // namespace agentmem::engine
