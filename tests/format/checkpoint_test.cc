// tests/format/checkpoint_test.cc -- the checkpoint section codecs
// (format/checkpoint.h, docs/format.md §5.8): the section header, the state
// section and the bm25 directory. Every index and count a decoder checks is
// exercised with a bad input built by the encoders (or, where the encoder
// cannot express the fault, byte by byte), and each refusal must be
// kCorruptPage naming the page.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/checkpoint.h"
#include "format/coding.h"

using namespace agentmem;
using namespace agentmem::format;

namespace {

constexpr int64_t kPageNo = 4242;

// Three episodes: 1 live with a vector and a graph node, 2 deleted (no
// entry), 3 forgotten but still a graph node; two block versions, two
// facts and the BM25 terms of episode 1.
CheckpointState SampleState() {
  CheckpointState s;
  s.next_episode_id = 4;
  s.next_fact_id = 3;
  s.next_block_version = 3;
  s.pages = 12;
  s.text_bytes = 50;
  s.meta = {{"vector.dim", "8"}, {"vector.metric", "cosine"}};
  s.strings = {"ann", "s1", "user"};
  s.episodes = {{1, 4096, 0, 0, 1, 2, 100, true, false, 0},
                {3, 4224, 1, 0, 1, 2, -5, true, true, 1}};  // id 2: no episode
  s.blocks = {{0, "notes", 1, 4352, 0}, {0, "notes", 2, 4480, 0}};
  s.facts = {{1, 0, 4608, 0}, {2, 0, 4608, 1}};
  TextRecord t;
  t.episode_id = 1;
  t.doc_len = 3;
  t.terms = {{"cat", 2}, {"mat", 1}};
  s.texts = {t};
  return s;
}

// The state section body of `s` (the payload without its section header).
std::string StateBody(const CheckpointState& s) {
  std::string payload;
  EncodeCheckpointState(s, &payload);
  return payload.substr(kSectionHeaderSize);
}

// A copy of exactly the given bytes on the heap, so that AddressSanitizer
// reports any read past them.
std::unique_ptr<char[]> ExactCopy(std::string_view s) {
  std::unique_ptr<char[]> p(new char[s.size() + 1]);
  std::memcpy(p.get(), s.data(), s.size());
  return p;
}

// The refusal every checkpoint decoder gives: kCorruptPage naming the page
// and saying what is wrong.
void CheckRefused(const Status& s, const char* why) {
  CAPTURE(s.ToString());
  CHECK(s.code() == kCorruptPage);
  CHECK(s.page_no() == kPageNo);
  CHECK(s.message().find("page " + std::to_string(kPageNo) + " (checkpoint)") != std::string::npos);
  CHECK(s.message().find(why) != std::string::npos);
}

Status DecodeState(std::string_view body, CheckpointState* out) {
  auto copy = ExactCopy(body);
  return DecodeCheckpointState(std::string_view(copy.get(), body.size()), kPageNo, out);
}

// SampleState() with `change` made, encoded, must be refused saying `why`
// (a refusal from the text record decoder names the page without
// "(checkpoint)").
void CheckStateRefused(void (*change)(CheckpointState*), const char* why,
                       bool checkpoint_message = true) {
  CheckpointState s = SampleState();
  change(&s);
  CheckpointState back;
  Status st = DecodeState(StateBody(s), &back);
  if (checkpoint_message) {
    CheckRefused(st, why);
    return;
  }
  CAPTURE(st.ToString());
  CHECK(st.code() == kCorruptPage);
  CHECK(st.page_no() == kPageNo);
  CHECK(st.message().find(why) != std::string::npos);
}

// A state section with one string and one episode entry written field by
// field, for the faults the encoder cannot express.
std::string OneEpisodeBody(uint64_t flags, uint64_t node, uint64_t user = 0) {
  std::string b;
  for (uint64_t v : {2, 1, 1, 0, 0}) PutVarint(&b, v);  // next ids, pages, text bytes
  PutVarint(&b, 0);                                     // meta
  PutVarint(&b, 1);                                     // strings
  PutString(&b, "ann");
  PutVarint(&b, 1);  // episodes
  PutVarint(&b, 1);  // id 1
  PutVarint(&b, 4096);
  PutVarint(&b, 0);  // slot
  PutVarint(&b, user);
  PutVarint(&b, 0);  // session
  PutVarint(&b, 0);  // role
  PutSignedVarint(&b, 7);
  b.push_back(static_cast<char>(flags));
  PutVarint(&b, node);
  for (int list = 0; list < 3; list++) PutVarint(&b, 0);  // blocks, facts, texts
  return b;
}

struct Entry {
  uint32_t user = 0;
  uint32_t reserved = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// A bm25 section body: the directory of `entries`, then `image_bytes` bytes.
std::string Bm25Body(const std::vector<Entry>& entries, size_t image_bytes) {
  std::string b;
  PutFixed64(&b, entries.size());
  for (const Entry& e : entries) {
    PutFixed32(&b, e.user);
    PutFixed32(&b, e.reserved);
    PutFixed64(&b, e.offset);
    PutFixed64(&b, e.size);
  }
  b.append(image_bytes, '\x5a');
  return b;
}

}  // namespace

TEST_SUITE_BEGIN("format checkpoint");

// ---------------------------------------------------------------- sections

TEST_CASE("a checkpoint page payload starts with its section kind and a zero word") {
  std::string graph, bm25, state;
  EncodeGraphSectionHeader(&graph);
  EncodeBm25SectionHeader(&bm25);
  EncodeCheckpointState(CheckpointState{}, &state);
  const std::pair<const std::string*, CheckpointSection> cases[] = {
      {&state, CheckpointSection::kState},
      {&bm25, CheckpointSection::kBm25},
      {&graph, CheckpointSection::kGraph}};
  for (const auto& [payload, want] : cases) {
    REQUIRE(payload->size() >= kSectionHeaderSize);
    CHECK(DecodeFixed32(payload->data()) == static_cast<uint32_t>(want));
    CHECK(DecodeFixed32(payload->data() + 4) == 0);
    CheckpointSection kind{};
    std::string_view body;
    const std::string with_body = *payload + "tail";
    REQUIRE(SplitSection(with_body, kPageNo, &kind, &body).ok());
    CHECK(kind == want);
    CHECK(body == payload->substr(kSectionHeaderSize) + "tail");
  }
}

TEST_CASE("a checkpoint payload shorter than its section header is refused naming the page") {
  std::string graph;
  EncodeGraphSectionHeader(&graph);
  for (size_t n = 0; n < kSectionHeaderSize; n++) {
    CheckpointSection kind{};
    std::string_view body;
    CheckRefused(SplitSection(std::string_view(graph).substr(0, n), kPageNo, &kind, &body),
                 "no section header");
  }
}

TEST_CASE("a checkpoint section of an unknown kind or with its reserved word set is refused") {
  for (uint32_t kind : {0u, 4u, 0xffffffffu}) {
    std::string payload;
    PutFixed32(&payload, kind);
    PutFixed32(&payload, 0);
    CheckpointSection k{};
    std::string_view body;
    CAPTURE(kind);
    CheckRefused(SplitSection(payload, kPageNo, &k, &body), "unknown section");
  }
  std::string payload;
  EncodeBm25SectionHeader(&payload);
  payload[5] = 1;  // the reserved word
  CheckpointSection k{};
  std::string_view body;
  CheckRefused(SplitSection(payload, kPageNo, &k, &body), "unknown section");
}

// ---------------------------------------------------------------- state section

TEST_CASE("a checkpoint state section round-trips, deleted and forgotten episodes included") {
  const CheckpointState s = SampleState();
  std::string payload;
  EncodeCheckpointState(s, &payload);
  CheckpointSection kind{};
  std::string_view body;
  REQUIRE(SplitSection(payload, kPageNo, &kind, &body).ok());
  CHECK(kind == CheckpointSection::kState);
  CheckpointState back;
  Status st = DecodeState(body, &back);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  CHECK(back == s);
  REQUIRE(back.episodes.size() == 2);
  CHECK(back.episodes[0].node == 0);
  CHECK(back.episodes[1].id == 3);
  CHECK(back.episodes[1].forgotten);
}

TEST_CASE("an empty checkpoint state round-trips and an episode without a node keeps none") {
  CheckpointState empty;
  CheckpointState back = SampleState();
  REQUIRE(DecodeState(StateBody(empty), &back).ok());
  CHECK(back == empty);
  CheckpointState s;
  s.next_episode_id = 2;
  s.strings = {"u"};
  s.episodes = {{1, 8192, 3, 0, 0, 0, 1, false, false, UINT32_MAX}};
  REQUIRE(DecodeState(StateBody(s), &back).ok());
  CHECK(back == s);
  CHECK(back.episodes[0].node == UINT32_MAX);
}

TEST_CASE("a checkpoint state cut short at any length or with bytes after it is refused") {
  const std::string good = StateBody(SampleState());
  CheckpointState back;
  for (size_t n = 0; n < good.size(); n++) {
    CAPTURE(n);
    Status s = DecodeState(std::string_view(good).substr(0, n), &back);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == kPageNo);
  }
  for (const std::string& extra : {std::string(1, '\0'), std::string(3, '\x7f')}) {
    CheckRefused(DecodeState(good + extra, &back), "cut short or overlong");
  }
}

