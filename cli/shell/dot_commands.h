// cli/shell/dot_commands.h -- the dot-commands, one function each. args[0] is
// the command name (".stats"); each returns false after reporting a failure.
#pragma once

#include <string>
#include <vector>

#include "shell/shell.h"

namespace agentmem::shell {

using Args = std::vector<std::string>;

// info_commands.cc
bool CmdTables(Shell& sh, const Args& args);
bool CmdSchema(Shell& sh, const Args& args);
bool CmdStats(Shell& sh, const Args& args);
bool CmdCheck(Shell& sh, const Args& args);
bool CmdVacuum(Shell& sh, const Args& args);
// recover_commands.cc
bool CmdRecover(Shell& sh, const Args& args);
bool CmdCheckDamaged(Shell& sh);  // .check of a file that did not open
void PrintDamage(Shell& sh);      // every damaged run of the file, when there is one
// recall_commands.cc
bool CmdRecall(Shell& sh, const Args& args);
bool CmdExplain(Shell& sh, const Args& args);
// params.cc
bool CmdParameter(Shell& sh, const Args& args);
// import.cc / export.cc
bool CmdImport(Shell& sh, const Args& args);
// Whether `line` is an agentmem export header; *space gets the open options
// of its vector space ("embedder=...&vector_dim=...&vector_metric="), of
// its vector storage ("vector_type=f16" or "int8") and of its text analysis
// ("tokenizer=...&stem=...&stop_words=...&context=...&own_weight=..."), each
// left out when the header names none the options can hold.
bool ExportHeader(const std::string& line, std::string* space);
// True when `text`, read from `file`, holds no NUL byte (the C import would
// stop there); else fails `command`, naming the line of the first one.
bool RefuseNul(Shell& sh, const std::string& command, const std::string& file,
               const std::string& text);
bool CmdExport(Shell& sh, const Args& args);
// memory_commands.cc
bool CmdContext(Shell& sh, const Args& args);
bool CmdProfile(Shell& sh, const Args& args);
bool CmdExportUser(Shell& sh, const Args& args);
bool CmdImportUser(Shell& sh, const Args& args);
bool CmdRetention(Shell& sh, const Args& args);
// markdown_commands.cc
bool CmdExportMarkdown(Shell& sh, const Args& args);
bool CmdImportMarkdown(Shell& sh, const Args& args);

// The help text of every dot-command (".help").
std::string DotHelp();

}  // namespace agentmem::shell
