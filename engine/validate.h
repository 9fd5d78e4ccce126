// engine/validate.h -- checks on values that come from callers: UTF-8, JSON.
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
// kMismatchJson when s is neither empty nor one JSON value.
Status CheckJson(std::string_view s, const char* field);

}  // namespace agentmem::engine
