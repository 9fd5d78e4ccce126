// cli/shell/import.cc -- .import FILE: an agentmem export (docs/export.md),
// restored through agentmem_import (ids and both time axes kept, records
// already present skipped, all or nothing); or plain JSONL episodes, blocks
// and facts from elsewhere (jsonl.h), in batches of one transaction each, with
// a progress bar on a terminal and the line number of every line that could
// not be imported.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "shell/dot_commands.h"
#include "shell/interrupt.h"
#include "shell/jsonl.h"
#include "shell/progress.h"
#include "shell/text.h"

namespace agentmem::shell {
namespace {

struct ImportOptions {
  std::string file;
  std::string default_user;
  std::string user_field = "user_id";
  std::string session_field = "session_id";
  std::string role_field = "role";
  int64_t batch = 1000;
  bool new_ids = false;        // an export: AGENTMEM_IMPORT_NEW_IDS
  std::string plain_option;    // the first option that only plain records take
};

constexpr const char* kImportUsage =
    "usage: .import FILE [--new-ids] [--user ID] [--user-field F] [--session-field F] "
    "[--role-field F] [--batch N]";

bool ParseImportArgs(Shell& sh, const Args& args, ImportOptions* o) {
  for (size_t i = 1; i < args.size(); i++) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if (a != "--new-ids" && a.rfind("--", 0) == 0 && o->plain_option.empty()) o->plain_option = a;
    if (a == "--new-ids") {
      o->new_ids = true;
    } else if (a == "--user" && has_value) {
      o->default_user = args[++i];
    } else if (a == "--user-field" && has_value) {
      o->user_field = args[++i];
    } else if (a == "--session-field" && has_value) {
      o->session_field = args[++i];
    } else if (a == "--role-field" && has_value) {
      o->role_field = args[++i];
    } else if (a == "--batch" && has_value) {
      if (!ParseInt(args[++i], &o->batch) || o->batch < 1) {
        sh.Fail(".import: --batch needs a positive number, not " + args[i]);
        return false;
      }
    } else if (a.rfind("--", 0) == 0 || !o->file.empty()) {
      sh.Fail(".import: unexpected argument \"" + a + "\"; " + kImportUsage);
      return false;
    } else {
      o->file = a;
    }
  }
  if (o->file.empty()) {
    sh.Fail(kImportUsage);
    return false;
  }
  return true;
}

// A line that cannot be imported: the reason, for "FILE:LINE: reason".
struct BadLine {
  std::string reason;
};

// A field as text: strings as they are, numbers in decimal (so that
// "session": 1 becomes session "1").
std::string TextField(const Json& obj, const std::string& key, const std::string& dflt,
                      bool required = false) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) throw BadLine{"missing \"" + key + "\""};
    return dflt;
  }
  if (it->is_string()) {
    // "\u0000" reads as a NUL byte, which the C API's strings would cut off
    // there: refused, as the engine refuses it (include/agentmem.h, (7)).
    if (it->get_ref<const std::string&>().find('\0') != std::string::npos) {
      throw BadLine{"\"" + key + "\" contains a NUL byte (\\u0000), which agentmem refuses"};
    }
    return it->get<std::string>();
  }
  if (it->is_number()) return it->dump();
  throw BadLine{"\"" + key + "\" must be a string, not " + it->dump()};
}

// A time: unix microseconds or ISO-8601 text. Missing or null gives dflt.
int64_t TimeField(const Json& obj, const std::string& key, int64_t dflt) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return dflt;
  if (it->is_number_integer()) return it->get<int64_t>();
  int64_t t;
  if (it->is_string() && ParseIsoTime(it->get<std::string>(), &t)) return t;
  throw BadLine{"\"" + key + "\" must be unix microseconds or an ISO-8601 time, not " + it->dump()};
}

int64_t IntField(const Json& obj, const std::string& key, int64_t dflt) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return dflt;
  if (it->is_number_integer()) return it->get<int64_t>();
  throw BadLine{"\"" + key + "\" must be an integer, not " + it->dump()};
}

enum class Kind { kEpisode, kBlock, kFact };

