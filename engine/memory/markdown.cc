// engine/memory/markdown.cc -- export of one user's memory as Markdown and import of
// an edited file (engine/memory/markdown.h; docs/markdown.md is the layout).
//
// The import reads the whole text first (Parser: layout, escapes, times, one
// line at a time, so memory and time follow the text's size), then compares
// it with the file (Plan) and only then writes, in one transaction.
#include "engine/memory/markdown.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/json/json_writer.h"
#include "engine/memory/markdown_text.h"
#include "engine/memory/validate.h"

namespace agentmem::engine {

namespace {

using format::BlockRecord;
using format::EpisodeRecord;
using format::FactRecord;
using format::kForever;
using namespace markdown;

constexpr int kLayoutVersion = 1;
constexpr char kMarker[] = "<!-- agentmem-memory ";
constexpr char kMiddleDot[] = "\xC2\xB7";  // U+00B7, between a block's settings
const char* const kFactColumns[] = {"subject",  "predicate",  "object", "valid from",
                                    "valid to", "confidence", "fact"};
constexpr size_t kFactCells = 7;
// The most blocks and facts one import writes: a transaction's pending facts
// are searched by each assert, so the cost of an import grows with the
// square of the facts it writes that share a subject and predicate.
constexpr size_t kMaxWrites = 10000;

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Splits on '\n'; calls f(line) for each line of a non-empty s.
template <typename F>
void ForEachLine(std::string_view s, F f) {
  if (s.empty()) return;
  size_t at = 0;
  while (true) {
    size_t nl = s.find('\n', at);
    f(s.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at));
    if (nl == std::string_view::npos) return;
    at = nl + 1;
  }
}

// ==================================================================== export

void AppendBlock(const BlockRecord& b, std::string* out) {
  *out += "### " + Escape(b.name, false) + "\n";
  *out += "pinned: " + (b.pinned_order < 0 ? std::string("no") : std::to_string(b.pinned_order));
  *out += std::string(" ") + kMiddleDot +
          " limit: " + (b.limit == 0 ? std::string("none") : std::to_string(b.limit));
  *out += std::string(" ") + kMiddleDot + " version: " + std::to_string(b.version);
  *out += std::string(" ") + kMiddleDot + " updated: " + FormatTime(b.updated_at) + "\n\n";
  // A carriage return would not survive an editor's line endings: such a
  // value is written with the escapes of a name, one line per line.
  const bool escaped = b.value.find('\r') != std::string::npos;
  const std::string fence = FenceFor(b.value);
  *out += fence + (escaped ? "escaped" : "text") + "\n";
  ForEachLine(b.value, [&](std::string_view line) {
    *out += escaped ? Escape(line, false) : std::string(line);
    *out += '\n';
  });
  *out += fence + "\n\n";
}

Status AppendBlocks(Database* db, const std::string& user, std::string* out) {
  std::vector<BlockRecord> blocks;
  AGENTMEM_RETURN_IF_ERROR(db->ListBlocks(user, &blocks));  // by name
  std::stable_sort(blocks.begin(), blocks.end(), [](const BlockRecord& a, const BlockRecord& c) {
    // Pinned blocks first, by pinned_order; the others after them, by name.
    const int64_t ka = a.pinned_order < 0 ? INT64_MAX : a.pinned_order;
    const int64_t kc = c.pinned_order < 0 ? INT64_MAX : c.pinned_order;
    return ka < kc;
  });
  *out += "## Blocks\n\n";
  for (const BlockRecord& b : blocks) AppendBlock(b, out);
  return Status::OK();
}

Status AppendFacts(Database* db, const std::string& user, std::string* out) {
  FactQuery q;
  q.user_id = user;
  q.all_versions = true;
  std::vector<FactRecord> facts;
  AGENTMEM_RETURN_IF_ERROR(db->QueryFacts(q, &facts));
  std::erase_if(facts, [](const FactRecord& f) { return f.expired_at != kForever; });
  std::sort(facts.begin(), facts.end(), [](const FactRecord& a, const FactRecord& c) {
    return std::tie(a.subject, a.predicate, a.valid_from, a.id) <
           std::tie(c.subject, c.predicate, c.valid_from, c.id);
  });
  *out += "## Facts\n\n|";
  for (const char* column : kFactColumns) *out += std::string(" ") + column + " |";
  *out += "\n|";
  for (size_t i = 0; i < kFactCells; i++) *out += "---|";
  *out += "\n";
  for (const FactRecord& f : facts) {
    *out += "| " + Escape(f.subject, true) + " | " + Escape(f.predicate, true) + " | " +
            Escape(f.object, true) + " | " + FormatTime(f.valid_from) + " | " +
            (f.valid_to == kForever ? std::string() : FormatTime(f.valid_to)) + " | " +
            FormatConfidence(f.confidence) + " | " + std::to_string(f.id) + " |\n";
  }
  *out += "\n";
  return Status::OK();
}

void AppendEpisode(const EpisodeRecord& e, std::string* out) {
  *out += "- " + FormatTime(e.ts) + " " + kMiddleDot + " **" + Escape(e.role, false) + "** " +
          kMiddleDot + " episode " + std::to_string(e.id) + "\n";
  ForEachLine(e.text, [&](std::string_view line) {
    if (!line.empty()) *out += "  ";  // indented: no line of a text starts a section
    *out += line;
    *out += '\n';
  });
}

Status AppendSessions(Database* db, const std::string& user, std::string* out) {
  std::vector<uint64_t> ids;
  AGENTMEM_RETURN_IF_ERROR(db->ListEpisodeIdsByTime(user, nullptr, &ids));
  std::vector<EpisodeRecord> episodes(ids.size());
  std::unordered_map<std::string, std::vector<size_t>> by_session;
  std::vector<std::string> sessions;
  for (size_t i = 0; i < ids.size(); i++) {
    AGENTMEM_RETURN_IF_ERROR(db->GetEpisode(ids[i], &episodes[i]));
    auto [it, fresh] = by_session.try_emplace(episodes[i].session_id);
    if (fresh) sessions.push_back(episodes[i].session_id);
    it->second.push_back(i);  // in time order
  }
  auto last_ts = [&](const std::string& s) { return episodes[by_session[s].back()].ts; };
  std::sort(sessions.begin(), sessions.end(), [&](const std::string& a, const std::string& c) {
    const int64_t ta = last_ts(a), tc = last_ts(c);
    return ta != tc ? ta > tc : a < c;  // newest first
  });
  *out += "## Sessions\n";
  for (const std::string& s : sessions) {
    const std::vector<size_t>& list = by_session[s];
    *out += "\n### Session " + (s.empty() ? std::string("(no id)") : Escape(s, false)) + " " +
            kMiddleDot + " " + std::to_string(list.size()) +
            (list.size() == 1 ? " episode " : " episodes ") + kMiddleDot + " " +
            FormatTime(episodes[list.front()].ts) + " to " + FormatTime(episodes[list.back()].ts) +
            "\n\n";
    for (size_t i : list) AppendEpisode(episodes[i], out);
  }
  return Status::OK();
}

// ==================================================================== import: parse

struct MdBlock {
  size_t line = 0;
  std::string name;
  std::optional<int32_t> pinned;
  std::optional<uint32_t> limit;
  bool has_value = false;
  std::string value;
};

struct MdFact {
  size_t line = 0;
  uint64_t id = 0;  // 0: a new line
  std::string subject, predicate, object;
  std::optional<int64_t> valid_from;
  int64_t valid_to = kForever;
  std::optional<float> confidence;
};

Status LineError(size_t line, int code, const std::string& msg) {
  return Status(code, "markdown line " + std::to_string(line) + ": " + msg);
}
Status LineError(size_t line, const std::string& msg) { return LineError(line, kMismatch, msg); }

template <typename T>
bool ParseNumber(std::string_view s, T* v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

class Parser {
 public:
  Status Line(size_t no, std::string_view line);
  Status Finish();
  std::vector<MdBlock> blocks;
  std::vector<MdFact> facts;

 private:
  enum class Section { kPreamble, kBlocks, kFacts, kSessions };
  Status Preamble(size_t no, std::string_view line);
  Status Heading(size_t no, std::string_view line);
  Status BlockLine(size_t no, std::string_view line);
  Status OpenFence(size_t no, std::string_view line);
  Status FenceLine(std::string_view line);
  Status Settings(size_t no, std::string_view line);
  Status Setting(size_t no, std::string_view part);
  Status FactLine(size_t no, std::string_view line);
  Status FactRow(size_t no, const std::vector<std::string>& cells);
  Status CloseBlock();

  Section section_ = Section::kPreamble;
  MdBlock* block_ = nullptr;  // the block being read
  bool settings_seen_ = false;
  size_t fence_ = 0;  // backquotes of the open fence; 0: none
  size_t fence_line_ = 0;
  bool escaped_ = false;  // the open fence is "escaped"
  bool first_value_line_ = true;
  int table_row_ = 0;  // 0: the header comes next, 1: the delimiter row, 2: facts
  std::unordered_map<std::string, size_t> block_lines_;
  std::unordered_map<uint64_t, size_t> fact_lines_;
};

Status Parser::Line(size_t no, std::string_view line) {
  if (line.find('\0') != std::string_view::npos) return LineError(no, "holds a NUL byte");
  if (!IsValidUtf8(line)) return LineError(no, kMismatchUtf8, "is not valid UTF-8");
  if (fence_ > 0) return FenceLine(line);
  if (StartsWith(line, "## ")) return Heading(no, line);
  switch (section_) {
    case Section::kPreamble: return Preamble(no, line);
    case Section::kBlocks: return BlockLine(no, line);
    case Section::kFacts: return FactLine(no, line);
    case Section::kSessions: return Status::OK();  // read-only: never read back
  }
  return Status::OK();
}

Status Parser::Preamble(size_t no, std::string_view line) {
  if (!StartsWith(line, kMarker)) return Status::OK();
  std::string_view rest = line.substr(sizeof kMarker - 1);
  int version = 0;
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') digits++;
  if (!ParseNumber(rest.substr(0, digits), &version) || version != kLayoutVersion) {
    return LineError(no,
                     "this file has another layout than version 1 of agentmem's Markdown "
                     "memory (docs/markdown.md)");
  }
  return Status::OK();
}

Status Parser::Heading(size_t no, std::string_view line) {
  AGENTMEM_RETURN_IF_ERROR(CloseBlock());
  const std::string name = Lower(TrimUnescaped(line.substr(3)));
  if (name == "blocks") {
    section_ = Section::kBlocks;
  } else if (name == "facts") {
    section_ = Section::kFacts;
    table_row_ = 0;
  } else if (name == "sessions") {
    section_ = Section::kSessions;
  } else {
    return LineError(no, "unknown section \"" + std::string(TrimUnescaped(line.substr(3))) +
                             "\" (the sections are Blocks, Facts and Sessions)");
  }
  return Status::OK();
}

Status Parser::CloseBlock() {
  if (block_ && !block_->has_value) {
    return LineError(block_->line,
                     "block \"" + block_->name + "\" has no value: put it between ``` fences");
  }
  block_ = nullptr;
  return Status::OK();
}

Status Parser::BlockLine(size_t no, std::string_view line) {
  if (TrimUnescaped(line).empty()) return Status::OK();
  if (StartsWith(line, "### ")) {
    AGENTMEM_RETURN_IF_ERROR(CloseBlock());
    MdBlock b;
    b.line = no;
    b.name = Unescape(TrimUnescaped(line.substr(4)));
    if (b.name.empty()) return LineError(no, "a block needs a name after ###");
    auto [it, fresh] = block_lines_.try_emplace(b.name, no);
    if (!fresh) {
      return LineError(no, "block \"" + b.name + "\" appears twice (also at line " +
                               std::to_string(it->second) + ")");
    }
    blocks.push_back(std::move(b));
    block_ = &blocks.back();
    settings_seen_ = false;
    return Status::OK();
  }
  if (StartsWith(line, "```")) return OpenFence(no, line);
  if (block_ && !block_->has_value && !settings_seen_) return Settings(no, line);
  return LineError(no,
                   "unexpected text in the Blocks section: a block is \"### NAME\", an "
                   "optional settings line, then its value between ``` fences");
}

Status Parser::OpenFence(size_t no, std::string_view line) {
  if (!block_) return LineError(no, "a value fence before any block (### NAME)");
  if (block_->has_value) {
    return LineError(no, "block \"" + block_->name + "\" has a second value");
  }
  size_t n = 0;
  while (n < line.size() && line[n] == '`') n++;
  const std::string info = Lower(TrimUnescaped(line.substr(n)));
  if (info != "" && info != "text" && info != "escaped") {
    return LineError(no, "a block's fence is ```text or ```escaped, not ```" + info);
  }
  fence_ = n;
  fence_line_ = no;
  escaped_ = info == "escaped";
  first_value_line_ = true;
  block_->value.clear();
  return Status::OK();
}

Status Parser::FenceLine(std::string_view line) {
  size_t n = 0;
  while (n < line.size() && line[n] == '`') n++;
  if (n >= fence_ && TrimUnescaped(line.substr(n)).empty()) {
    fence_ = 0;
    block_->has_value = true;
    return Status::OK();
  }
  if (!first_value_line_) block_->value += '\n';
  first_value_line_ = false;
  block_->value += escaped_ ? Unescape(line) : std::string(line);
  return Status::OK();
}

Status Parser::Settings(size_t no, std::string_view line) {
  settings_seen_ = true;
  std::string_view rest = line;
  while (true) {
    size_t dot = rest.find(kMiddleDot), semi = rest.find(';');
    size_t cut = std::min(dot, semi);
    AGENTMEM_RETURN_IF_ERROR(Setting(no, rest.substr(0, cut)));
    if (cut == std::string_view::npos) return Status::OK();
    rest = rest.substr(cut + (cut == dot ? sizeof kMiddleDot - 1 : 1));
  }
}

Status Parser::Setting(size_t no, std::string_view part) {
  part = TrimUnescaped(part);
  if (part.empty()) return Status::OK();
  const size_t colon = part.find(':');
  const std::string key = Lower(TrimUnescaped(part.substr(0, colon)));
  const std::string value =
      Lower(colon == std::string_view::npos ? "" : TrimUnescaped(part.substr(colon + 1)));
  if (colon == std::string_view::npos) {
    return LineError(no,
                     "expected the block's settings (pinned: N · limit: N) or a ``` fence, "
                     "not \"" +
                         std::string(part) + "\"");
  }
  if (key == "pinned") {
    int32_t v = -1;
    if (value != "no" && (!ParseNumber(value, &v) || v < 0)) {
      return LineError(no, "pinned is \"no\" or an order >= 0, not \"" + value + "\"");
    }
    block_->pinned = v;
  } else if (key == "limit") {
    uint32_t v = 0;
    if (value != "none" && !ParseNumber(value, &v)) {
      return LineError(no, "limit is \"none\" or a number of characters, not \"" + value + "\"");
    }
    block_->limit = v;
  } else if (key != "version" && key != "updated") {
    return LineError(no, "unknown block setting \"" + key +
                             "\" (pinned and limit; version and updated are read-only)");
  }
  return Status::OK();
}

Status Parser::FactLine(size_t no, std::string_view line) {
  std::string_view t = TrimUnescaped(line);
  if (t.empty()) return Status::OK();
  if (t.front() != '|') {
    return LineError(no, "unexpected text in the Facts section: facts are rows of its table");
  }
  std::vector<std::string> cells = SplitRow(t);
  if (table_row_ == 0) {
    bool ok = cells.size() == kFactCells;
    for (size_t i = 0; ok && i < kFactCells; i++) ok = Lower(cells[i]) == kFactColumns[i];
    if (!ok) {
      return LineError(no,
                       "the facts table starts with the header | subject | predicate | "
                       "object | valid from | valid to | confidence | fact |");
    }
    table_row_ = 1;
    return Status::OK();
  }
  if (table_row_ == 1) {
    for (const std::string& c : cells) {
      if (c.find_first_not_of(":-") != std::string::npos || c.find('-') == std::string::npos) {
        return LineError(no, "expected the table's delimiter row |---|---|...| after its header");
      }
    }
    table_row_ = 2;
    return Status::OK();
  }
  return FactRow(no, cells);
}

Status Parser::FactRow(size_t no, const std::vector<std::string>& cells) {
  if (cells.size() < 3 || cells.size() > kFactCells) {
    return LineError(no,
                     "a fact row has 3 to 7 cells (subject | predicate | object | valid from "
                     "| valid to | confidence | fact), not " +
                         std::to_string(cells.size()));
  }
  auto cell = [&](size_t i) { return i < cells.size() ? cells[i] : std::string(); };
  MdFact f;
  f.line = no;
  f.subject = cell(0);
  f.predicate = cell(1);
  f.object = cell(2);
  if (f.subject.empty() || f.predicate.empty() || f.object.empty()) {
    return LineError(no, "a fact needs a subject, a predicate and an object");
  }
  // A time of 0 would read back as "now" (valid from) or "open-ended" (valid to).
  auto time_cell = [&](size_t i, const char* name, int64_t* t) -> Status {
    std::string why;
    if (!ParseTime(cell(i), t, &why)) {
      return LineError(no, std::string(name) + " \"" + cell(i) + "\": " + why);
    }
    if (*t == 0) {
      return LineError(no, std::string(name) + " \"" + cell(i) +
                               "\": the instant 0 (1970-01-01T00:00:00Z) is not a time here");
    }
    return Status::OK();
  };
  int64_t t = 0;
  if (!cell(3).empty()) {
    AGENTMEM_RETURN_IF_ERROR(time_cell(3, "valid from", &t));
    f.valid_from = t;
  }
  if (!cell(4).empty()) {
    AGENTMEM_RETURN_IF_ERROR(time_cell(4, "valid to", &f.valid_to));
  }
  if (f.valid_from && f.valid_to <= *f.valid_from) {
    return LineError(no, "valid to must be after valid from");
  }
  if (!cell(5).empty()) {
    char* end = nullptr;
    const std::string c = cell(5);
    double v = std::strtod(c.c_str(), &end);
    if (*end != '\0' || !std::isfinite(v) || v < 0 || v > 1) {
      return LineError(no, "confidence is a number from 0 to 1, not \"" + c + "\"");
    }
    f.confidence = static_cast<float>(v);
  }
  if (!cell(6).empty()) {
    if (!ParseNumber(cell(6), &f.id) || f.id == 0) {
      return LineError(no, "the fact column holds a fact id (or nothing for a new fact), not \"" +
                               cell(6) + "\"");
    }
    auto [it, fresh] = fact_lines_.try_emplace(f.id, no);
    if (!fresh) {
      return LineError(no, "fact " + cell(6) + " appears twice (also at line " +
                               std::to_string(it->second) + ")");
    }
  }
  facts.push_back(std::move(f));
  return Status::OK();
}

Status Parser::Finish() {
  if (fence_ > 0) return LineError(fence_line_, "the value fence opened here is not closed");
  return CloseBlock();
}

// ==================================================================== import: plan and write

struct BlockWrite {
  size_t line;
  BlockRecord record;
};
struct FactWrite {
  size_t line;
  FactRecord record;
  uint64_t replaces;  // the current fact the line corrects; 0: none
};

struct Plan {
  std::vector<BlockWrite> blocks;
  std::vector<FactWrite> facts;
  uint64_t blocks_unchanged = 0, facts_unchanged = 0;
  // A line more to write; refused past kMaxWrites.
  Status Count(size_t line) const {
    if (blocks.size() + facts.size() < kMaxWrites) return Status::OK();
    return LineError(line, kTooBig,
                     "more than " + std::to_string(kMaxWrites) +
                         " blocks and facts to write in one import; read the "
                         "file back in parts");
  }
};

Status PlanBlocks(Database* db, const std::string& user, std::vector<MdBlock>& md, Plan* plan) {
  std::vector<BlockRecord> current;
  AGENTMEM_RETURN_IF_ERROR(db->ListBlocks(user, &current));
  std::unordered_map<std::string, const BlockRecord*> by_name;
  for (const BlockRecord& b : current) by_name[b.name] = &b;
  for (MdBlock& b : md) {
    auto it = by_name.find(b.name);
    const BlockRecord* old = it == by_name.end() ? nullptr : it->second;
    BlockRecord r;
    r.user_id = user;
    r.name = b.name;
    r.value = std::move(b.value);
    r.limit = b.limit ? *b.limit : old ? old->limit : 0;
    r.pinned_order = b.pinned ? *b.pinned : old ? old->pinned_order : -1;
    if (r.pinned_order < 0 && old && old->pinned_order < 0) {
      r.pinned_order = old->pinned_order;  // every negative order reads "no"
    }
    if (old && old->value == r.value && old->limit == r.limit &&
        old->pinned_order == r.pinned_order) {
      plan->blocks_unchanged++;
      continue;
    }
    const size_t chars = Utf8Length(r.value);
    if (r.limit > 0 && chars > r.limit) {
      return LineError(b.line, kConstraint,
                       "block \"" + r.name + "\" value is " + std::to_string(chars) +
                           " characters; its limit is " + std::to_string(r.limit));
    }
    AGENTMEM_RETURN_IF_ERROR(plan->Count(b.line));
    plan->blocks.push_back({b.line, std::move(r)});
  }
  return Status::OK();
}

Status PlanFacts(Database* db, const std::string& user, std::vector<MdFact>& md, Plan* plan) {
  FactQuery q;
  q.user_id = user;
  q.all_versions = true;
  std::vector<FactRecord> known;
  AGENTMEM_RETURN_IF_ERROR(db->QueryFacts(q, &known));
  std::unordered_map<uint64_t, const FactRecord*> by_id;
  for (const FactRecord& f : known) by_id[f.id] = &f;
  for (MdFact& f : md) {
    FactRecord r;
    r.user_id = user;
    r.subject = std::move(f.subject);
    r.predicate = std::move(f.predicate);
    r.object = std::move(f.object);
    r.valid_to = f.valid_to;
    uint64_t replaces = 0;
    if (f.id == 0) {
      r.valid_from = f.valid_from.value_or(0);  // 0: now
      r.confidence = f.confidence.value_or(1.0f);
    } else {
      auto it = by_id.find(f.id);
      if (it == by_id.end()) {
        return LineError(f.line, kNotFound,
                         "fact " + std::to_string(f.id) +
                             " is not one of this user's facts "
                             "(leave the fact column empty to assert the line as a new fact)");
      }
      const FactRecord& old = *it->second;
      r.valid_from = f.valid_from.value_or(old.valid_from);
      r.confidence = f.confidence.value_or(old.confidence);
      r.source_episode_ids = old.source_episode_ids;
      if (r.subject == old.subject && r.predicate == old.predicate && r.object == old.object &&
          r.valid_from == old.valid_from && r.valid_to == old.valid_to &&
          r.confidence == old.confidence) {
        plan->facts_unchanged++;
        continue;
      }
      if (r.valid_to <= r.valid_from) {
        return LineError(f.line, kRange, "valid to must be after valid from");
      }
      if (old.expired_at == kForever) replaces = f.id;
    }
    AGENTMEM_RETURN_IF_ERROR(plan->Count(f.line));
    plan->facts.push_back({f.line, std::move(r), replaces});
  }
  return Status::OK();
}

Status AtLine(size_t line, const Status& s) {
  return s.ok() ? s : LineError(line, s.code(), s.message());
}

struct Written {
  uint64_t block_versions = 0, facts_asserted = 0, facts_superseded = 0, facts_known = 0;
};

Status WritePlan(Database* db, Plan& plan, Written* w, JsonWriter* changes) {
  for (BlockWrite& b : plan.blocks) {
    const std::string name = b.record.name;
    uint64_t next_episode = 0, next_fact = 0, version = 0;
    db->NextIds(&next_episode, &next_fact, &version);  // the version SetBlock gives it
    AGENTMEM_RETURN_IF_ERROR(AtLine(b.line, db->SetBlock(std::move(b.record))));
    w->block_versions++;
    changes->BeginObject();
    changes->Field("line", b.line);
    changes->Field("block", name);
    changes->Field("version", version);
    changes->EndObject();
  }
  for (FactWrite& f : plan.facts) {
    uint64_t next_episode = 0, next_fact = 0, next_block = 0;
    db->NextIds(&next_episode, &next_fact, &next_block);
    uint64_t id = 0;
    AGENTMEM_RETURN_IF_ERROR(AtLine(f.line, db->AssertFact(std::move(f.record), &id, f.replaces)));
    const bool asserted = id >= next_fact;
    w->facts_asserted += asserted ? 1 : 0;
    w->facts_superseded += f.replaces ? 1 : 0;
    if (!asserted && !f.replaces) {
      w->facts_known++;  // a new line the file already knew: nothing written
      continue;
    }
    changes->BeginObject();
    changes->Field("line", f.line);
    changes->Field("fact", id);
    if (f.replaces) changes->Field("supersedes", f.replaces);
    changes->EndObject();
  }
  return Status::OK();
}

}  // namespace

Status ExportMarkdown(Database* db, const std::string& user_id, std::string* markdown) {
  std::string out;
  out += kMarker + std::to_string(kLayoutVersion) + " (docs/markdown.md) -->\n";
  out += "# Memory of " + (user_id.empty() ? std::string("(no user id)") : Escape(user_id, false)) +
         "\n\n";
  out +=
      "Edit the blocks and the facts table, then read this file back (`.import-markdown`).\n"
      "An edited block becomes a new version and an edited fact supersedes the old one;\n"
      "removing a line forgets nothing, and the sessions are read-only.\n\n";
  AGENTMEM_RETURN_IF_ERROR(AppendBlocks(db, user_id, &out));
  AGENTMEM_RETURN_IF_ERROR(AppendFacts(db, user_id, &out));
  AGENTMEM_RETURN_IF_ERROR(AppendSessions(db, user_id, &out));
  *markdown = std::move(out);
  return Status::OK();
}

Status ImportMarkdown(Database* db, const std::string& user_id, std::string_view markdown,
                      std::string* report_json) {
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8Text(user_id, "user_id"));
  Parser parser;
  size_t no = 0;
  Status parsed;
  ForEachLine(markdown, [&](std::string_view line) {
    no++;
    if (!parsed.ok()) return;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    parsed = parser.Line(no, line);
  });
  AGENTMEM_RETURN_IF_ERROR(parsed);
  AGENTMEM_RETURN_IF_ERROR(parser.Finish());
  Plan plan;
  AGENTMEM_RETURN_IF_ERROR(PlanBlocks(db, user_id, parser.blocks, &plan));
  AGENTMEM_RETURN_IF_ERROR(PlanFacts(db, user_id, parser.facts, &plan));

  Written w;
  std::string changes_json;
  JsonWriter changes(&changes_json);
  changes.BeginArray();
  if (!plan.blocks.empty() || !plan.facts.empty()) {
    const bool own = !db->in_transaction();
    if (own) AGENTMEM_RETURN_IF_ERROR(db->Begin());
    Status s = WritePlan(db, plan, &w, &changes);
    if (s.ok() && own) s = db->Commit();
    if (!s.ok()) {
      if (own && db->in_transaction()) (void)db->Rollback();
      return s;
    }
  }
  changes.EndArray();
  std::string out;
  JsonWriter j(&out);
  j.BeginObject();
  j.Field("user_id", user_id);
  j.Field("block_versions", w.block_versions);
  j.Field("blocks_unchanged", plan.blocks_unchanged);
  j.Field("facts_asserted", w.facts_asserted);
  j.Field("facts_superseded", w.facts_superseded);
  j.Field("facts_unchanged", plan.facts_unchanged + w.facts_known);
  j.Key("changes");
  j.Raw(changes_json);
  j.EndObject();
  *report_json = std::move(out);
  return Status::OK();
}

}  // namespace agentmem::engine