TEST_CASE("a checkpoint state whose list count exceeds its remaining bytes is refused") {
  // Each list entry takes at least one byte, so a count past the bytes left
  // is refused before anything is allocated for it.
  for (int list = 0; list < 6; list++) {
    CAPTURE(list);
    std::string b;
    for (uint64_t v : {1, 1, 1, 0, 0}) PutVarint(&b, v);
    for (int i = 0; i < list; i++) PutVarint(&b, 0);
    PutVarint(&b, uint64_t{1} << 40);
    CheckpointState back;
    Status s = DecodeState(b, &back);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == kPageNo);
  }
}

TEST_CASE("a checkpoint state whose episode ids are out of order or reach the next id is refused") {
  CheckpointState s = SampleState();
  s.next_episode_id = 3;  // the entry of episode 3
  CheckpointState back;
  CheckRefused(DecodeState(StateBody(s), &back), "episode ids out of order or range");
  s = SampleState();
  s.episodes[1].id = 1;  // a repeated id: delta 0
  CheckRefused(DecodeState(StateBody(s), &back), "episode ids out of order or range");
  s = SampleState();
  s.episodes[0].page_offset = 0;
  CheckRefused(DecodeState(StateBody(s), &back), "episode ids out of order or range");
}

TEST_CASE("a checkpoint state lists only the episodes there are, however large their ids") {
  CheckpointState s = SampleState();
  s.next_episode_id = uint64_t{1} << 63;
  s.episodes[1].id = s.next_episode_id - 1;
  const std::string body = StateBody(s);
  CHECK(body.size() < 200);
  CheckpointState back;
  REQUIRE(DecodeState(body, &back).ok());
  CHECK(back == s);
}

