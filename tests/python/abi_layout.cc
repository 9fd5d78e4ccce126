// abi_layout: prints the size of each public struct of include/agentmem.h and the
// offset of each field, so that tests/python/test_abi.py can check that the
// ctypes declarations of python/agentmem/_capi.py lay them out the same.
//   output: "STRUCT size N" and "STRUCT.FIELD offset N", one a line
#include <agentmem.h>

#include <cstddef>
#include <cstdio>

#define SIZE(T) std::printf("%s size %zu\n", #T, sizeof(T))
#define FIELD(T, f) std::printf("%s.%s offset %zu\n", #T, #f, offsetof(T, f))

int main() {
  SIZE(agentmem_episode);
  FIELD(agentmem_episode, id); FIELD(agentmem_episode, user_id);
  FIELD(agentmem_episode, session_id); FIELD(agentmem_episode, role);
  FIELD(agentmem_episode, text); FIELD(agentmem_episode, ts);
  FIELD(agentmem_episode, created_at); FIELD(agentmem_episode, metadata);
  FIELD(agentmem_episode, vector); FIELD(agentmem_episode, dim);
  SIZE(agentmem_block);
  FIELD(agentmem_block, user_id); FIELD(agentmem_block, name); FIELD(agentmem_block, value);
  FIELD(agentmem_block, limit); FIELD(agentmem_block, pinned_order);
  FIELD(agentmem_block, updated_at); FIELD(agentmem_block, version);
  SIZE(agentmem_fact);
  FIELD(agentmem_fact, id); FIELD(agentmem_fact, user_id); FIELD(agentmem_fact, subject);
  FIELD(agentmem_fact, predicate); FIELD(agentmem_fact, object);
  FIELD(agentmem_fact, confidence); FIELD(agentmem_fact, source_episode_ids);
  FIELD(agentmem_fact, n_sources); FIELD(agentmem_fact, valid_from);
  FIELD(agentmem_fact, valid_to); FIELD(agentmem_fact, recorded_at);
  FIELD(agentmem_fact, expired_at);
  SIZE(agentmem_recall_options);
  FIELD(agentmem_recall_options, version); FIELD(agentmem_recall_options, k);
  FIELD(agentmem_recall_options, mode); FIELD(agentmem_recall_options, all_users);
  FIELD(agentmem_recall_options, session_id); FIELD(agentmem_recall_options, role);
  FIELD(agentmem_recall_options, ts_from); FIELD(agentmem_recall_options, ts_to);
  FIELD(agentmem_recall_options, query_vector); FIELD(agentmem_recall_options, query_dim);
  FIELD(agentmem_recall_options, half_life_s); FIELD(agentmem_recall_options, min_score);
  FIELD(agentmem_recall_options, rrf_k); FIELD(agentmem_recall_options, metadata_key);
  FIELD(agentmem_recall_options, metadata_value);
  FIELD(agentmem_recall_options, fill); FIELD(agentmem_recall_options, min_similarity);
  FIELD(agentmem_recall_options, min_bm25);
  SIZE(agentmem_hit);
  FIELD(agentmem_hit, id); FIELD(agentmem_hit, user_id); FIELD(agentmem_hit, session_id);
  FIELD(agentmem_hit, role); FIELD(agentmem_hit, text); FIELD(agentmem_hit, ts);
  FIELD(agentmem_hit, score); FIELD(agentmem_hit, bm25_score);
  FIELD(agentmem_hit, vector_score); FIELD(agentmem_hit, bm25_rank);
  FIELD(agentmem_hit, vector_rank);
  SIZE(agentmem_stats);
  FIELD(agentmem_stats, file_bytes); FIELD(agentmem_stats, episodes);
  FIELD(agentmem_stats, blocks); FIELD(agentmem_stats, block_versions);
  FIELD(agentmem_stats, facts); FIELD(agentmem_stats, users); FIELD(agentmem_stats, commits);
  FIELD(agentmem_stats, text_bytes); FIELD(agentmem_stats, pages); FIELD(agentmem_stats, syncs);
#ifdef AGENTMEM_CONTEXT_BLOCK
  SIZE(agentmem_context_item);
  FIELD(agentmem_context_item, kind); FIELD(agentmem_context_item, id);
  FIELD(agentmem_context_item, name); FIELD(agentmem_context_item, text);
  FIELD(agentmem_context_item, tokens); FIELD(agentmem_context_item, reason);
#endif
#ifdef AGENTMEM_FORGET_PURGE
  SIZE(agentmem_receipt);
  FIELD(agentmem_receipt, episodes); FIELD(agentmem_receipt, facts);
  FIELD(agentmem_receipt, block_versions); FIELD(agentmem_receipt, vacuumed);
  FIELD(agentmem_receipt, bytes_before); FIELD(agentmem_receipt, bytes_after);
  FIELD(agentmem_receipt, needles); FIELD(agentmem_receipt, residue);
#endif
  return 0;
}
