// cli/shell/text.h -- small text helpers of the shell: when a statement is
// complete, splitting dot-command arguments, numbers and times for people.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace agentmem::shell {

// True when sql ends with a ';' that is outside quotes, identifiers in
// "", `` or [], and comments, followed by nothing but white space and
// comments. The REPL keeps reading lines until this holds.
bool SqlComplete(const std::string& sql);

// Splits a dot-command line into words. A word may be quoted with ' or "
// (inside '', a doubled '' is one quote; inside "", backslash escapes
// \" \\ \n \t). On an unterminated quote
// returns false with *error set.
bool SplitArgs(const std::string& line, std::vector<std::string>* words, std::string* error);

// 1234567 -> "1,234,567".
std::string Thousands(int64_t n);
// 1536 -> "1.5 KiB".
std::string HumanBytes(int64_t n);

// ISO-8601 date-time ("2022-12-17T11:01:00", optional ".ffffff" and "Z" or
// "+hh:mm"; no zone means UTC; a space may replace the 'T'; a date alone is
// midnight) to unix microseconds.
bool ParseIsoTime(const std::string& s, int64_t* micros);
// Unix microseconds -> "2022-12-17T11:01:00Z" (with ".ffffff" when not whole).
std::string FormatIsoTime(int64_t micros);

// An SQL string literal: 'it''s'.
std::string SqlQuote(const std::string& s);

// Parses a whole decimal integer; false on anything else.
bool ParseInt(const std::string& s, int64_t* v);

}  // namespace agentmem::shell