Kind KindOf(const Json& obj) {
  auto it = obj.find("kind");
  if (it != obj.end()) {
    std::string k = it->is_string() ? it->get<std::string>() : "";
    if (k == "episode") return Kind::kEpisode;
    if (k == "block") return Kind::kBlock;
    if (k == "fact") return Kind::kFact;
    throw BadLine{"\"kind\" must be \"episode\", \"block\" or \"fact\", not " + it->dump()};
  }
  if (obj.contains("subject") && obj.contains("predicate") && obj.contains("object")) {
    return Kind::kFact;
  }
  if (obj.contains("name") && obj.contains("value")) return Kind::kBlock;
  if (obj.contains("text")) return Kind::kEpisode;
  throw BadLine{"cannot tell the kind of record: add \"kind\" (episode, block or fact)"};
}

// Rejects fields a block or fact does not have (episodes keep theirs in metadata).
void CheckFields(const Json& obj, std::initializer_list<const char*> known,
                 const ImportOptions& o) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = it.key() == o.user_field;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok) throw BadLine{"unknown field \"" + it.key() + "\""};
  }
}

class Importer {
 public:
  Importer(Shell& sh, const ImportOptions& o) : sh_(sh), o_(o), db_(sh.db()) {}

  bool Run();

 private:
  // The file is an agentmem export: the whole of it through agentmem_import.
  // A file not created yet is created with the export's vector space
  // (`space`, open options) unless -options names one.
  bool RunExport(std::ifstream& in, const std::string& space);
  // One record; throws BadLine for a record the engine or the format refuses.
  void Import(const Json& obj);
  void Episode(const Json& obj);
  void Block(const Json& obj);
  void Fact(const Json& obj);
  // An engine result: OK; a problem of this record (BadLine); or a failure of
  // the whole import (returns false from Run through `fatal_`).
  void Check(int rc);
  bool BeginBatch();
  bool CommitBatch();
  void Bad(int64_t line_no, const std::string& reason);
  // What a stopped import leaves behind, for its message.
  std::string Committed() const {
    if (!own_txn_) return "the records read so far are in the open transaction";
    return committed_through_ == 0 ? "nothing was imported"
                                   : "lines up to " + std::to_string(committed_through_) +
                                         " are imported";
  }

  Shell& sh_;
  const ImportOptions& o_;
  agentmem_db* db_;
  bool own_txn_ = false;
  bool fatal_ = false;
  int64_t batch_count_ = 0;
  int64_t batch_first_line_ = 0;
  int64_t committed_through_ = 0;  // last line of the last committed batch
  int64_t episodes_ = 0, blocks_ = 0, facts_ = 0, bad_ = 0;
  std::unordered_map<int64_t, int64_t> new_ids_;  // source episode id -> id in this file
};

void Importer::Check(int rc) {
  if (rc == AGENTMEM_OK) return;
  switch (rc & 0xff) {
    case AGENTMEM_MISMATCH:
    case AGENTMEM_TOOBIG:
    case AGENTMEM_CONSTRAINT:
    case AGENTMEM_RANGE:
    case AGENTMEM_MISUSE:
      throw BadLine{agentmem_errmsg(db_)};
    default:
      fatal_ = true;
      throw BadLine{agentmem_errmsg(db_)};
  }
}

void Importer::Episode(const Json& obj) {
  std::string user = TextField(obj, o_.user_field, o_.default_user);
  std::string session = TextField(obj, o_.session_field, "");
  std::string role = TextField(obj, o_.role_field, "");
  std::string text = TextField(obj, "text", "", true);
  int64_t ts = TimeField(obj, "ts", 0);
  Json metadata;
  if (auto it = obj.find("metadata"); it != obj.end() && !it->is_null()) metadata = *it;
  std::vector<float> vec;
  if (auto it = obj.find("vector"); it != obj.end() && !it->is_null()) {
    if (!it->is_array()) throw BadLine{"\"vector\" must be an array of numbers"};
    for (const auto& x : *it) {
      if (!x.is_number()) throw BadLine{"\"vector\" must be an array of numbers"};
      vec.push_back(x.get<float>());
    }
  }
  // Fields of no column are kept in metadata, so that nothing is lost.
  static const char* kKnown[] = {"kind", "id", "text", "ts", "metadata", "vector"};
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& k = it.key();
    bool known = k == o_.user_field || k == o_.session_field || k == o_.role_field;
    for (const char* n : kKnown) known = known || k == n;
    if (known) continue;
    if (!metadata.is_null() && !metadata.is_object()) {
      throw BadLine{"field \"" + k +
                    "\" has no column and \"metadata\" is not an object to keep it"};
    }
    if (metadata.contains(k)) throw BadLine{"field \"" + k + "\" is also in \"metadata\""};
    metadata[k] = it.value();
  }
  std::string meta_text =
      metadata.is_null() ? "" : metadata.dump(-1, ' ', false, Json::error_handler_t::strict);
  int64_t id = 0;
  Check(agentmem_remember(db_, user.c_str(), session.c_str(), role.c_str(), text.c_str(), ts,
                          meta_text.empty() ? nullptr : meta_text.c_str(),
                          vec.empty() ? nullptr : vec.data(), static_cast<int>(vec.size()), &id));
  if (auto it = obj.find("id"); it != obj.end() && it->is_number_integer()) {
    new_ids_[it->get<int64_t>()] = id;
  }
  episodes_++;
}