TEST_CASE("a checkpoint state whose episode count exceeds what its bytes could hold is refused") {
  CheckpointState s = SampleState();
  std::string b = StateBody(s);
  // The episode count follows the string table; raise it past bytes / 9.
  std::string head;
  for (uint64_t v : {s.next_episode_id, s.next_fact_id, s.next_block_version, s.pages, s.text_bytes}) {
    PutVarint(&head, v);
  }
  PutVarint(&head, s.meta.size());
  for (const auto& [k, v] : s.meta) {
    PutString(&head, k);
    PutString(&head, v);
  }
  PutVarint(&head, s.strings.size());
  for (const auto& str : s.strings) PutString(&head, str);
  REQUIRE(b.compare(0, head.size(), head) == 0);
  REQUIRE(b[head.size()] == 2);
  const std::string rest = b.substr(head.size() + 1);
  std::string bad = head;
  PutVarint(&bad, rest.size() / 9 + 1);
  CheckpointState back;
  CheckRefused(DecodeState(bad + rest, &back), "episode count exceeds the section");
}

TEST_CASE("a checkpoint episode naming a string out of range is refused naming the page") {
  for (int field = 0; field < 3; field++) {
    CAPTURE(field);
    CheckpointState s = SampleState();
    uint32_t* index[] = {&s.episodes[0].user, &s.episodes[0].session, &s.episodes[0].role};
    *index[field] = static_cast<uint32_t>(s.strings.size());
    CheckpointState back;
    CheckRefused(DecodeState(StateBody(s), &back), "episode entry out of range");
  }
}

TEST_CASE("a checkpoint episode with unknown flags or a node that does not fit is refused") {
  CheckpointState back;
  REQUIRE(DecodeState(OneEpisodeBody(1, 5), &back).ok());
  CHECK(back.episodes[0].node == 4);
  REQUIRE(DecodeState(OneEpisodeBody(3, 1), &back).ok());
  CHECK(back.episodes[0].forgotten);
  REQUIRE(DecodeState(OneEpisodeBody(1, uint64_t{UINT32_MAX}), &back).ok());
  CHECK(back.episodes[0].node == UINT32_MAX - 1);
  SUBCASE("flags past the two defined bits") {
    CheckRefused(DecodeState(OneEpisodeBody(4, 0), &back), "episode entry out of range");
  }
  SUBCASE("a node number past 32 bits") {
    CheckRefused(DecodeState(OneEpisodeBody(1, uint64_t{UINT32_MAX} + 1), &back),
                 "episode entry out of range");
  }
  SUBCASE("a node without a vector") {
    CheckRefused(DecodeState(OneEpisodeBody(0, 3), &back), "episode entry out of range");
  }
  SUBCASE("forgotten without a vector") {
    CheckRefused(DecodeState(OneEpisodeBody(2, 0), &back), "episode entry out of range");
  }
  SUBCASE("forgotten without its graph node") {
    CheckRefused(DecodeState(OneEpisodeBody(3, 0), &back), "episode entry out of range");
  }
  SUBCASE("a user string past the table, written by hand") {
    CheckRefused(DecodeState(OneEpisodeBody(1, 1, 1), &back), "episode entry out of range");
  }
}

