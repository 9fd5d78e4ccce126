// engine/sql/vtabs.cc -- registration of the virtual tables.
#include "engine/sql/vtabs.h"

#include "engine/sql/session.h"

namespace agentmem::engine::sql {

Status RegisterTables(Session*) { return Status::OK(); }

}  // namespace agentmem::engine::sql
