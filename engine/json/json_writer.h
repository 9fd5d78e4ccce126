// engine/json/json_writer.h -- JSON text appended straight to a std::string, with
// no tree in between: what profile and export write (engine/memory/memory.cc).
//
// Why not nlohmann::json: its trees allocate in their destructor (3.11.2's
// json_value::destroy reserves a std::vector), so a failed allocation while
// one is alive ends in std::terminate (docs/testing.md, R4). This writer owns
// nothing but the output string; an allocation that fails throws
// std::bad_alloc and leaves a prefix of the text, which the caller drops.
//
// The bytes are the ones nlohmann's compact dump() writes for the same values
// (dump(-1, ' ', false, error_handler_t::replace)), so that exports written
// before this writer re-export byte for byte (tests/engine/json_writer_test.cc
// compares the two):
//   - no whitespace; members and elements separated by ',', keys by ':';
//   - strings: '"' and '\' escaped, \b \f \n \r \t in short form, the other
//     bytes below 0x20 as \u00XX (lower-case hex), everything else as is
//     (UTF-8 not escaped); an invalid UTF-8 sequence becomes U+FFFD, cut where
//     nlohmann cuts it (the engine stores valid UTF-8, so this is a fallback);
//   - integers in decimal; doubles as nlohmann::detail::to_chars writes them
//     (Grisu2: round-trips, "1.0" for integral values, an exponent outside
//     1e-5 .. 1e15, e.g. "1e+16"), and null for NaN and infinities. Grisu2 is
//     not always the shortest form (std::to_chars writes "0.9682616" where it
//     writes "0.9682615999999999", about 1 in 700 float confidences), hence
//     nlohmann's own routine, which writes into a caller's buffer and neither
//     allocates nor throws.
//
// REQUIRES: calls form one JSON value (a Key() before each value of an
// object; End* matching Begin*); nothing checks this.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace agentmem::engine {

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  void Key(std::string_view key);

  void String(std::string_view s);
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Double(double v);
  void Bool(bool v);
  void Null();
  // A JSON value written as it is: `json` must be one valid JSON value
  // without line breaks (nothing checks this).
  void Raw(std::string_view json) {
    Separate();
    *out_ += json;
    comma_ = true;
  }

  // Value(x) picks the writer of x's type; Field(key, x) is Key + Value.
  void Value(std::string_view s) { String(s); }
  void Value(const char* s) { String(s); }
  void Value(double v) { Double(v); }
  void Value(bool v) { Bool(v); }
  void Value(std::nullptr_t) { Null(); }
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  void Value(T v) {
    if constexpr (std::is_signed_v<T>) {
      Int(v);
    } else {
      Uint(v);
    }
  }
  template <typename T>
  void Field(std::string_view key, const T& v) {
    Key(key);
    Value(v);
  }

 private:
  void Separate() {
    if (comma_) *out_ += ',';
  }
  void Open(char c) {
    Separate();
    *out_ += c;
    comma_ = false;
  }
  void Close(char c) {
    *out_ += c;
    comma_ = true;
  }
  template <typename T>
  void Decimal(T v);  // an integer

  std::string* out_;
  bool comma_ = false;  // a member or element came before: the next needs a ','
};

}  // namespace agentmem::engine