TEST_CASE("a checkpoint block version out of range or out of order is refused") {
  const char* why = "block entry out of range";
  SUBCASE("its user is not in the string table") {
    CheckStateRefused([](CheckpointState* s) { s->blocks[1].user = 3; }, why);
  }
  SUBCASE("version 0") {
    CheckStateRefused([](CheckpointState* s) { s->blocks[0].version = 0; }, why);
  }
  SUBCASE("a version not below the next block version") {
    CheckStateRefused([](CheckpointState* s) { s->blocks[1].version = s->next_block_version; }, why);
  }
  SUBCASE("versions repeated") {
    CheckStateRefused([](CheckpointState* s) { s->blocks[1].version = 1; }, why);
  }
  SUBCASE("versions decreasing") {
    CheckStateRefused([](CheckpointState* s) { std::swap(s->blocks[0], s->blocks[1]); }, why);
  }
}

TEST_CASE("a checkpoint fact out of range or out of order is refused") {
  const char* why = "fact entry out of range";
  SUBCASE("its user is not in the string table") {
    CheckStateRefused([](CheckpointState* s) { s->facts[0].user = 99; }, why);
  }
  SUBCASE("id 0") {
    CheckStateRefused([](CheckpointState* s) { s->facts[0].id = 0; }, why);
  }
  SUBCASE("an id not below the next fact id") {
    CheckStateRefused([](CheckpointState* s) { s->facts[1].id = 3; }, why);
  }
  SUBCASE("ids repeated") {
    CheckStateRefused([](CheckpointState* s) { s->facts[1].id = 1; }, why);
  }
}

TEST_CASE("a checkpoint text entry for an episode it cannot belong to is refused") {
  const char* why = "text entry out of range";
  SUBCASE("episode id 0") {
    CheckStateRefused([](CheckpointState* s) { s->texts[0].episode_id = 0; }, why);
  }
  SUBCASE("an id past the episode list") {
    CheckStateRefused([](CheckpointState* s) { s->texts[0].episode_id = 4; }, why);
  }
  SUBCASE("a deleted episode") {
    CheckStateRefused([](CheckpointState* s) { s->texts[0].episode_id = 2; }, why);
  }
  SUBCASE("a forgotten episode") {
    CheckStateRefused([](CheckpointState* s) { s->texts[0].episode_id = 3; }, why);
  }
  SUBCASE("the same episode twice") {
    CheckStateRefused([](CheckpointState* s) { s->texts.push_back(s->texts[0]); }, why);
  }
  SUBCASE("a text record whose counts do not add up") {
    CheckStateRefused([](CheckpointState* s) { s->texts[0].doc_len = 4; }, "malformed text record",
                      /*checkpoint_message=*/false);
  }
}

TEST_CASE("a refused checkpoint state leaves the output untouched") {
  CheckpointState s = SampleState();
  s.facts[1].id = 1;
  CheckpointState out = SampleState();
  out.pages = 99;
  REQUIRE(!DecodeState(StateBody(s), &out).ok());
  CHECK(out.pages == 99);
  CHECK(out.facts == SampleState().facts);
}

// ---------------------------------------------------------------- bm25 directory

TEST_CASE("a bm25 directory written for some images lays them out after it and reads back") {
  std::vector<Bm25Partition> parts = {{2, 0, 16}, {0, 0, 8}, {1, 0, 0}};
  std::string body;
  const uint64_t size = EncodeBm25Directory(parts, &body);
  // 8 + 3 * 24 = 80 bytes of directory, then the images in order.
  CHECK(size == 80 + 16 + 8);
  CHECK(parts[0].offset == 80);
  CHECK(parts[1].offset == 96);
  CHECK(parts[2].offset == 104);
  body.append(24, '\x5a');
  CHECK(body == Bm25Body({{2, 0, 80, 16}, {0, 0, 96, 8}, {1, 0, 104, 0}}, 24));
  std::vector<Bm25Partition> read;
  Status s = DecodeBm25Directory(body, kPageNo, 3, &read);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(read.size() == parts.size());
  for (size_t i = 0; i < parts.size(); i++) {
    CHECK(read[i].user == parts[i].user);
    CHECK(read[i].offset == parts[i].offset);
    CHECK(read[i].size == parts[i].size);
  }
  std::vector<Bm25Partition> none;
  std::string empty;
  CHECK(EncodeBm25Directory(none, &empty) == 8);
  REQUIRE(DecodeBm25Directory(empty, kPageNo, 0, &read).ok());
  CHECK(read.empty());
}

