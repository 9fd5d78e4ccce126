// tests/index/text/glove_embedder_test.cc -- the built-in semantic embedders
// "agentmem-glove-v2" and "-v1" (index/text/glove_embedder.h): the table's
// layout checks, each step of the definition, known neighbours, determinism,
// words outside the table, empty text. The cases that need the linked table say they skip in a build
// without it (meson option glove_table=none).
#include "index/text/glove_embedder.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace agentmem::index {
namespace {

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); i++) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

double Norm(const std::vector<float>& v) { return std::sqrt(Dot(v, v)); }

// The linked embedder, or nullopt (with a message) in a build without it.
std::optional<GloveEmbedder> Linked() {
  auto e = GloveEmbedder::Create();
  if (!e.ok()) {
    MESSAGE("skipped: " << e.status().message());
    CHECK(e.status().code() == kNotFound);
    CHECK_FALSE(GloveTable::HasLinked());
    return std::nullopt;
  }
  CHECK(GloveTable::HasLinked());
  return e.value();
}

double Sim(const GloveEmbedder& e, const char* a, const char* b) {
  return Dot(e.Embed(a), e.Embed(b));
}

// A table in the layout of glove_embedder.h, float32, of the given words and
// vectors (100 floats each).
std::vector<uint32_t> Table(const std::vector<std::string>& words,
                            const std::vector<std::vector<float>>& rows) {
  std::string blob;
  std::vector<uint32_t> offsets{0};
  for (const std::string& w : words) {
    blob += w;
    offsets.push_back(static_cast<uint32_t>(blob.size()));
  }
  while (blob.size() % 4) blob.push_back('\0');
  std::vector<uint32_t> t(6);
  std::memcpy(t.data(), "AMGLOVE1", 8);
  t[2] = 100;
  t[3] = static_cast<uint32_t>(words.size());
  t[4] = 0;
  t[5] = static_cast<uint32_t>(blob.size());
  t.insert(t.end(), offsets.begin(), offsets.end());
  size_t at = t.size();
  t.resize(at + blob.size() / 4);
  std::memcpy(t.data() + at, blob.data(), blob.size());
  for (const std::vector<float>& row : rows) {
    at = t.size();
    t.resize(at + 100);
    std::memcpy(t.data() + at, row.data(), 400);
  }
  return t;
}

// Table() with word i's vector having 1.0 at component i and 0.5 at
// component 99.
std::vector<uint32_t> SmallTable(const std::vector<std::string>& words) {
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i < words.size(); i++) {
    rows.emplace_back(100, 0.0f);
    rows.back()[i] = 1.0f;
    rows.back()[99] = 0.5f;
  }
  return Table(words, rows);
}

std::span<const uint8_t> Bytes(const std::vector<uint32_t>& t) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(t.data()), t.size() * 4);
}

TEST_CASE("a table is parsed and its words are found by name in frequency order") {
  std::vector<uint32_t> bytes = SmallTable({"the", "cat", "sat", "carburetor"});
  auto t = GloveTable::Parse(Bytes(bytes));
  REQUIRE(t.ok());
  CHECK(t.value()->size() == 4);
  CHECK(t.value()->Find("the") == 0);
  CHECK(t.value()->Find("carburetor") == 3);
  CHECK(t.value()->Find("dog") == -1);
  CHECK(t.value()->Find("") == -1);
  CHECK(t.value()->Word(2) == "sat");
}

TEST_CASE("a damaged table is refused with a message naming the check") {
  const std::vector<uint32_t> good = SmallTable({"a", "b"});
  auto refused = [](std::vector<uint32_t> t, size_t drop_bytes = 0) {
    auto r = GloveTable::Parse(Bytes(t).first(t.size() * 4 - drop_bytes));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == kCorrupt);
    return r.status().message();
  };
  std::vector<uint32_t> t = good;
  t[0] ^= 1;
  CHECK(refused(t).find("header") != std::string::npos);
  t = good;
  t[2] = 50;
  CHECK(refused(t).find("dimension") != std::string::npos);
  t = good;
  t[3] = 3;
  CHECK(refused(t).find("size") != std::string::npos);
  t = good;
  t[4] = 7;
  CHECK(refused(t).find("quantisation") != std::string::npos);
  CHECK(refused(good, 4).find("size") != std::string::npos);
  t = good;
  t[7] = 0;  // the second word's end equals its start
  CHECK(refused(t).find("offsets") != std::string::npos);
  CHECK(refused({}).find("header") != std::string::npos);
}