void Importer::Block(const Json& obj) {
  CheckFields(
      obj, {"kind", "user_id", "name", "value", "limit", "pinned_order", "version", "updated_at"},
      o_);
  std::string user = TextField(obj, o_.user_field, o_.default_user);
  std::string name = TextField(obj, "name", "", true);
  std::string value = TextField(obj, "value", "", true);
  int64_t limit = IntField(obj, "limit", 0), pinned = IntField(obj, "pinned_order", -1);
  if (limit < 0 || limit > INT32_MAX || pinned < -1 || pinned > INT32_MAX) {
    throw BadLine{"\"limit\" or \"pinned_order\" is out of range"};
  }
  Check(agentmem_block_set(db_, user.c_str(), name.c_str(), value.c_str(), static_cast<int>(limit),
                           static_cast<int>(pinned)));
  blocks_++;
}

void Importer::Fact(const Json& obj) {
  CheckFields(obj,
              {"kind", "id", "user_id", "subject", "predicate", "object", "confidence",
               "source_episode_ids", "valid_from", "valid_to", "recorded_at", "expired_at"},
              o_);
  std::string user = TextField(obj, o_.user_field, o_.default_user);
  std::string subject = TextField(obj, "subject", "", true);
  std::string predicate = TextField(obj, "predicate", "", true);
  std::string object = TextField(obj, "object", "", true);
  double confidence = 1.0;
  if (auto it = obj.find("confidence"); it != obj.end() && !it->is_null()) {
    if (!it->is_number()) throw BadLine{"\"confidence\" must be a number"};
    confidence = it->get<double>();
  }
  int64_t valid_from = TimeField(obj, "valid_from", 0);
  int64_t valid_to = TimeField(obj, "valid_to", 0);
  std::vector<int64_t> sources;
  if (auto it = obj.find("source_episode_ids"); it != obj.end() && !it->is_null()) {
    if (!it->is_array()) throw BadLine{"\"source_episode_ids\" must be an array of ids"};
    for (const auto& x : *it) {
      if (!x.is_number_integer()) throw BadLine{"\"source_episode_ids\" must be an array of ids"};
      auto mapped = new_ids_.find(x.get<int64_t>());
      sources.push_back(mapped == new_ids_.end() ? x.get<int64_t>() : mapped->second);
    }
  }
  Check(agentmem_fact_assert(db_, user.c_str(), subject.c_str(), predicate.c_str(), object.c_str(),
                             confidence, valid_from, valid_to,
                             sources.empty() ? nullptr : sources.data(),
                             static_cast<int>(sources.size()), nullptr));
  facts_++;
}

void Importer::Import(const Json& obj) {
  if (!obj.is_object()) throw BadLine{"not a JSON object"};
  switch (KindOf(obj)) {
    case Kind::kEpisode:
      return Episode(obj);
    case Kind::kBlock:
      return Block(obj);
    case Kind::kFact:
      return Fact(obj);
  }
}

bool Importer::BeginBatch() {
  batch_count_ = 0;
  int rc = agentmem_begin(db_);
  // Inside the user's own transaction (BEGIN typed earlier) the records join
  // it and the user commits.
  own_txn_ = rc == AGENTMEM_OK;
  if (rc != AGENTMEM_OK && rc != AGENTMEM_MISUSE) return sh_.FailDb(".import: begin");
  return true;
}

bool Importer::CommitBatch() {
  if (!own_txn_) return true;
  if (agentmem_commit(db_) != AGENTMEM_OK) {
    sh_.FailDb(".import: commit of lines " + std::to_string(batch_first_line_) +
               " and after failed (lines up to " + std::to_string(committed_through_) +
               " are imported)");
    return false;
  }
  return true;
}

void Importer::Bad(int64_t line_no, const std::string& reason) {
  bad_++;
  if (bad_ <= 100)
    std::fprintf(sh_.err, "%s:%lld: %s\n", o_.file.c_str(), (long long)line_no, reason.c_str());
  if (bad_ == 101)
    std::fprintf(sh_.err, "%s: more bad lines follow; only the count is reported\n",
                 o_.file.c_str());
}

