// engine/memory/markdown.h -- one user's memory as a Markdown file a person reads and
// edits (MEMORY.md), and the import of an edited file back (docs/markdown.md
// is the normative layout and the rules of the import).
//
// Thread safety: none of its own; the caller serialises calls on the Database
// (the C ABI holds the handle's mutex).
#pragma once

#include <string>
#include <string_view>

#include "engine/memory/database.h"
#include "format/status.h"

namespace agentmem::engine {

// The user's blocks (pinned ones first, by pinned_order, then the others by
// name), the facts the file holds as current knowledge (not superseded; any
// valid time) with their valid time, and every session with its episodes,
// newest session first. Two files holding the same memory write the same
// bytes. A user with no memory gets the headings alone.
Status ExportMarkdown(Database* db, const std::string& user_id, std::string* markdown);

// Reads an edited export back into user_id's memory: a block whose value,
// pin or limit differs becomes a new block version; a fact line that is new,
// or differs from the fact its id names, is asserted (an edited fact
// supersedes the one it names, which stays in the fact's history). Nothing
// else is written: lines removed, sessions and episodes change nothing, and a
// file read back unchanged writes nothing. Every line is checked before
// anything is written, then everything is written in one transaction (the
// caller's, when one is open). *report_json: a JSON object of what changed.
// Errors name the line: kMismatch (layout), kMismatchUtf8, kNotFound (a fact
// id the user has no current fact under), kConstraint / kRange (a value the
// engine refuses).
Status ImportMarkdown(Database* db, const std::string& user_id, std::string_view markdown,
                      std::string* report_json);

}  // namespace agentmem::engine
