// engine/json/json_writer.cc -- see json_writer.h.
#include "engine/json/json_writer.h"

#include <charconv>
#include <cmath>
#include <nlohmann/detail/conversions/to_chars.hpp>

namespace agentmem::engine {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// A byte below 0x80 that is written as it is.
bool Plain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

void AppendEscapedAscii(unsigned char c, std::string* o) {
  switch (c) {
    case '"': *o += "\\\""; return;
    case '\\': *o += "\\\\"; return;
    case '\b': *o += "\\b"; return;
    case '\f': *o += "\\f"; return;
    case '\n': *o += "\\n"; return;
    case '\r': *o += "\\r"; return;
    case '\t': *o += "\\t"; return;
    default: break;
  }
  if (c >= 0x20) {
    *o += static_cast<char>(c);
    return;
  }
  constexpr char kHex[] = "0123456789abcdef";
  char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
  o->append(u, sizeof u);
}

}  // namespace

void JsonWriter::Key(std::string_view key) {
  String(key);
  *out_ += ':';
  comma_ = false;
}

// UTF-8 is checked as the Unicode standard's table of well-formed sequences
// (Table 3-7) states it, byte by byte: a byte that cannot continue the
// sequence ends it. The cut is nlohmann's: the incomplete sequence is dropped
// and U+FFFD written; the byte that broke it is read again as the start of the
// next character, unless it was itself the first byte (then it is dropped).
void JsonWriter::String(std::string_view s) {
  Separate();
  std::string& o = *out_;
  o += '"';
  size_t accepted = o.size();  // output up to the last whole character
  int need = 0;                // continuation bytes the current character still needs
  unsigned char lo = 0x80, hi = 0xbf;  // the range its next byte must be in
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (need > 0) {
      if (c >= lo && c <= hi) {
        o += static_cast<char>(c);
        lo = 0x80;
        hi = 0xbf;
        if (--need == 0) accepted = o.size();
        i++;
        continue;
      }
      o.resize(accepted);  // shrinks: no allocation
      o += kReplacement;
      accepted = o.size();
      need = 0;
      lo = 0x80;
      hi = 0xbf;
      continue;  // c again, as a first byte
    }
    if (c < 0x80) {
      size_t run = i;
      while (run < s.size() && Plain(static_cast<unsigned char>(s[run]))) run++;
      if (run > i) {
        o.append(s.data() + i, run - i);
        i = run;
      } else {
        AppendEscapedAscii(c, &o);
        i++;
      }
      accepted = o.size();
      continue;
    }
    i++;
    if (c >= 0xc2 && c <= 0xdf) {
      need = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      need = 2;
      if (c == 0xe0) lo = 0xa0;  // no overlong forms
      if (c == 0xed) hi = 0x9f;  // no surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      need = 3;
      if (c == 0xf0) lo = 0x90;  // no overlong forms
      if (c == 0xf4) hi = 0x8f;  // nothing above U+10FFFF
    } else {
      o += kReplacement;  // 0x80..0xc1, 0xf5..0xff cannot start a character
      accepted = o.size();
      continue;
    }
    o += static_cast<char>(c);
  }
  if (need > 0) {
    o.resize(accepted);
    o += kReplacement;
  }
  o += '"';
  comma_ = true;
}

template <typename T>
void JsonWriter::Decimal(T v) {
  Separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out_->append(buf, r.ptr);
  comma_ = true;
}

void JsonWriter::Int(int64_t v) { Decimal(v); }
void JsonWriter::Uint(uint64_t v) { Decimal(v); }

void JsonWriter::Double(double v) {
  if (!std::isfinite(v)) {
    Null();
    return;
  }
  Separate();
  char buf[64];
  char* end = nlohmann::detail::to_chars(buf, buf + sizeof buf, v);
  out_->append(buf, end);
  comma_ = true;
}

void JsonWriter::Bool(bool v) {
  Separate();
  *out_ += v ? "true" : "false";
  comma_ = true;
}

void JsonWriter::Null() {
  Separate();
  *out_ += "null";
  comma_ = true;
}

}  // namespace agentmem::engine