// Whether the first line that is not blank is an agentmem export header;
// *space as ExportHeader gives it.
bool IsExport(std::ifstream& in, std::string* space) {
  std::string line;
  bool header = false;
  space->clear();
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    header = ExportHeader(line, space);
    break;
  }
  in.clear();
  in.seekg(0);
  return header;
}

bool Importer::RunExport(std::ifstream& in, const std::string& space) {
  if (!o_.plain_option.empty()) {
    sh_.Fail(".import: " + o_.plain_option + " is for plain records; \"" + o_.file +
             "\" is an agentmem export, whose records name their users and sessions");
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    sh_.Fail(".import: reading \"" + o_.file + "\" failed: " + std::strerror(errno));
    return false;
  }
  const std::string& jsonl = text.str();
  if (!RefuseNul(sh_, ".import", o_.file, jsonl)) return false;
  if (sh_.not_created()) {
    if (!sh_.CreateFile(space)) return false;
    db_ = sh_.db();
  }
  int64_t added = 0;
  if (agentmem_import_v2(db_, jsonl.c_str(), o_.new_ids ? AGENTMEM_IMPORT_NEW_IDS : 0, &added) !=
      AGENTMEM_OK) {
    return sh_.FailDb(".import: " + o_.file);
  }
  std::fprintf(sh_.out, "imported %s new records from %s (an agentmem export; records already "
               "present are skipped)\n", Thousands(added).c_str(), o_.file.c_str());
  std::fflush(sh_.out);
  return true;
}

bool Importer::Run() {
  struct stat st;
  const bool folder = stat(o_.file.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  std::ifstream in;
  if (!folder) in.open(o_.file, std::ios::binary);
  const int open_errno = errno;
  std::string space;
  const bool is_export = !folder && in && IsExport(in, &space);
  // A file not created yet is created now, like for any other command that
  // may write; for an export, by RunExport with the export's vector space.
  if (!is_export && sh_.not_created()) {
    if (!sh_.CreateFile()) return false;
    db_ = sh_.db();
  }
  if (folder) {
    sh_.Fail(".import: \"" + o_.file + "\" is a folder, not a file");
    return false;
  }
  if (!in) {
    sh_.Fail(".import: cannot read \"" + o_.file + "\": " + std::strerror(open_errno));
    return false;
  }
  if (is_export) return RunExport(in, space);
  if (o_.new_ids) {
    sh_.Fail(".import: --new-ids is for an agentmem export (docs/export.md); \"" + o_.file +
             "\" holds plain records, which always get this file's next ids");
    return false;
  }
  in.seekg(0, std::ios::end);
  int64_t size = in.tellg();
  in.seekg(0);
  Progress progress(sh_.err, size);
  std::string line;
  int64_t line_no = 0;
  batch_first_line_ = 1;
  if (!BeginBatch()) return false;
  while (std::getline(in, line)) {
    line_no++;
    if (Interrupted()) {
      ClearInterrupt();
      progress.Finish();
      if (own_txn_) agentmem_rollback(db_);
      sh_.Fail(".import: interrupted at line " + std::to_string(line_no) + "; " + Committed());
      return false;
    }
    progress.Update(in.tellg() < 0 ? size : static_cast<int64_t>(in.tellg()), line_no);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json obj = Json::parse(line, nullptr, false);
    try {
      if (obj.is_discarded()) throw BadLine{"not valid JSON"};
      Import(obj);
    } catch (const BadLine& b) {
      if (fatal_) {
        progress.Finish();
        if (own_txn_) agentmem_rollback(db_);
        sh_.Fail(".import: line " + std::to_string(line_no) + ": " + b.reason +
                 " (import stopped; " + Committed() + ")");
        return false;
      }
      Bad(line_no, b.reason);
    } catch (const Json::exception& e) {
      Bad(line_no, e.what());
    }
    if (++batch_count_ >= o_.batch && own_txn_) {
      bool ok = CommitBatch();
      committed_through_ = line_no;
      batch_first_line_ = line_no + 1;
      if (!ok || !BeginBatch()) {
        progress.Finish();
        return false;
      }
    }
  }
  progress.Finish();
  if (in.bad()) {
    if (own_txn_) agentmem_rollback(db_);
    sh_.Fail(".import: reading \"" + o_.file + "\" failed after line " +
             std::to_string(line_no) + " (" + Committed() + ")");
    return false;
  }
  if (!CommitBatch()) return false;
  std::fprintf(sh_.out, "imported %s episodes, %s block versions, %s facts from %s\n",
               Thousands(episodes_).c_str(), Thousands(blocks_).c_str(), Thousands(facts_).c_str(),
               o_.file.c_str());
  std::fflush(sh_.out);
  if (bad_ > 0) {
    sh_.Fail(".import: " + Thousands(bad_) + (bad_ == 1 ? " line" : " lines") + " of " + o_.file +
             " could not be imported (listed above)");
    return false;
  }
  return true;
}

}  // namespace

