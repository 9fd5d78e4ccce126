// cli/mcp/args.h -- a tool call's arguments: typed access to the members of
// one JSON object, each failure a ToolError whose message names the argument
// (the server answers it as a tool result with isError: the model reads it).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "mcp/json_util.h"

namespace agentmem::mcp {

// A failed tool call: the message goes back to the client in an isError result.
struct ToolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // The object at token `obj` of t (kNoJsonValue: no arguments). `path`
  // prefixes argument names in messages ("entities[2].").
  Args(const JsonTokens& t, size_t obj, std::string path = "");

  bool Has(const std::string& key) const { return At(key) != kNoJsonValue; }
  // The token index of key's value, or kNoJsonValue (absent or null).
  size_t At(const std::string& key) const;
  const JsonTokens& tokens() const { return *t_; }
  // The argument names of the object, in order.
  std::vector<std::string> Keys() const;

  // Each getter throws ToolError when the argument has the wrong type, and
  // the Required* ones also when it is missing. Strings never hold NUL.
  std::string RequiredString(const std::string& key) const;
  std::optional<std::string> String(const std::string& key) const;
  int64_t Int(const std::string& key, int64_t def, int64_t lo, int64_t hi) const;
  double Number(const std::string& key, double def) const;
  bool Bool(const std::string& key, bool def) const;
  std::vector<std::string> RequiredStrings(const std::string& key) const;
  std::vector<int64_t> Ints(const std::string& key) const;
  // The objects of an array argument, each as Args.
  std::vector<Args> RequiredObjects(const std::string& key) const;

  // "argument \"path+key\"", for messages.
  std::string Name(const std::string& key) const;

 private:
  std::string CheckedString(const JsonToken& tok, const std::string& name) const;
  [[noreturn]] void WrongType(const std::string& key, size_t at, const char* want) const;
  size_t RequiredArray(const std::string& key) const;

  const JsonTokens* t_;
  size_t obj_;
  std::string path_;
};

// A string holds no NUL byte; throws ToolError naming `what` otherwise.
void CheckNoNul(const std::string& s, const std::string& what);

}  // namespace agentmem::mcp
