// cli/shell/recover_commands.cc -- .recover, and what .check prints for a
// file that does not open: the salvage report of agentmem_recover()
// (docs/recovery.md), read back from its JSON.
#include <cstdio>
#include <string>

#include "shell/dot_commands.h"
#include "shell/jsonl.h"
#include "shell/text.h"

namespace agentmem::shell {
namespace {

// Runs agentmem_recover(src, dst) and parses its report; false (reported)
// on failure.
bool RunRecover(Shell& sh, const std::string& what, const char* dst, Json* report) {
  char* text = nullptr;
  int rc = agentmem_recover(sh.path().c_str(), dst, &text);
  std::string out = text ? text : agentmem_errstr(rc);
  agentmem_free(text);
  if (rc != AGENTMEM_OK) {
    sh.Fail(what + ": " + out);
    return false;
  }
  *report = Json::parse(out, nullptr, false);
  if (report->is_discarded()) {
    sh.Fail(what + ": the report is not JSON");
    return false;
  }
  return true;
}

// "7, 8, 9-12" from the ids and [first, last] ranges of a report.
std::string Ids(const Json& list) {
  std::string out;
  for (const auto& v : list) {
    if (!out.empty()) out += ", ";
    if (v.is_array() && v.size() == 2) {
      out += std::to_string(v[0].get<uint64_t>()) + "-" + std::to_string(v[1].get<uint64_t>());
    } else if (v.is_number_unsigned()) {
      out += std::to_string(v.get<uint64_t>());
    }
  }
  return out;
}

// One line per damaged run, per dropped transaction, and the episodes lost.
void PrintLoss(std::FILE* o, const Json& r) {
  if (r.value("header_damaged", false)) {
    std::fprintf(o, "file header: damaged (its salt was taken from a superblock)\n");
  }
  for (const auto& d : r["damaged"]) {
    std::string seq = d["commit_seq"].is_number() ? " in transaction " + std::to_string(d["commit_seq"].get<uint64_t>())
                                                  : "";
    std::fprintf(o, "page %llu: %s bytes damaged%s: %s\n",
                 static_cast<unsigned long long>(d["page"].get<uint64_t>()),
                 Thousands(d["bytes"].get<int64_t>()).c_str(), seq.c_str(),
                 d["error"].get<std::string>().c_str());
  }
  for (const auto& t : r["transactions_dropped"]) {
    std::string name = t["commit_seq"].is_number()
                           ? "transaction " + std::to_string(t["commit_seq"].get<uint64_t>())
                           : "a transaction whose commit page is lost";
    std::string eps = Ids(t["episodes"]);
    std::fprintf(o, "%s (from page %llu) is dropped: %s; episodes lost: %s\n", name.c_str(),
                 static_cast<unsigned long long>(t["first_page"].get<uint64_t>()),
                 t["reason"].get<std::string>().c_str(), eps.empty() ? "none known" : eps.c_str());
  }
  const uint64_t lost = r["episodes_lost_count"].get<uint64_t>();
  if (lost > 0) {
    std::fprintf(o, "episodes lost: %s (%s)\n", Thousands(static_cast<int64_t>(lost)).c_str(),
                 Ids(r["episodes_lost"]).c_str());
  }
  if (!r["fact_versions_dropped"].empty()) {
    std::fprintf(o, "fact versions dropped (their fact was lost): %s\n", Ids(r["fact_versions_dropped"]).c_str());
  }
  if (r.value("settings_lost", false)) {
    std::fprintf(o, "file settings lost: the default vector space and tokenizer were used\n");
  }
  for (const auto& f : r.value("forgets_unknown", Json::array())) {
    std::string name = f["commit_seq"].is_number()
                           ? "transaction " + std::to_string(f["commit_seq"].get<uint64_t>())
                           : "a transaction whose commit page is lost";
    std::fprintf(o, "%s may have forgotten records that are kept (its damaged pages may have held "
                 "forgets): episodes below id %llu, facts below id %llu, block versions below "
                 "%llu\n", name.c_str(),
                 static_cast<unsigned long long>(f["episodes_below"].get<uint64_t>()),
                 static_cast<unsigned long long>(f["facts_below"].get<uint64_t>()),
                 static_cast<unsigned long long>(f["block_versions_below"].get<uint64_t>()));
  }
}

}  // namespace

bool CmdCheckDamaged(Shell& sh) {
  Json r;
  if (!RunRecover(sh, ".check", nullptr, &r)) return false;
  PrintLoss(sh.out, r);
  std::fflush(sh.out);
  if (r["clean"].get<bool>()) {
    // The file did not open, yet every transaction is whole (for instance
    // it ends before what its superblock vouches for).
    sh.Fail(".check: " + sh.damage());
    return false;
  }
  const size_t n = r["damaged"].size();
  sh.Fail("the file is damaged: " + Thousands(static_cast<int64_t>(n)) +
          (n == 1 ? " damaged run" : " damaged runs") + "; .recover NEWFILE salvages the rest");
  return false;
}

void PrintDamage(Shell& sh) {
  if (sh.path().empty() || sh.path() == ":memory:") return;
  Json r;
  std::string error;
  char* text = nullptr;
  int rc = agentmem_recover(sh.path().c_str(), nullptr, &text);
  if (rc == AGENTMEM_OK && text) r = Json::parse(text, nullptr, false);
  agentmem_free(text);
  if (rc != AGENTMEM_OK || r.is_discarded() || r.value("clean", true)) return;
  PrintLoss(sh.out, r);
  std::fflush(sh.out);
}

bool CmdRecover(Shell& sh, const Args& args) {
  if (args.size() != 2) {
    sh.Fail("usage: .recover NEWFILE");
    return false;
  }
  if (sh.path().empty() || sh.path() == ":memory:") {
    sh.Fail(".recover: no database file is open");
    return false;
  }
  Json r;
  if (!RunRecover(sh, ".recover", args[1].c_str(), &r)) return false;
  PrintLoss(sh.out, r);
  std::fprintf(sh.out, "recovered %s into %s: %s transactions, %s episodes, %s block versions, %s facts%s\n",
               sh.path().c_str(), args[1].c_str(),
               Thousands(r["transactions_kept"].get<int64_t>()).c_str(),
               Thousands(r["episodes_written"].get<int64_t>()).c_str(),
               Thousands(r["block_versions_written"].get<int64_t>()).c_str(),
               Thousands(r["fact_records_written"].get<int64_t>()).c_str(),
               r["clean"].get<bool>() ? "; nothing was lost" : "");
  std::fflush(sh.out);
  return true;
}

}  // namespace agentmem::shell