TEST_CASE("a bm25 directory lists each user's image, 8-byte aligned, covering the body") {
  // Two entries: the directory takes 8 + 2 * 24 = 56 bytes, so the images
  // start at 56 and follow each other.
  const std::string body = Bm25Body({{2, 0, 56, 16}, {0, 0, 72, 8}}, 24);
  std::vector<Bm25Partition> parts = {{9, 9, 9}};
  Status s = DecodeBm25Directory(body, kPageNo, 3, &parts);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].user == 2);
  CHECK(parts[0].offset == 56);
  CHECK(parts[0].size == 16);
  CHECK(parts[1].user == 0);
  CHECK(parts[1].offset == 72);
  CHECK(parts[1].size == 8);
  // No users: the count alone; an empty image is allowed.
  REQUIRE(DecodeBm25Directory(Bm25Body({}, 0), kPageNo, 0, &parts).ok());
  CHECK(parts.empty());
  REQUIRE(DecodeBm25Directory(Bm25Body({{0, 0, 32, 0}}, 0), kPageNo, 1, &parts).ok());
  CHECK(parts.size() == 1);
}

TEST_CASE("a bm25 directory shorter than its count or its entries is refused") {
  std::vector<Bm25Partition> parts;
  const std::string good = Bm25Body({{0, 0, 32, 8}}, 8);
  for (size_t n = 0; n < good.size(); n++) {
    CAPTURE(n);
    auto copy = ExactCopy(std::string_view(good).substr(0, n));
    Status s = DecodeBm25Directory(std::string_view(copy.get(), n), kPageNo, 1, &parts);
    CHECK(s.code() == kCorruptPage);
    CHECK(s.page_no() == kPageNo);
  }
  CheckRefused(DecodeBm25Directory(good.substr(0, 7), kPageNo, 1, &parts), "cut short");
  CheckRefused(DecodeBm25Directory(good.substr(0, 31), kPageNo, 1, &parts), "cut short");
  std::string huge;
  PutFixed64(&huge, UINT64_MAX / 2);
  huge.append(48, '\0');
  CheckRefused(DecodeBm25Directory(huge, kPageNo, 1, &parts), "cut short");
}

TEST_CASE("a bm25 directory entry out of range is refused naming the page") {
  std::vector<Bm25Partition> parts;
  SUBCASE("a user past the string table") {
    CheckRefused(DecodeBm25Directory(Bm25Body({{1, 0, 32, 8}}, 8), kPageNo, 1, &parts),
                 "entry out of range");
  }
  SUBCASE("its reserved word set") {
    CheckRefused(DecodeBm25Directory(Bm25Body({{0, 1, 32, 8}}, 8), kPageNo, 1, &parts),
                 "entry out of range");
  }
  SUBCASE("a gap before an image") {
    CheckRefused(DecodeBm25Directory(Bm25Body({{0, 0, 40, 8}}, 16), kPageNo, 1, &parts),
                 "entry out of range");
  }
  SUBCASE("images overlapping") {
    CheckRefused(
        DecodeBm25Directory(Bm25Body({{0, 0, 56, 16}, {1, 0, 64, 8}}, 24), kPageNo, 2, &parts),
        "entry out of range");
  }
  SUBCASE("an image running past the body") {
    CheckRefused(DecodeBm25Directory(Bm25Body({{0, 0, 32, 16}}, 8), kPageNo, 1, &parts),
                 "entry out of range");
  }
  SUBCASE("an image whose size is not a multiple of 8") {
    CheckRefused(DecodeBm25Directory(Bm25Body({{0, 0, 32, 4}}, 8), kPageNo, 1, &parts),
                 "entry out of range");
  }
}

TEST_CASE("a bm25 section with bytes after its last image is refused") {
  std::vector<Bm25Partition> parts;
  CheckRefused(DecodeBm25Directory(Bm25Body({{0, 0, 32, 8}}, 16), kPageNo, 1, &parts),
               "bytes no entry covers");
  CheckRefused(DecodeBm25Directory(Bm25Body({}, 8), kPageNo, 0, &parts), "bytes no entry covers");
}

TEST_SUITE_END();
