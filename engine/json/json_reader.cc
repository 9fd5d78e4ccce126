// engine/json/json_reader.cc -- see json_reader.h.
#include "engine/json/json_reader.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <utility>

namespace agentmem::engine {

namespace {

using Json = nlohmann::json;

// nlohmann's SAX events, appended as tokens. `open` holds the index of each
// Begin token not yet closed, to note where its value ends.
class TokenSax {
 public:
  explicit TokenSax(JsonTokens* out) : out_(out) {}

  bool null() { return Add(JsonToken::kNull); }
  bool boolean(bool v) {
    Add(JsonToken::kBool);
    out_->back().b = v;
    return true;
  }
  bool number_integer(Json::number_integer_t v) {
    Add(JsonToken::kInt);
    out_->back().i = v;
    return true;
  }
  bool number_unsigned(Json::number_unsigned_t v) {
    Add(JsonToken::kUint);
    out_->back().u = v;
    return true;
  }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) {
    Add(JsonToken::kDouble);
    out_->back().d = v;
    return true;
  }
  bool string(Json::string_t& v) {
    Add(JsonToken::kString);
    out_->back().s = std::move(v);
    return true;
  }
  bool binary(Json::binary_t& /*v*/) { return false; }  // not in JSON text
  bool start_object(std::size_t /*elements*/) { return Open(JsonToken::kBeginObject); }
  bool key(Json::string_t& v) {
    Add(JsonToken::kKey);
    out_->back().s = std::move(v);
    return true;
  }
  bool end_object() { return Close(JsonToken::kEndObject); }
  bool start_array(std::size_t /*elements*/) { return Open(JsonToken::kBeginArray); }
  bool end_array() { return Close(JsonToken::kEndArray); }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) {
    return false;
  }

 private:
  bool Add(JsonToken::Kind k) {
    out_->emplace_back();
    out_->back().kind = k;
    return true;
  }
  bool Open(JsonToken::Kind k) {
    open_.push_back(out_->size());
    return Add(k);
  }
  bool Close(JsonToken::Kind k) {
    Add(k);
    (*out_)[open_.back()].u = out_->size();
    open_.pop_back();
    return true;
  }

  JsonTokens* out_;
  std::vector<size_t> open_;
};

bool ScalarEqual(const JsonToken& x, const JsonToken& y) {
  using K = JsonToken;
  if (x.kind == y.kind) {
    switch (x.kind) {
      case K::kNull: return true;
      case K::kBool: return x.b == y.b;
      case K::kInt: return x.i == y.i;
      case K::kUint: return x.u == y.u;
      case K::kDouble: return x.d == y.d;
      case K::kString: return x.s == y.s;
      default: return false;
    }
  }
  // Mixed numbers, converted as nlohmann's operator== converts them.
  auto as_double = [](const JsonToken& t) {
    return t.kind == K::kInt ? static_cast<double>(t.i) : static_cast<double>(t.u);
  };
  if (x.kind == K::kDouble && (y.kind == K::kInt || y.kind == K::kUint)) return x.d == as_double(y);
  if (y.kind == K::kDouble && (x.kind == K::kInt || x.kind == K::kUint)) return as_double(x) == y.d;
  if (x.kind == K::kUint && y.kind == K::kInt) return static_cast<int64_t>(x.u) == y.i;
  if (x.kind == K::kInt && y.kind == K::kUint) return x.i == static_cast<int64_t>(y.u);
  return false;
}

struct Member {
  const std::string* key;
  size_t value;
};

// The members of the object at index obj, by key; a repeated key once, with
// its last value.
void SortedMembers(const JsonTokens& t, size_t obj, std::vector<Member>* out) {
  out->clear();
  for (size_t p = obj + 1; t[p].kind == JsonToken::kKey; p = JsonValueEnd(t, p + 1)) {
    out->push_back({&t[p].s, p + 1});
  }
  std::stable_sort(out->begin(), out->end(),
                   [](const Member& a, const Member& b) { return *a.key < *b.key; });
  // Of equal keys (adjacent, in document order) keep the last.
  size_t w = 0;
  for (size_t r = 0; r < out->size(); r++) {
    if (r + 1 < out->size() && *(*out)[r].key == *(*out)[r + 1].key) continue;
    (*out)[w++] = (*out)[r];
  }
  out->resize(w);
}