TEST_CASE("the embedding is the normalised SIF-weighted mean of the words' vectors") {
  std::vector<uint32_t> bytes = SmallTable({"the", "cat", "sat"});
  auto t = GloveTable::Parse(Bytes(bytes));
  REQUIRE(t.ok());
  GloveEmbedderOptions options = GloveEmbedder::DefaultOptions();
  options.common = GloveCommon::kNone;  // steps 2 and 5 alone
  auto e = GloveEmbedder::Create(t.value(), options);
  REQUIRE(e.ok());
  std::vector<float> v = e->Embed("The cat");
  auto weight = [](int rank) {  // every vector of this table has the norm sqrt(1.25)
    const double a = GloveEmbedder::kSifA;
    const double p = 1.0 / (std::pow(rank, GloveEmbedder::kZipfExponent) * GloveEmbedder::kZipfH);
    return std::sqrt(1.25) * a / (a + p);
  };
  const double w1 = weight(1), w2 = weight(2);
  const double norm = std::sqrt(w1 * w1 + w2 * w2 + std::pow(0.5 * (w1 + w2), 2));
  CHECK(v[0] == doctest::Approx(w1 / norm).epsilon(1e-5));
  CHECK(v[1] == doctest::Approx(w2 / norm).epsilon(1e-5));
  CHECK(v[2] == 0.0f);
  CHECK(v[99] == doctest::Approx(0.5 * (w1 + w2) / norm).epsilon(1e-5));
  CHECK(w1 < w2);  // the more frequent word weighs less
}

TEST_CASE("agentmem-glove-v1 removes the table's weighted mean direction") {
  std::vector<uint32_t> bytes = SmallTable({"the", "cat", "sat"});
  auto t = GloveTable::Parse(Bytes(bytes));
  REQUIRE(t.ok());
  auto e = GloveEmbedder::Create(t.value(), GloveEmbedder::Options(GloveVersion::kV1));
  REQUIRE(e.ok());
  CHECK(e->name() == "agentmem-glove-v1");
  // u is along sum p(r) * weight(r) * v_r; the result is orthogonal to it.
  std::vector<double> u(100, 0.0);
  for (int rank = 1; rank <= 3; rank++) {
    const double a = GloveEmbedder::kSifA;
    const double p = 1.0 / (std::pow(rank, GloveEmbedder::kZipfExponent) * GloveEmbedder::kZipfH);
    const double w = p * std::sqrt(1.25) * a / (a + p);
    u[rank - 1] += w;
    u[99] += 0.5 * w;
  }
  for (const char* text : {"the", "cat sat", "the cat sat"}) {
    std::vector<float> v = e->Embed(text);
    CHECK(Norm(v) == doctest::Approx(1.0).epsilon(1e-5));
    double dot = 0;
    for (int i = 0; i < 100; i++) dot += v[i] * u[i];
    CHECK(dot == doctest::Approx(0.0).epsilon(1e-5));
  }
}

TEST_CASE("agentmem-glove-v2 centres the words and removes their first principal direction") {
  // Centred, the four vectors are (+-4, 0) and (0, +-1) in components 0
  // and 1: the first principal direction is component 0, the mean (0.0 and
  // 1.0 at component 99) is removed with each word's weight.
  std::vector<std::vector<float>> rows(4, std::vector<float>(100, 0.0f));
  rows[0][0] = 4;
  rows[1][0] = -4;
  rows[2][1] = 1;
  rows[3][1] = -1;
  for (auto& row : rows) row[99] = 1;
  std::vector<uint32_t> bytes = Table({"east", "west", "up", "down"}, rows);
  auto t = GloveTable::Parse(Bytes(bytes));
  REQUIRE(t.ok());
  auto e = GloveEmbedder::Create(t.value(), GloveEmbedder::Options(GloveVersion::kV2));
  REQUIRE(e.ok());
  CHECK(e->name() == "agentmem-glove-v2");
  std::vector<float> unit1(100, 0.0f);
  unit1[1] = 1;
  std::vector<float> v = e->Embed("up");
  for (int i = 0; i < 100; i++) CHECK(v[i] == doctest::Approx(unit1[i]).epsilon(1e-6));
  // east lies along the removed direction; with up the sum keeps up alone.
  CHECK(Norm(e->Embed("east")) < 1e-6);
  v = e->Embed("east up");
  for (int i = 0; i < 100; i++) CHECK(v[i] == doctest::Approx(unit1[i]).epsilon(1e-6));
  // down is the opposite of up once centred.
  CHECK(Dot(e->Embed("down"), e->Embed("up")) == doctest::Approx(-1.0).epsilon(1e-6));
}

TEST_CASE("unrelated sentences are not similar once the common component is removed") {
  auto e = Linked();
  if (!e) return;
  const char* a = "What did Caroline do yesterday?";
  const char* b = "The weather was nice in Paris";
  auto table = GloveTable::Linked();
  REQUIRE(table.ok());
  GloveEmbedderOptions options = GloveEmbedder::DefaultOptions();
  options.common = GloveCommon::kNone;
  auto plain = GloveEmbedder::Create(table.value(), options);
  REQUIRE(plain.ok());
  CHECK(Sim(*plain, a, b) > 0.5);  // the shared direction of averaged word vectors
  for (GloveVersion version : {GloveVersion::kV1, GloveVersion::kV2}) {
    GloveEmbedder removed = GloveEmbedder::Create(version).value();
    CAPTURE(removed.name());
    CHECK(Sim(removed, a, b) < Sim(*plain, a, b) - 0.2);
    const char* puppy = "I adopted a puppy from the shelter";
    CHECK(Sim(removed, puppy, "We got a new dog last week") >
          Sim(removed, puppy, "The quarterly tax report is due on Monday") + 0.3);
  }
}

