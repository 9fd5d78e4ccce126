// format/records.h -- record codecs: episode, block version, fact, commit and
// meta records (docs/format.md §5). A record page's payload is `record_count`
// records, each prefixed by its length as a varint. Decoders are bounds-checked
// and only ever run on payloads whose page checksum has passed; a record that
// still does not parse is reported as kCorruptPage naming the page.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/status.h"

namespace agentmem::format {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();  // open end of a time range

// How an episode record stores its vector's components (docs/format.md §5.1).
enum class VectorType : uint8_t { kF32 = 0, kF16 = 1, kInt8 = 2 };

struct EpisodeRecord {
  uint64_t id = 0;
  std::string user_id;
  std::string session_id;
  std::string role;
  std::string text;
  int64_t ts = 0;          // event time, unix microseconds
  int64_t created_at = 0;  // commit time, unix microseconds
  std::string metadata;    // JSON text ("" when none)
  std::vector<float> vector;
  // kF16: stored as float16, kInt8: as int8 with a scale (format/int8.h);
  // then the vector is one those hold (RoundToStored), so that it reads back
  // as it was.
  VectorType vector_type = VectorType::kF32;
  bool operator==(const EpisodeRecord&) const = default;
};
// Whether two episodes hold the same content: every field but vector_type,
// which says how a file stores the vector, not what it is.
bool SameContent(const EpisodeRecord& a, const EpisodeRecord& b);

struct BlockRecord {
  uint64_t version = 0;  // file-wide increasing number of this block version
  std::string user_id;
  std::string name;
  std::string value;
  uint32_t limit = 0;  // maximum characters of value; 0 = no limit
  int32_t pinned_order = -1;  // order among pinned blocks; -1 = not pinned
  int64_t updated_at = 0;
  bool operator==(const BlockRecord&) const = default;
};

struct FactRecord {
  uint64_t id = 0;
  std::string user_id;
  std::string subject;
  std::string predicate;
  std::string object;
  float confidence = 1.0f;
  std::vector<uint64_t> source_episode_ids;
  int64_t valid_from = 0;
  int64_t valid_to = kForever;
  int64_t recorded_at = 0;
  int64_t expired_at = kForever;
  bool operator==(const FactRecord&) const = default;
};

// The record that ends a transaction. A transaction is its pages from
// txn_start up to this page; see docs/format.md §6 for when it counts.
struct CommitRecord {
  uint64_t commit_seq = 0;
  uint64_t txn_start = 0;        // offset of the transaction's first page
  uint64_t durable_through = 0;  // the writer had synced every byte before this offset
  uint32_t page_count = 0;       // pages of the transaction before this commit page
  int64_t commit_ts = 0;
  uint64_t next_episode_id = 1;
  uint64_t next_fact_id = 1;
  uint64_t next_block_version = 1;
  bool operator==(const CommitRecord&) const = default;
};

// An episode's BM25 terms, as the file's tokenizer produced them when it was
// committed: the text index is rebuilt from these, never by tokenizing again.
struct TextRecord {
  uint64_t episode_id = 0;
  uint32_t doc_len = 0;  // tokens in all; the sum of the counts
  std::vector<std::pair<std::string, uint32_t>> terms;  // distinct terms, tf >= 1
  bool operator==(const TextRecord&) const = default;
};

// What a transaction forgets (docs/format.md §5.9). It applies after the
// transaction's other records, to everything committed up to then; what it
// matches becomes invisible to every read from that commit on, and is removed
// from the file by the next VACUUM. Facts whose every source episode is
// forgotten are forgotten with them.
enum class ForgetKind : uint8_t {
  kUser = 1,     // every episode, block and fact of user_id
  kSession = 2,  // the episodes of (user_id, session_id)
  kBefore = 3,   // the episodes of user_id with ts < before
  kEpisode = 4,  // episode `id`
  kFact = 5,     // fact `id`
  kBlock = 6,    // every version of block (user_id, name)
  // Retention: every user's episodes with ts < before, except, when the
  // file's retention.episodes.keep_cited is 1, those a live fact cites.
  kRetention = 7,
};
struct ForgetRecord {
  ForgetKind kind = ForgetKind::kUser;
  std::string user_id;
  std::string session_id;  // kSession
  std::string name;        // kBlock
  int64_t before = 0;      // kBefore
  uint64_t id = 0;         // kEpisode, kFact
  bool operator==(const ForgetRecord&) const = default;
};

// File settings as key/value pairs; a later meta record overrides earlier keys.
struct MetaRecord {
  std::vector<std::pair<std::string, std::string>> entries;
  bool operator==(const MetaRecord&) const = default;
};

void EncodeEpisode(const EpisodeRecord& r, std::string* dst);
void EncodeBlock(const BlockRecord& r, std::string* dst);
void EncodeFact(const FactRecord& r, std::string* dst);
void EncodeMeta(const MetaRecord& r, std::string* dst);
void EncodeText(const TextRecord& r, std::string* dst);
void EncodeForget(const ForgetRecord& r, std::string* dst);
std::string EncodeCommit(const CommitRecord& r);

Status DecodeEpisode(std::string_view in, int64_t page_no, EpisodeRecord* out);
// An episode record's id and its vector's bytes as stored (*type says how;
// empty when it has none, a view into `in`), checked as DecodeEpisode checks
// the record but for the components' values (StoredToFloats checks those),
// without copying its strings.
Status EpisodeVectorOf(std::string_view in, int64_t page_no, uint64_t* id, std::string_view* vector,
                       VectorType* type);
// The same for its text (a view into `in`).
Status EpisodeTextOf(std::string_view in, int64_t page_no, uint64_t* id, std::string_view* text);
// A vector's stored bytes (EpisodeVectorOf) as dim floats in dst. False when
// the bytes are not dim components of `type` or hold values no writer stores.
bool StoredToFloats(VectorType type, std::string_view stored, size_t dim, float* dst);
// The floats a record of `type` holds for `v`, in place. False when a
// component cannot be stored as `type` (beyond float16's range, or an int8
// scale that overflows); v is then unchanged.
bool RoundToStored(VectorType type, std::span<float> v);
Status DecodeBlock(std::string_view in, int64_t page_no, BlockRecord* out);
Status DecodeFact(std::string_view in, int64_t page_no, FactRecord* out);
Status DecodeMeta(std::string_view in, int64_t page_no, MetaRecord* out);
Status DecodeText(std::string_view in, int64_t page_no, TextRecord* out);
Status DecodeForget(std::string_view in, int64_t page_no, ForgetRecord* out);
Status DecodeCommit(std::string_view in, int64_t page_no, CommitRecord* out);

// Appends one record (already encoded) to a page payload, length-prefixed.
void AppendRecord(std::string_view record, std::string* payload);
// Splits a page payload into its records. Errors: kCorruptPage when the
// lengths do not add up or the count differs from `record_count`.
Status SplitRecords(std::string_view payload, uint32_t record_count, int64_t page_no,
                    std::vector<std::string_view>* records);

}  // namespace agentmem::format