// An array index as nlohmann's contains() accepts one: "0", or digits not
// starting with '0'; false too when it does not fit 64 bits.
bool ArrayIndex(const std::string& token, uint64_t* idx) {
  if (token.empty() || (token.size() > 1 && token[0] == '0')) return false;
  if (!std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  auto r = std::from_chars(token.data(), token.data() + token.size(), *idx);
  return r.ec == std::errc() && r.ptr == token.data() + token.size();
}

}  // namespace

bool ParseJson(std::string_view text, JsonTokens* out) {
  out->clear();
  TokenSax sax(out);
  return Json::sax_parse(text, &sax);
}

size_t JsonMember(const JsonTokens& t, size_t obj, std::string_view key) {
  size_t found = kNoJsonValue;
  for (size_t p = obj + 1; t[p].kind == JsonToken::kKey; p = JsonValueEnd(t, p + 1)) {
    if (t[p].s == key) found = p + 1;
  }
  return found;
}

bool JsonEqual(const JsonTokens& a, size_t ai, const JsonTokens& b, size_t bi) {
  std::vector<std::pair<size_t, size_t>> todo{{ai, bi}};  // pairs still to compare
  std::vector<Member> ma, mb;
  while (!todo.empty()) {
    auto [i, j] = todo.back();
    todo.pop_back();
    const JsonToken::Kind k = a[i].kind;
    if (k == JsonToken::kBeginArray || b[j].kind == JsonToken::kBeginArray) {
      if (k != b[j].kind) return false;
      size_t p = i + 1, q = j + 1;
      for (; a[p].kind != JsonToken::kEndArray && b[q].kind != JsonToken::kEndArray;
           p = JsonValueEnd(a, p), q = JsonValueEnd(b, q)) {
        todo.emplace_back(p, q);
      }
      if (p + 1 != JsonValueEnd(a, i) || q + 1 != JsonValueEnd(b, j)) return false;  // lengths
    } else if (k == JsonToken::kBeginObject || b[j].kind == JsonToken::kBeginObject) {
      if (k != b[j].kind) return false;
      SortedMembers(a, i, &ma);
      SortedMembers(b, j, &mb);
      if (ma.size() != mb.size()) return false;
      for (size_t m = 0; m < ma.size(); m++) {
        if (*ma[m].key != *mb[m].key) return false;
        todo.emplace_back(ma[m].value, mb[m].value);
      }
    } else if (!ScalarEqual(a[i], b[j])) {
      return false;
    }
  }
  return true;
}

bool ParseJsonPointer(std::string_view pointer, std::vector<std::string>* tokens) {
  tokens->clear();
  if (pointer.empty()) return true;  // the whole value
  if (pointer[0] != '/') return false;
  size_t start = 1;
  while (true) {
    size_t slash = pointer.find('/', start);
    std::string_view raw = pointer.substr(start, slash == std::string_view::npos
                                                     ? std::string_view::npos
                                                     : slash - start);
    std::string token;
    for (size_t k = 0; k < raw.size(); k++) {
      if (raw[k] != '~') {
        token += raw[k];
      } else if (k + 1 < raw.size() && (raw[k + 1] == '0' || raw[k + 1] == '1')) {
        token += raw[++k] == '0' ? '~' : '/';
      } else {
        return false;
      }
    }
    tokens->push_back(std::move(token));
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

size_t JsonPointerFind(const JsonTokens& t, const std::vector<std::string>& pointer) {
  size_t at = 0;
  for (const std::string& token : pointer) {
    if (t[at].kind == JsonToken::kBeginObject) {
      at = JsonMember(t, at, token);
      if (at == kNoJsonValue) return kNoJsonValue;
    } else if (t[at].kind == JsonToken::kBeginArray) {
      uint64_t idx = 0;
      if (!ArrayIndex(token, &idx)) return kNoJsonValue;
      size_t p = at + 1;
      for (; idx > 0 && t[p].kind != JsonToken::kEndArray; idx--) p = JsonValueEnd(t, p);
      if (t[p].kind == JsonToken::kEndArray) return kNoJsonValue;
      at = p;
    } else {
      return kNoJsonValue;  // a scalar has no members
    }
  }
  return at;
}

}  // namespace agentmem::engine
