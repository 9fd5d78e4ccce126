// tests/index/text/shared_data.h -- finds the shared evaluation data
// (../shared/data, see its README.md) and reads its JSON-lines files, for the
// text-index tests. Tests that need the data skip with a MESSAGE when it is
// absent.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace agentmem::test {

// The data folder: $AGENTMEM_DATA_DIR, else ../shared/data relative to the
// working directory (the repository root under meson test) or to the build
// and build/tests folders, else /work/shared/data (where the workplace
// machines keep it, whatever folder a clone is in); "" when none holds
// bm25_baseline.py.
inline std::string SharedDataDir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("AGENTMEM_DATA_DIR")) return env;
  for (const char* dir : {"../shared/data", "../../shared/data", "../../../shared/data",
                          "/work/shared/data"}) {
    std::error_code ec;
    if (fs::exists(fs::path(dir) / "bm25_baseline.py", ec)) return dir;
  }
  return "";
}

// One JSON value per non-empty line of `path`; empty if the file is absent.
inline std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

// A JSON string field, or "" when it is null or missing (the reference reads
// `(s or "")`).
inline std::string TextField(const nlohmann::json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace agentmem::test
