// format/status.h -- Status and Result<T>: how every layer reports failure.
//
// A Status is OK (cheap: a null pointer) or carries an agentmem result code
// (the extended code from include/agentmem.h, e.g. AGENTMEM_CORRUPT_CHECKSUM),
// a message, and, for corruption, the number of the page where the problem was
// detected. Codes are plain ints so that format/ does not depend on the public
// header; the values are defined once, in codes.h, and agentmem.h repeats them
// (a static_assert in engine/capi/capi.cc keeps the two lists equal).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "format/codes.h"

namespace agentmem {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(int code, std::string msg, int64_t page_no = -1);
  Status(const Status& o) : rep_(o.rep_ ? std::make_unique<Rep>(*o.rep_) : nullptr) {}
  Status& operator=(const Status& o) {
    rep_ = o.rep_ ? std::make_unique<Rep>(*o.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }
  bool ok() const { return rep_ == nullptr; }
  // The extended result code (AGENTMEM_OK when ok()).
  int code() const { return rep_ ? rep_->code : kOk; }
  // The primary result code: the low 8 bits of the extended code.
  int primary() const { return code() & 0xff; }
  const std::string& message() const;
  // Page number where corruption was detected, or -1.
  int64_t page_no() const { return rep_ ? rep_->page_no : -1; }
  std::string ToString() const;
  void IgnoreError() const {}

 private:
  struct Rep {
    int code;
    std::string msg;
    int64_t page_no;
  };
  std::unique_ptr<Rep> rep_;
};

// printf-style constructor for messages.
Status StatusF(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Corruption detected at a page: records the page number and the place in the
// source where it was detected (in the manner of SQLITE_CORRUPT_BKPT).
Status CorruptionAt(int code, int64_t page_no, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define AGENTMEM_CORRUPTION(code, page_no, ...) \
  ::agentmem::CorruptionAt((code), (page_no), __FILE__, __LINE__, __VA_ARGS__)

// `cause`, met while using page page_no (a `what`), as corruption there:
// "page N (what): cause's message". Memory running out is not damage: a
// kNoMem cause is returned as it is.
Status CorruptionFrom(Status cause, int code, int64_t page_no, const char* what,
                      const char* file, int line);
#define AGENTMEM_CORRUPTION_FROM(cause, code, page_no, what) \
  ::agentmem::CorruptionFrom((cause), (code), (page_no), (what), __FILE__, __LINE__)

// Result<T>: a value or a Status (C++20 has no std::expected).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T* operator->() { return &*value_; }
  T& operator*() { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

#define AGENTMEM_RETURN_IF_ERROR(expr)   \
  do {                                   \
    ::agentmem::Status _st = (expr);     \
    if (!_st.ok()) return _st;           \
  } while (0)

}  // namespace agentmem
