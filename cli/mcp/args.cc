// cli/mcp/args.cc -- see args.h.
#include "mcp/args.h"

#include <cmath>

namespace agentmem::mcp {

void CheckNoNul(const std::string& s, const std::string& what) {
  if (s.find('\0') != std::string::npos) throw ToolError(what + " holds a NUL byte");
}

Args::Args(const JsonTokens& t, size_t obj, std::string path)
    : t_(&t), obj_(obj), path_(std::move(path)) {}

size_t Args::At(const std::string& key) const {
  if (obj_ == kNoJsonValue) return kNoJsonValue;
  size_t at = engine::JsonMember(*t_, obj_, key);
  if (at != kNoJsonValue && (*t_)[at].kind == JsonToken::kNull) return kNoJsonValue;
  return at;
}

std::vector<std::string> Args::Keys() const {
  std::vector<std::string> keys;
  if (obj_ == kNoJsonValue) return keys;
  size_t end = engine::JsonValueEnd(*t_, obj_);
  for (size_t i = obj_ + 1; i + 1 < end; i = engine::JsonValueEnd(*t_, i + 1)) {
    keys.push_back((*t_)[i].s);
  }
  return keys;
}

std::string Args::Name(const std::string& key) const {
  return "argument \"" + path_ + key + "\"";
}

void Args::WrongType(const std::string& key, size_t at, const char* want) const {
  throw ToolError(Name(key) + " must be " + want + ", not " + JsonTypeName((*t_)[at]));
}

std::string Args::CheckedString(const JsonToken& tok, const std::string& name) const {
  CheckNoNul(tok.s, name);
  return tok.s;
}

std::optional<std::string> Args::String(const std::string& key) const {
  size_t at = At(key);
  if (at == kNoJsonValue) return std::nullopt;
  if ((*t_)[at].kind != JsonToken::kString) WrongType(key, at, "a string");
  return CheckedString((*t_)[at], Name(key));
}

std::string Args::RequiredString(const std::string& key) const {
  auto s = String(key);
  if (!s) throw ToolError("missing " + Name(key) + " (a string)");
  return *s;
}

int64_t Args::Int(const std::string& key, int64_t def, int64_t lo, int64_t hi) const {
  size_t at = At(key);
  if (at == kNoJsonValue) return def;
  const JsonToken& tok = (*t_)[at];
  bool fits = true;
  int64_t v = 0;
  if (tok.kind == JsonToken::kInt) {
    v = tok.i;
  } else if (tok.kind == JsonToken::kUint) {
    fits = tok.u <= static_cast<uint64_t>(INT64_MAX);
    v = static_cast<int64_t>(tok.u);
  } else if (tok.kind == JsonToken::kDouble && std::nearbyint(tok.d) == tok.d &&
             std::fabs(tok.d) < 9.2e18) {
    v = static_cast<int64_t>(tok.d);
  } else {
    WrongType(key, at, "an integer");
  }
  if (!fits || v < lo || v > hi) {
    throw ToolError(Name(key) + " must be between " + std::to_string(lo) + " and " +
                    std::to_string(hi));
  }
  return v;
}

double Args::Number(const std::string& key, double def) const {
  size_t at = At(key);
  if (at == kNoJsonValue) return def;
  const JsonToken& tok = (*t_)[at];
  if (tok.kind == JsonToken::kInt) return static_cast<double>(tok.i);
  if (tok.kind == JsonToken::kUint) return static_cast<double>(tok.u);
  if (tok.kind == JsonToken::kDouble) return tok.d;
  WrongType(key, at, "a number");
}

bool Args::Bool(const std::string& key, bool def) const {
  size_t at = At(key);
  if (at == kNoJsonValue) return def;
  if ((*t_)[at].kind != JsonToken::kBool) WrongType(key, at, "a boolean");
  return (*t_)[at].b;
}

size_t Args::RequiredArray(const std::string& key) const {
  size_t at = At(key);
  if (at == kNoJsonValue) throw ToolError("missing " + Name(key) + " (an array)");
  if ((*t_)[at].kind != JsonToken::kBeginArray) WrongType(key, at, "an array");
  return at;
}

std::vector<std::string> Args::RequiredStrings(const std::string& key) const {
  size_t at = RequiredArray(key);
  std::vector<std::string> out;
  size_t end = engine::JsonValueEnd(*t_, at);
  for (size_t i = at + 1; i + 1 < end; i = engine::JsonValueEnd(*t_, i)) {
    std::string name = Name(key) + "[" + std::to_string(out.size()) + "]";
    if ((*t_)[i].kind != JsonToken::kString) {
      throw ToolError(name + " must be a string, not " + JsonTypeName((*t_)[i]));
    }
    out.push_back(CheckedString((*t_)[i], name));
  }
  return out;
}

std::vector<int64_t> Args::Ints(const std::string& key) const {
  std::vector<int64_t> out;
  if (At(key) == kNoJsonValue) return out;
  size_t at = RequiredArray(key);
  size_t end = engine::JsonValueEnd(*t_, at);
  for (size_t i = at + 1; i + 1 < end; i = engine::JsonValueEnd(*t_, i)) {
    const JsonToken& tok = (*t_)[i];
    if (tok.kind == JsonToken::kInt) {
      out.push_back(tok.i);
    } else if (tok.kind == JsonToken::kUint && tok.u <= static_cast<uint64_t>(INT64_MAX)) {
      out.push_back(static_cast<int64_t>(tok.u));
    } else {
      throw ToolError(Name(key) + " must hold integers");
    }
  }
  return out;
}

std::vector<Args> Args::RequiredObjects(const std::string& key) const {
  size_t at = RequiredArray(key);
  std::vector<Args> out;
  size_t end = engine::JsonValueEnd(*t_, at);
  for (size_t i = at + 1; i + 1 < end; i = engine::JsonValueEnd(*t_, i)) {
    std::string path = path_ + key + "[" + std::to_string(out.size()) + "].";
    if ((*t_)[i].kind != JsonToken::kBeginObject) {
      throw ToolError("argument \"" + path.substr(0, path.size() - 1) + "\" must be an object, not " +
                      JsonTypeName((*t_)[i]));
    }
    out.emplace_back(*t_, i, path);
  }
  return out;
}

}  // namespace agentmem::mcp
