// engine/memory/markdown_text.h -- the small pieces of the Markdown memory layout
// (docs/markdown.md): backslash escapes of a name or a table cell, the fence
// around a block value, table rows, and times as ISO 8601 UTC. Pure functions
// over strings, used by engine/memory/markdown.cc in both directions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agentmem::engine::markdown {

// `s` as it is written on one line of the layout: '\' as "\\", a line feed as
// "\n", a carriage return as "\r", a tab as "\t", a space at either end as
// "\ ", and with `pipe` (a table cell) '|' as "\|".
std::string Escape(std::string_view s, bool pipe);
// The reverse: "\n", "\r", "\t", "\ " and '\' before ASCII punctuation stand
// for that character; any other '\' is kept as it is.
std::string Unescape(std::string_view s);
// `s` without the spaces and tabs at either end, but for an escaped one ("\ ").
std::string_view TrimUnescaped(std::string_view s);

// The cells of a table row ("| a | b |"): split at every '|' not escaped, the
// outer pipes optional, each cell trimmed and unescaped.
std::vector<std::string> SplitRow(std::string_view row);

// The backquote fence around a value: three, or one more than the longest run
// of backquotes in it, so that no line of the value closes it.
std::string FenceFor(std::string_view value);

// A time (unix microseconds) as ISO 8601 UTC: "2026-01-02" at midnight,
// "2026-01-02T10:00:05Z", "2026-01-02T10:00:05.25Z" with the fraction's
// trailing zeros dropped. A time outside the years 1..9999 is written "@N"
// (N: unix microseconds).
std::string FormatTime(int64_t us);
// Reads what FormatTime writes, and also "2026-01-02 10:00", seconds left
// out, 'T' or a space between date and time, and "Z", "+HH:MM", "-HH:MM" or
// nothing (UTC) after it. False, with a reason in *why, for anything else.
bool ParseTime(std::string_view s, int64_t* us, std::string* why);

// A confidence as the shortest decimal that reads back as the same float.
std::string FormatConfidence(float f);

}  // namespace agentmem::engine::markdown