namespace {

// The open options that give a file the text analysis `config` (the
// text.tokenizer value of docs/format.md §5.4 that an export header
// carries), or "" when it is not one options can give.
std::string TextOptions(const std::string& config) {
  std::map<std::string, std::string> f = {{"stem", "0"}, {"stop", "0"},    {"min", "1"},
                                          {"max", "0"},  {"snowball", "0"}, {"qstop", "0"},
                                          {"context", "0"}, {"own", "1"}};
  size_t semi = config.find(';');
  const std::string alphabet = config.substr(0, semi);
  for (size_t at = semi; at != std::string::npos && at < config.size();) {
    size_t end = std::min(config.find(';', at + 1), config.size());
    std::string item = config.substr(at + 1, end - at - 1);
    size_t eq = item.find('=');
    if (eq == std::string::npos || !f.count(item.substr(0, eq))) return "";
    std::string value = item.substr(eq + 1);
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) return "";
    f[item.substr(0, eq)] = value;
    at = end;
  }
  if ((alphabet != "unicode-v1" && alphabet != "ascii-v1") || f["min"] != "1" ||
      f["max"] != "0" || (f["stop"] == "1" && f["qstop"] == "1") ||
      (f["stem"] == "1" && f["snowball"] == "1")) {
    return "";
  }
  return std::string("tokenizer=") + (alphabet == "ascii-v1" ? "ascii" : "unicode") +
         "&stem=" + (f["snowball"] == "1" ? "snowball" : f["stem"]) +
         "&stop_words=" + (f["qstop"] == "1" ? "query" : f["stop"]) + "&context=" + f["context"] +
         "&own_weight=" + f["own"];
}

}  // namespace

bool RefuseNul(Shell& sh, const std::string& command, const std::string& file,
               const std::string& text) {
  const size_t nul = text.find('\0');
  if (nul == std::string::npos) return true;
  int64_t line = 1 + std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(nul), '\n');
  sh.Fail(command + ": " + file + ":" + std::to_string(line) +
          ": a NUL byte, which no JSON text holds (nothing was imported)");
  return false;
}

bool ExportHeader(const std::string& line, std::string* space) {
  space->clear();
  Json obj = Json::parse(line, nullptr, false);
  auto it = obj.is_object() ? obj.find("type") : obj.end();
  if (!obj.is_object() || it == obj.end() || *it != "agentmem-export") return false;
  auto e = obj.find("embedder"), d = obj.find("dim"), m = obj.find("metric");
  if (e != obj.end() && e->is_string() && d != obj.end() && d->is_number_unsigned() &&
      m != obj.end() && m->is_string()) {
    const std::string name = e->get<std::string>(), metric = m->get<std::string>();
    if (name.find_first_of("&=") == std::string::npos &&
        metric.find_first_of("&=") == std::string::npos) {
      *space = "embedder=" + name + "&vector_dim=" + std::to_string(d->get<uint64_t>()) +
               "&vector_metric=" + metric;
    }
  }
  auto v = obj.find("vector_type");
  if (v != obj.end() && v->is_string() && (*v == "f16" || *v == "int8")) {
    *space += (space->empty() ? "" : "&") + ("vector_type=" + v->get<std::string>());
  }
  auto t = obj.find("tokenizer");
  if (t != obj.end() && t->is_string()) {
    const std::string text = TextOptions(t->get<std::string>());
    if (!text.empty()) *space += (space->empty() ? "" : "&") + text;
  }
  return true;
}

bool CmdImport(Shell& sh, const Args& args) {
  ImportOptions o;
  if (!ParseImportArgs(sh, args, &o)) return false;
  if (!sh.db()) {
    sh.Fail("no database is open (use .open FILE)");
    return false;
  }
  Importer importer(sh, o);
  return importer.Run();
}

}  // namespace agentmem::shell
