// engine/memory/validate.cc -- see validate.h.
#include "engine/memory/validate.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace agentmem::engine {

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; k++) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += len;
  }
  return true;
}

size_t Utf8Length(std::string_view s) {
  size_t count = 0;
  for (unsigned char c : s) count += (c & 0xc0) != 0x80;
  return count;
}

Status CheckUtf8(std::string_view s, const char* field) {
  if (IsValidUtf8(s)) return Status::OK();
  return StatusF(kMismatchUtf8, "%s is not valid UTF-8", field);
}

namespace {
// The deepest nesting of arrays and objects in s, which is valid JSON: the
// brackets outside strings (a string's escapes never end it early).
size_t JsonDepth(std::string_view s) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); i++) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        i++;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      depth--;
    }
  }
  return deepest;
}
}  // namespace

Status CheckJson(std::string_view s, const char* field) {
  if (s.empty()) return Status::OK();
  if (!nlohmann::json::accept(s)) return StatusF(kMismatchJson, "%s is not valid JSON", field);
  if (size_t depth = JsonDepth(s); depth > kMaxJsonDepth) {
    return StatusF(kTooBig, "%s nests arrays and objects %zu levels deep; the limit is %zu",
                   field, depth, kMaxJsonDepth);
  }
  return Status::OK();
}

Status CheckNoNul(std::string_view s, const char* field) {
  if (s.find('\0') == std::string_view::npos) return Status::OK();
  return StatusF(kMismatch,
                 "%s contains a NUL byte (U+0000), which agentmem refuses: strings are read back "
                 "NUL-terminated",
                 field);
}

Status CheckUtf8Text(std::string_view s, const char* field) {
  AGENTMEM_RETURN_IF_ERROR(CheckUtf8(s, field));
  return CheckNoNul(s, field);
}

}  // namespace agentmem::engine