TEST_CASE("the linked embedder is agentmem-glove-v2 with 100 dimensions and unit vectors") {
  auto e = Linked();
  if (!e) return;
  CHECK(e->name() == "agentmem-glove-v2");
  CHECK(GloveEmbedder::Create(GloveVersion::kV1).value().name() == "agentmem-glove-v1");
  CHECK(GloveEmbedder::VersionOf("agentmem-glove-v1") == GloveVersion::kV1);
  CHECK(GloveEmbedder::VersionOf("agentmem-glove-v2") == GloveVersion::kV2);
  CHECK_FALSE(GloveEmbedder::VersionOf("agentmem-glove-v3"));
  CHECK(e->dimension() == 100);
  std::vector<float> v = e->Embed("Melanie painted a lake at sunrise last year.");
  REQUIRE(v.size() == 100);
  CHECK(Norm(v) == doctest::Approx(1.0).epsilon(1e-5));
  std::vector<float> out(99);
  CHECK(e->EmbedInto("x", out).code() == kMismatchDimension);
}

TEST_CASE("known neighbours: king is nearer queen than carburetor, car is near automobile") {
  if (!Linked()) return;
  for (GloveVersion version : {GloveVersion::kV1, GloveVersion::kV2}) {
    GloveEmbedder e = GloveEmbedder::Create(version).value();
    CAPTURE(e.name());
    CHECK(Sim(e, "king", "queen") > Sim(e, "king", "carburetor") + 0.3);
    CHECK(Sim(e, "car", "automobile") > 0.6);
    CHECK(Sim(e, "car", "automobile") > Sim(e, "car", "poetry") + 0.3);
    // Whole texts: the same topic in other words is nearer than another topic.
    CHECK(Sim(e, "I adopted a puppy from the shelter", "We got a new dog last week") >
          Sim(e, "I adopted a puppy from the shelter", "The stock market fell sharply today"));
  }
}

TEST_CASE("the embedding is deterministic across calls and embedder instances") {
  auto e = Linked();
  if (!e) return;
  auto other = GloveEmbedder::Create();
  REQUIRE(other.ok());
  const std::string text = "Caroline went to the LGBTQ support group yesterday.";
  CHECK(e->Embed(text) == e->Embed(text));
  CHECK(e->Embed(text) == other->Embed(text));
  // An embedder made again over the same table gives the same step 4.
  auto again = GloveEmbedder::Create(GloveTable::Linked().value(), GloveEmbedder::DefaultOptions());
  REQUIRE(again.ok());
  CHECK(e->Embed(text) == again->Embed(text));
  auto v1 = GloveEmbedder::Create(GloveVersion::kV1);
  REQUIRE(v1.ok());
  CHECK(v1->Embed(text) == GloveEmbedder::Create(GloveVersion::kV1)->Embed(text));
  CHECK(v1->Embed(text) != e->Embed(text));  // another definition
  CHECK(e->Embed("Hello, WORLD") == e->Embed("hello world"));  // case and punctuation
}

TEST_CASE("words outside the table are left out and a text of only such words is zero") {
  auto e = Linked();
  if (!e) return;
  CHECK(e->Embed("zqxjvbw kwyfzzq") == std::vector<float>(100, 0.0f));
  CHECK(e->Embed("the lake zqxjvbw") == e->Embed("the lake"));
  CHECK(Norm(e->Embed("\xff\xfe lake \xc3")) == doctest::Approx(1.0).epsilon(1e-5));
}

TEST_CASE("numbers, which the table lacks, still tell texts apart") {
  auto e = Linked();
  if (!e) return;
  CHECK(Norm(e->Embed("2023")) == doctest::Approx(1.0).epsilon(1e-5));
  CHECK(e->Embed("2023") == GloveEmbedder::Create().value().Embed("2023"));
  CHECK(e->Embed("room 12") != e->Embed("room 14"));
  CHECK(Sim(*e, "room 14", "room 14 is booked") > Sim(*e, "room 14", "room 12 is booked"));
  CHECK(Sim(*e, "room 12 is booked", "room 14 is booked") < 0.99);
  CHECK(e->Embed("room 1a2") == e->Embed("room"));  // letters and digits: an unknown word
}

TEST_CASE("an empty text or one without words embeds to the zero vector") {
  auto e = Linked();
  if (!e) return;
  CHECK(e->Embed("") == std::vector<float>(100, 0.0f));
  CHECK(e->Embed("  ,.;!? ") == std::vector<float>(100, 0.0f));
}

}  // namespace
}  // namespace agentmem::index
