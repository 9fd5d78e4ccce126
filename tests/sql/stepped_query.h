// tests/sql/stepped_query.h -- one SQL statement through agentmem_prepare /
// agentmem_step / agentmem_column_text, every row as text ("NULL" for NULL),
// for the suites that check what a statement gives row by row.
#pragma once

#include <doctest/doctest.h>

#include <agentmem.h>

#include <string>
#include <vector>

namespace agentmem::test {

using Rows = std::vector<std::vector<std::string>>;

inline std::string g_error;  // the message of the last Query that failed

// *rc_out, when given, receives the failing code instead of the test failing.
inline Rows Query(agentmem_db* db, const std::string& sql, int* rc_out = nullptr) {
  Rows rows;
  agentmem_stmt* stmt = nullptr;
  int rc = agentmem_prepare(db, sql.c_str(), -1, &stmt, nullptr);
  while (rc == AGENTMEM_OK || rc == AGENTMEM_ROW) {
    rc = agentmem_step(stmt);
    if (rc != AGENTMEM_ROW) break;
    std::vector<std::string>& row = rows.emplace_back();
    for (int i = 0; i < agentmem_column_count(stmt); i++) {
      const unsigned char* v = agentmem_column_text(stmt, i);
      row.push_back(v ? reinterpret_cast<const char*>(v) : "NULL");
    }
  }
  if (rc == AGENTMEM_DONE) rc = AGENTMEM_OK;
  g_error = rc == AGENTMEM_OK ? "" : agentmem_errmsg(db);
  agentmem_finalize(stmt);
  if (rc_out) {
    *rc_out = rc;
  } else {
    REQUIRE_MESSAGE(rc == AGENTMEM_OK, sql << ": " << g_error);
  }
  return rows;
}

}  // namespace agentmem::test
