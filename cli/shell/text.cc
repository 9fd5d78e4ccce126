// cli/shell/text.cc -- see text.h.
#include "shell/text.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace agentmem::shell {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

// Reads exactly n digits at s[*i].
bool Digits(const std::string& s, size_t* i, int n, int* out) {
  int v = 0;
  for (int k = 0; k < n; k++, (*i)++) {
    if (*i >= s.size() || s[*i] < '0' || s[*i] > '9') return false;
    v = v * 10 + (s[*i] - '0');
  }
  *out = v;
  return true;
}

}  // namespace

bool SqlComplete(const std::string& sql) {
  enum { kNormal, kQuote, kLineComment, kBlockComment } state = kNormal;
  char close = 0;
  bool complete = false;
  for (size_t i = 0; i < sql.size(); i++) {
    char c = sql[i];
    switch (state) {
      case kNormal:
        if (c == ';') {
          complete = true;
        } else if (c == '\'' || c == '"' || c == '`' || c == '[') {
          state = kQuote;
          close = c == '[' ? ']' : c;
          complete = false;
        } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
          state = kLineComment;
        } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
          state = kBlockComment;
          i++;
        } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f') {
          complete = false;
        }
        break;
      case kQuote:
        // A doubled quote inside a string is an escaped quote: leaving and
        // re-entering the state handles it.
        if (c == close) state = kNormal;
        break;
      case kLineComment:
        if (c == '\n') state = kNormal;
        break;
      case kBlockComment:
        if (c == '*' && i + 1 < sql.size() && sql[i + 1] == '/') {
          state = kNormal;
          i++;
        }
        break;
    }
  }
  return complete && (state == kNormal || state == kLineComment);
}

bool SplitArgs(const std::string& line, std::vector<std::string>* words, std::string* error) {
  words->clear();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() &&
           (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n')) {
      i++;
    }
    if (i >= line.size()) break;
    std::string word;
    if (line[i] == '\'' || line[i] == '"') {
      char q = line[i++];
      bool closed = false;
      while (i < line.size()) {
        char c = line[i++];
        if (c == q && q == '\'' && i < line.size() && line[i] == '\'') {
          word += c;  // '' inside '...' is one quote, as in SQL
          i++;
          continue;
        }
        if (c == q) {
          closed = true;
          break;
        }
        if (q == '"' && c == '\\' && i < line.size()) {
          char e = line[i++];
          word += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        } else {
          word += c;
        }
      }
      if (!closed) {
        *error = std::string("unterminated ") + q + " quote in: " + line;
        return false;
      }
    } else {
      while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' &&
             line[i] != '\n') {
        word += line[i++];
      }
    }
    words->push_back(std::move(word));
  }
  return true;
}

std::string Thousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); i++) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string HumanBytes(int64_t n) {
  static const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  char buf[64];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(n));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  }
  return buf;
}

bool ParseIsoTime(const std::string& s, int64_t* micros) {
  size_t i = 0;
  int y, mo, d, h = 0, mi = 0, sec = 0;
  if (!Digits(s, &i, 4, &y) || i >= s.size() || s[i++] != '-' || !Digits(s, &i, 2, &mo) ||
      i >= s.size() || s[i++] != '-' || !Digits(s, &i, 2, &d)) {
    return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31) return false;
  int64_t frac = 0;
  if (i < s.size() && (s[i] == 'T' || s[i] == ' ')) {
    i++;
    if (!Digits(s, &i, 2, &h) || i >= s.size() || s[i++] != ':' || !Digits(s, &i, 2, &mi)) {
      return false;
    }
    if (i < s.size() && s[i] == ':') {
      i++;
      if (!Digits(s, &i, 2, &sec)) return false;
      if (i < s.size() && s[i] == '.') {
        i++;
        int64_t scale = 100000;
        size_t start = i;
        for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; i++) {
          frac += (s[i] - '0') * scale;
          scale /= 10;
        }
        if (i == start) return false;
      }
    }
    if (h > 23 || mi > 59 || sec > 60) return false;
  }
  int64_t offset_s = 0;
  if (i < s.size() && s[i] == 'Z') {
    i++;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    int sign = s[i++] == '-' ? -1 : 1, oh, om = 0;
    if (!Digits(s, &i, 2, &oh)) return false;
    if (i < s.size() && s[i] == ':') i++;
    if (i < s.size() && !Digits(s, &i, 2, &om)) return false;
    offset_s = sign * (oh * 3600 + om * 60);
  }
  if (i != s.size()) return false;
  int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_s;
  *micros = secs * 1000000 + frac;
  return true;
}

std::string FormatIsoTime(int64_t micros) {
  int64_t secs = micros / 1000000, frac = micros % 1000000;
  if (frac < 0) {
    frac += 1000000;
    secs--;
  }
  int64_t days = secs / 86400, rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    days--;
  }
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02d:%02d:%02d",
                        static_cast<long long>(y), m, d, static_cast<int>(rem / 3600),
                        static_cast<int>(rem / 60 % 60), static_cast<int>(rem % 60));
  if (frac) std::snprintf(buf + n, sizeof buf - n, ".%06lld", static_cast<long long>(frac));
  return std::string(buf) + "Z";
}

std::string SqlQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

bool ParseInt(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end) return false;
  *v = x;
  return true;
}

}  // namespace agentmem::shell
