// engine/memory/markdown_text.cc -- escapes, fences, table rows and times of the
// Markdown memory layout (engine/memory/markdown_text.h; docs/markdown.md).
#include "engine/memory/markdown_text.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace agentmem::engine::markdown {

namespace {

bool IsAsciiPunct(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Whether s[i] is escaped: an odd number of backslashes right before it.
bool Escaped(std::string_view s, size_t i) {
  size_t n = 0;
  while (i > n && s[i - n - 1] == '\\') n++;
  return n % 2 == 1;
}

constexpr int64_t kMicros = 1000000;
// The seconds of 0001-01-01T00:00:00Z and of 10000-01-01T00:00:00Z.
constexpr int64_t kFirstSecond = -62135596800LL;
constexpr int64_t kEndSecond = 253402300800LL;

bool IsLeap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysIn(int year, int month) {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && IsLeap(year) ? 29 : kDays[month - 1];
}

// Reads exactly `n` digits at s[*at] into *v.
bool Digits(std::string_view s, size_t* at, size_t n, int* v) {
  if (*at + n > s.size()) return false;
  int x = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[*at + i];
    if (c < '0' || c > '9') return false;
    x = x * 10 + (c - '0');
  }
  *at += n;
  *v = x;
  return true;
}

bool Expect(std::string_view s, size_t* at, char c) {
  if (*at >= s.size() || s[*at] != c) return false;
  (*at)++;
  return true;
}

}  // namespace

std::string Escape(std::string_view s, bool pipe) {
  size_t lead = 0;
  while (lead < s.size() && s[lead] == ' ') lead++;
  size_t tail = s.size();
  while (tail > lead && s[tail - 1] == ' ') tail--;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    char c = s[i];
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '|': out += pipe ? "\\|" : "|"; break;
      case ' ': out += i < lead || i >= tail ? "\\ " : " "; break;
      default: out += c;
    }
  }
  return out;
}

std::string Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    char c = s[i];
    if (c != '\\' || i + 1 == s.size()) {
      out += c;
      continue;
    }
    char next = s[i + 1];
    if (next == 'n') {
      out += '\n';
    } else if (next == 'r') {
      out += '\r';
    } else if (next == 't') {
      out += '\t';
    } else if (next == ' ' || IsAsciiPunct(next)) {
      out += next;
    } else {
      out += c;  // not an escape: the backslash stays, the next character is read next
      continue;
    }
    i++;
  }
  return out;
}

std::string_view TrimUnescaped(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back()) && !Escaped(s, s.size() - 1)) s.remove_suffix(1);
  return s;
}

std::vector<std::string> SplitRow(std::string_view row) {
  row = TrimUnescaped(row);
  if (!row.empty() && row.front() == '|') row.remove_prefix(1);
  if (!row.empty() && row.back() == '|' && !Escaped(row, row.size() - 1)) row.remove_suffix(1);
  std::vector<std::string> cells;
  size_t start = 0;
  for (size_t i = 0; i <= row.size(); i++) {
    if (i < row.size() && row[i] == '\\') {
      i++;  // the escaped character is part of the cell
      continue;
    }
    if (i == row.size() || row[i] == '|') {
      cells.push_back(Unescape(TrimUnescaped(row.substr(start, i - start))));
      start = i + 1;
    }
  }
  return cells;
}

std::string FenceFor(std::string_view value) {
  size_t longest = 0, run = 0;
  for (char c : value) {
    run = c == '`' ? run + 1 : 0;
    if (run > longest) longest = run;
  }
  return std::string(longest < 3 ? 3 : longest + 1, '`');
}

std::string FormatTime(int64_t us) {
  int64_t secs = us / kMicros, frac = us % kMicros;
  if (frac < 0) {
    secs--;
    frac += kMicros;
  }
  std::tm tm{};
  const std::time_t t = static_cast<std::time_t>(secs);
  if (secs < kFirstSecond || secs >= kEndSecond || !gmtime_r(&t, &tm)) {
    std::string out = "@";
    out += std::to_string(us);
    return out;
  }
  char buf[48];
  if (tm.tm_hour == 0 && tm.tm_min == 0 && tm.tm_sec == 0 && frac == 0) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  std::string out = buf;
  if (frac != 0) {
    std::snprintf(buf, sizeof buf, ".%06lld", static_cast<long long>(frac));
    std::string f = buf;
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  return out + "Z";
}

bool ParseTime(std::string_view s, int64_t* us, std::string* why) {
  if (!s.empty() && s.front() == '@') {
    std::string_view n = s.substr(1);
    auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), *us);
    if (n.empty() || ec != std::errc() || end != n.data() + n.size()) {
      *why = "\"@\" must be followed by a whole number of unix microseconds";
      return false;
    }
    return true;
  }
  *why = "expected a time such as 2026-01-02, 2026-01-02T10:00:05Z or @unix-microseconds";
  size_t at = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  int64_t frac = 0, offset_min = 0;
  if (!Digits(s, &at, 4, &year) || !Expect(s, &at, '-') || !Digits(s, &at, 2, &month) ||
      !Expect(s, &at, '-') || !Digits(s, &at, 2, &day)) {
    return false;
  }
  if (at < s.size()) {
    if (s[at] != 'T' && s[at] != 't' && s[at] != ' ') return false;
    at++;
    if (!Digits(s, &at, 2, &hour) || !Expect(s, &at, ':') || !Digits(s, &at, 2, &minute)) {
      return false;
    }
    if (Expect(s, &at, ':') && !Digits(s, &at, 2, &second)) return false;
    if (Expect(s, &at, '.')) {
      size_t digits = 0;
      for (; at < s.size() && s[at] >= '0' && s[at] <= '9'; at++, digits++) {
        if (digits >= 6) {
          *why = "a time has at most 6 digits after the second (microseconds)";
          return false;
        }
        frac = frac * 10 + (s[at] - '0');
      }
      if (digits == 0) return false;
      for (; digits < 6; digits++) frac *= 10;
    }
    if (at < s.size() && (s[at] == 'Z' || s[at] == 'z')) {
      at++;
    } else if (at < s.size() && (s[at] == '+' || s[at] == '-')) {
      const int sign = s[at] == '-' ? -1 : 1;
      at++;
      int oh = 0, om = 0;
      if (!Digits(s, &at, 2, &oh) || !Expect(s, &at, ':') || !Digits(s, &at, 2, &om) || oh > 23 ||
          om > 59) {
        return false;
      }
      offset_min = sign * (oh * 60 + om);
    }
    if (at != s.size()) return false;
  }
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > DaysIn(year, month) || hour > 23 ||
      minute > 59 || second > 59) {
    *why = "no such date or time of day";
    return false;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const int64_t secs = static_cast<int64_t>(timegm(&tm)) - offset_min * 60;
  *us = secs * kMicros + frac;
  return true;
}

std::string FormatConfidence(float f) {
  char buf[32];
  for (int prec = 1; prec <= 9; prec++) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(f));
    if (static_cast<float>(std::strtod(buf, nullptr)) == f) break;
  }
  return buf;
}

}  // namespace agentmem::engine::markdown
