// engine/sql/vtabs.h -- the virtual tables and table-valued functions of the
// SQL front end (docs/sql.md has their schemas).
#pragma once

#include "format/status.h"

namespace agentmem::engine::sql {

class Session;

// Registers the modules on session->conn() and creates the tables episodes,
// blocks and facts in its main schema.
Status RegisterTables(Session* session);

}  // namespace agentmem::engine::sql
