// index/text/tokenizer.cc -- the tokenizer pipeline and its config string
// (see tokenizer.h).
#include "index/text/tokenizer.h"

#include <charconv>

#include "index/text/english.h"
#include "index/text/unicode.h"

namespace agentmem::index {
namespace {

constexpr std::string_view kUnicodeName = "unicode-v1";
constexpr std::string_view kAsciiName = "ascii-v1";

std::string_view AlphabetName(Alphabet alphabet) {
  return alphabet == Alphabet::kAscii ? kAsciiName : kUnicodeName;
}

// Splits "a;b;c" at ';'. Empty fields are kept so that they can be refused.
std::vector<std::string_view> SplitFields(std::string_view s) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t end = s.find(';', start);
    fields.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return fields;
    start = end + 1;
  }
}

Status ParseUint32(std::string_view key, std::string_view text, uint32_t* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return StatusF(kMismatch, "tokenizer config: %.*s=%.*s is not a number in 0..4294967295",
                   static_cast<int>(key.size()), key.data(), static_cast<int>(text.size()),
                   text.data());
  }
  return Status::OK();
}

Status ParseFlag(std::string_view key, std::string_view text, bool* out) {
  if (text != "0" && text != "1") {
    return StatusF(kMismatch, "tokenizer config: %.*s=%.*s must be 0 or 1",
                   static_cast<int>(key.size()), key.data(), static_cast<int>(text.size()),
                   text.data());
  }
  *out = text == "1";
  return Status::OK();
}

Status ParseField(std::string_view field, TokenizerOptions* options) {
  size_t eq = field.find('=');
  if (eq == std::string_view::npos) {
    return StatusF(kMismatch, "tokenizer config: field '%.*s' is not key=value",
                   static_cast<int>(field.size()), field.data());
  }
  std::string_view key = field.substr(0, eq);
  std::string_view value = field.substr(eq + 1);
  if (key == "stem") return ParseFlag(key, value, &options->stem);
  if (key == "stop") return ParseFlag(key, value, &options->stop_words);
  if (key == "min") return ParseUint32(key, value, &options->min_token_chars);
  if (key == "max") return ParseUint32(key, value, &options->max_token_chars);
  if (key == "snowball") return ParseFlag(key, value, &options->snowball);
  if (key == "qstop") return ParseFlag(key, value, &options->query_stop_words);
  if (key == "context") {
    AGENTMEM_RETURN_IF_ERROR(ParseUint32(key, value, &options->context));
    if (options->context > TokenizerOptions::kMaxContext) {
      return StatusF(kRange, "tokenizer config: context=%u is above %u", options->context,
                     TokenizerOptions::kMaxContext);
    }
    return Status::OK();
  }
  if (key == "own") {
    AGENTMEM_RETURN_IF_ERROR(ParseUint32(key, value, &options->own_weight));
    if (options->own_weight == 0 || options->own_weight > TokenizerOptions::kMaxOwnWeight) {
      return StatusF(kRange, "tokenizer config: own=%u is not in 1..%u", options->own_weight,
                     TokenizerOptions::kMaxOwnWeight);
    }
    return Status::OK();
  }
  return StatusF(kFormatVersion, "tokenizer config: option '%.*s' is not known to this version",
                 static_cast<int>(key.size()), key.data());
}

Status CheckLengths(const TokenizerOptions& options) {
  if (options.min_token_chars == 0) {
    return Status(kRange, "tokenizer config: min must be at least 1");
  }
  if (options.max_token_chars != 0 && options.max_token_chars < options.min_token_chars) {
    return StatusF(kRange, "tokenizer config: max=%u is below min=%u", options.max_token_chars,
                   options.min_token_chars);
  }
  return Status::OK();
}

}  // namespace

std::string TokenizerConfigString(const TokenizerOptions& options) {
  std::string s(AlphabetName(options.alphabet));
  auto add = [&s](const char* key, uint32_t value) {
    s.append(";").append(key).append("=").append(std::to_string(value));
  };
  add("stem", options.stem ? 1 : 0);
  add("stop", options.stop_words ? 1 : 0);
  add("min", options.min_token_chars);
  add("max", options.max_token_chars);
  if (options.snowball) add("snowball", 1);
  if (options.query_stop_words) add("qstop", 1);
  if (options.context != 0) add("context", options.context);
  if (options.own_weight != 1) add("own", options.own_weight);
  return s;
}

Result<TokenizerOptions> ParseTokenizerConfig(std::string_view config) {
  std::vector<std::string_view> fields = SplitFields(config);
  TokenizerOptions options;
  if (fields[0] == kAsciiName) {
    options.alphabet = Alphabet::kAscii;
  } else if (fields[0] != kUnicodeName) {
    return StatusF(kFormatVersion, "tokenizer '%.*s' is not known to this version of agentmem",
                   static_cast<int>(fields[0].size()), fields[0].data());
  }
  std::vector<std::string_view> seen;
  for (size_t i = 1; i < fields.size(); i++) {
    std::string_view key = fields[i].substr(0, fields[i].find('='));
    for (std::string_view k : seen) {
      if (k == key) {
        return StatusF(kMismatch, "tokenizer config: option '%.*s' appears twice",
                       static_cast<int>(key.size()), key.data());
      }
    }
    seen.push_back(key);
    AGENTMEM_RETURN_IF_ERROR(ParseField(fields[i], &options));
  }
  AGENTMEM_RETURN_IF_ERROR(CheckLengths(options));
  return options;
}

std::vector<std::string> Tokenizer::Tokenize(std::string_view text) const {
  std::vector<std::string> out;
  AppendTokens(text, &out);
  return out;
}

void Tokenizer::AppendTokens(std::string_view text, std::vector<std::string>* out) const {
  Append(text, false, out);
}

std::vector<std::string> Tokenizer::TokenizeQuery(std::string_view text) const {
  std::vector<std::string> out;
  Append(text, options_.query_stop_words, &out);
  if (out.empty() && options_.query_stop_words) Append(text, false, &out);
  return out;
}

void Tokenizer::Append(std::string_view text, bool query, std::vector<std::string>* out) const {
  const bool ascii = options_.alphabet == Alphabet::kAscii;
  const uint32_t max_chars = options_.max_token_chars;
  std::string token;
  uint64_t chars = 0;  // code points in the current run, saturating past max
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t c = FoldCase(DecodeUtf8(text, &pos));
    if (ascii ? IsAsciiWordChar(c) : IsWordChar(c)) {
      // Past the maximum the token is doomed: stop copying it (a 100 MB
      // "word" costs no memory) but keep counting so it is dropped.
      if (max_chars == 0 || chars <= max_chars) {
        AppendUtf8(c, &token);
        chars++;
      }
    } else if (chars > 0) {
      EmitToken(&token, chars, query, out);
      chars = 0;
    }
  }
  if (chars > 0) EmitToken(&token, chars, query, out);
}

void Tokenizer::EmitToken(std::string* token, uint64_t chars, bool query,
                          std::vector<std::string>* out) const {
  bool keep = chars >= options_.min_token_chars &&
              (options_.max_token_chars == 0 || chars <= options_.max_token_chars) &&
              !(options_.stop_words && IsEnglishStopWord(*token)) &&
              !(query && IsEnglishQueryStopWord(*token));
  if (keep) {
    out->push_back(options_.snowball ? StemSnowballEnglish(*token)
                   : options_.stem   ? StemEnglish(*token)
                                     : *token);
  }
  token->clear();
}

}  // namespace agentmem::index
