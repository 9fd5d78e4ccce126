// engine/sql/maintenance.cc -- see maintenance.h.
#include "engine/sql/maintenance.h"

#include <cctype>
#include <vector>

namespace agentmem::engine::sql {

namespace {

struct Token {
  enum Kind { kWord, kString, kNumber, kParam, kSemicolon, kOther } kind;
  std::string text;  // as written (words upper-cased)
};

// Splits [p, end) into tokens up to and including the first ';' outside a
// literal; *stop is just past it (or end).
std::vector<Token> Lex(const char* p, const char* end, const char** stop) {
  std::vector<Token> out;
  while (p < end) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (std::isspace(c)) {
      p++;
    } else if (end - p >= 2 && p[0] == '-' && p[1] == '-') {
      while (p < end && *p != '\n') p++;
    } else if (end - p >= 2 && p[0] == '/' && p[1] == '*') {
      const char* close = p + 2;
      while (end - close >= 2 && !(close[0] == '*' && close[1] == '/')) close++;
      p = end - close >= 2 ? close + 2 : end;
    } else if (c == ';') {
      out.push_back({Token::kSemicolon, ";"});
      p++;
      break;
    } else if (c == '\'') {
      const char* q = p + 1;
      for (; q < end; q++) {
        if (*q == '\'') {
          if (q + 1 < end && q[1] == '\'') {
            q++;
          } else {
            break;
          }
        }
      }
      if (q >= end) {
        out.push_back({Token::kOther, std::string(p, end)});
        p = end;
      } else {
        out.push_back({Token::kString, std::string(p, q + 1)});
        p = q + 1;
      }
    } else if (std::isalpha(c) || c == '_') {
      std::string w;
      while (p < end && (std::isalnum(static_cast<unsigned char>(*p)) || *p == '_')) {
        w.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(*p++))));
      }
      out.push_back({Token::kWord, w});
    } else if (std::isdigit(c) || ((c == '-' || c == '+') && p + 1 < end && std::isdigit(static_cast<unsigned char>(p[1])))) {
      const char* q = p + 1;
      while (q < end && std::isdigit(static_cast<unsigned char>(*q))) q++;
      out.push_back({Token::kNumber, std::string(p, q)});
      p = q;
    } else if (c == '?' || c == ':' || c == '@' || c == '$') {
      // ?NNN takes digits only (as SQLite); :name, @name, $name letters too.
      const char* q = p + 1;
      auto part = [c](unsigned char x) { return c == '?' ? std::isdigit(x) != 0 : (std::isalnum(x) || x == '_'); };
      while (q < end && part(static_cast<unsigned char>(*q))) q++;
      out.push_back({Token::kParam, std::string(p, q)});
      p = q;
    } else {
      out.push_back({Token::kOther, std::string(1, static_cast<char>(c))});
      p++;
    }
  }
  *stop = p;
  return out;
}

constexpr const char* kGrammar =
    "FORGET USER u [SESSION s | BEFORE t] [PURGE], FORGET EPISODE id [PURGE], "
    "FORGET FACT id [PURGE] or FORGET BLOCK u name [PURGE] (u, s, name: 'text' or a "
    "parameter; t, id: an integer or a parameter)";

}  // namespace

Result<bool> RewriteMaintenance(const char* sql, const char* end, std::string* rewritten,
                                const char** rest) {
  const char* stop = end;
  std::vector<Token> t = Lex(sql, end, &stop);
  if (!t.empty() && t.back().kind == Token::kSemicolon) t.pop_back();
  if (t.empty() || t[0].kind != Token::kWord) return false;
  if (t[0].text == "VACUUM" && t.size() == 1) {
    *rewritten = "SELECT * FROM vacuum()";
    *rest = stop;
    return true;
  }
  if (t[0].text == "REINDEX" && t.size() == 1) {
    *rewritten = "SELECT * FROM reindex()";
    *rest = stop;
    return true;
  }
  if (t[0].text == "SET" && t.size() >= 2 && t[1].kind == Token::kWord && t[1].text == "RETENTION") {
    // SET RETENTION seconds [KEEP CITED]
    const bool keep = t.size() == 5 && t[3].kind == Token::kWord && t[3].text == "KEEP" &&
                      t[4].kind == Token::kWord && t[4].text == "CITED";
    if (!(t.size() == 3 || keep) ||
        !(t[2].kind == Token::kNumber || t[2].kind == Token::kParam)) {
      return Status(kError, "SET RETENTION: the form is SET RETENTION seconds [KEEP CITED] "
                            "(seconds: an integer or a parameter; 0 keeps episodes forever)");
    }
    *rewritten = "SELECT * FROM retention(" + t[2].text + ", " + (keep ? "1" : "0") + ")";
    *rest = stop;
    return true;
  }
  if (t[0].text != "FORGET") return false;
  auto bad = [](const std::string& why) {
    return Status(kError, "FORGET: " + why + "; the forms are " + kGrammar);
  };
  size_t i = 1;
  auto word = [&](const char* w) {
    if (i < t.size() && t[i].kind == Token::kWord && t[i].text == w) {
      i++;
      return true;
    }
    return false;
  };
  auto value = [&](bool text, std::string* out) {
    if (i >= t.size()) return false;
    const Token& v = t[i];
    if (v.kind == Token::kParam || (text ? v.kind == Token::kString : v.kind == Token::kNumber)) {
      *out = v.text;
      i++;
      return true;
    }
    return false;
  };
  std::string kind, user = "NULL", session = "NULL", before = "NULL", id = "NULL", name = "NULL";
  if (word("USER")) {
    kind = "'user'";
    if (!value(true, &user)) return bad("USER needs a user id");
    if (word("SESSION")) {
      kind = "'session'";
      if (!value(true, &session)) return bad("SESSION needs a session id");
    } else if (word("BEFORE")) {
      kind = "'before'";
      if (!value(false, &before)) return bad("BEFORE needs a time in unix microseconds");
    }
  } else if (word("EPISODE")) {
    kind = "'episode'";
    if (!value(false, &id)) return bad("EPISODE needs an id");
  } else if (word("FACT")) {
    kind = "'fact'";
    if (!value(false, &id)) return bad("FACT needs an id");
  } else if (word("BLOCK")) {
    kind = "'block'";
    if (!value(true, &user) || !value(true, &name)) return bad("BLOCK needs a user id and a name");
  } else {
    return bad("unknown form");
  }
  const bool purge = word("PURGE");
  if (i != t.size()) return bad("unexpected \"" + t[i].text + "\"");
  *rewritten = "SELECT * FROM forget(" + kind + ", " + user + ", " + session + ", " + before +
               ", " + id + ", " + name + ", " + (purge ? "1" : "0") + ")";
  *rest = stop;
  return true;
}

}  // namespace agentmem::engine::sql
