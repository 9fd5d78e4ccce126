// engine/memory/validate.h -- checks on values that come from callers: UTF-8, JSON.
#pragma once

#include <cstddef>
#include <string_view>

#include "format/status.h"

namespace agentmem::engine {

// True when s is well-formed UTF-8 (no overlong forms, no surrogates, nothing
// above U+10FFFF).
bool IsValidUtf8(std::string_view s);
// Number of code points in well-formed UTF-8.
size_t Utf8Length(std::string_view s);
// kMismatchUtf8 naming `field` when s is not valid UTF-8.
Status CheckUtf8(std::string_view s, const char* field);
// kMismatchJson when s is neither empty nor one JSON value; kTooBig when the
// value nests arrays and objects deeper than kMaxJsonDepth.
Status CheckJson(std::string_view s, const char* field);

// The deepest nesting of arrays and objects a stored JSON value may have
// (episode metadata): readers that recurse (Python's json module, most JSON
// libraries) read any stored value.
constexpr size_t kMaxJsonDepth = 64;

// The C structs hand strings out NUL-terminated, with no length: a NUL byte
// inside a name would make two names read the same, and inside a text would
// hide what follows it. Both are refused (kMismatch, naming `field`).
// CheckUtf8Text: CheckUtf8, then no NUL byte.
Status CheckNoNul(std::string_view s, const char* field);
Status CheckUtf8Text(std::string_view s, const char* field);

}  // namespace agentmem::engine
