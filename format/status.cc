// format/status.cc -- Status, result-code names.
#include "format/status.h"

#include <cstdarg>
#include <cstdio>

namespace agentmem {

namespace {
std::string VFormat(const char* fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap2);
  va_end(ap2);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  return out;
}
const std::string kEmpty;
}  // namespace

Status::Status(int code, std::string msg, int64_t page_no)
    : rep_(code == kOk ? nullptr : std::make_unique<Rep>(Rep{code, std::move(msg), page_no})) {}

const std::string& Status::message() const { return rep_ ? rep_->msg : kEmpty; }

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code())) + ": " + rep_->msg;
}

Status StatusF(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = VFormat(fmt, ap);
  va_end(ap);
  return Status(code, std::move(msg));
}

Status CorruptionAt(int code, int64_t page_no, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = VFormat(fmt, ap);
  va_end(ap);
  (void)file;
  (void)line;
#ifndef NDEBUG
  msg += " [detected at " + std::string(file) + ":" + std::to_string(line) + "]";
#endif
  return Status(code, std::move(msg), page_no);
}

Status CorruptionFrom(Status cause, int code, int64_t page_no, const char* what,
                      const char* file, int line) {
  if (cause.code() == kNoMem) return cause;
  return CorruptionAt(code, page_no, file, line, "page %lld (%s): %s",
                      static_cast<long long>(page_no), what, cause.message().c_str());
}

const char* CodeName(int code) {
  switch (code) {
    case kOk: return "AGENTMEM_OK";
    case kError: return "AGENTMEM_ERROR";
    case kInternal: return "AGENTMEM_INTERNAL";
    case kNoMem: return "AGENTMEM_NOMEM";
    case kIoErr: return "AGENTMEM_IOERR";
    case kCorrupt: return "AGENTMEM_CORRUPT";
    case kNotADb: return "AGENTMEM_NOTADB";
    case kFormatVersion: return "AGENTMEM_FORMAT_VERSION";
    case kBusy: return "AGENTMEM_BUSY";
    case kReadOnly: return "AGENTMEM_READONLY";
    case kMisuse: return "AGENTMEM_MISUSE";
    case kFull: return "AGENTMEM_FULL";
    case kCantOpen: return "AGENTMEM_CANTOPEN";
    case kConstraint: return "AGENTMEM_CONSTRAINT";
    case kNotFound: return "AGENTMEM_NOTFOUND";
    case kMismatch: return "AGENTMEM_MISMATCH";
    case kTooBig: return "AGENTMEM_TOOBIG";
    case kRange: return "AGENTMEM_RANGE";
    case kAbort: return "AGENTMEM_ABORT";
    case kRow: return "AGENTMEM_ROW";
    case kDone: return "AGENTMEM_DONE";
    case kIoErrRead: return "AGENTMEM_IOERR_READ";
    case kIoErrWrite: return "AGENTMEM_IOERR_WRITE";
    case kIoErrFsync: return "AGENTMEM_IOERR_FSYNC";
    case kIoErrShortRead: return "AGENTMEM_IOERR_SHORT_READ";
    case kIoErrTruncate: return "AGENTMEM_IOERR_TRUNCATE";
    case kIoErrLock: return "AGENTMEM_IOERR_LOCK";
    case kIoErrSticky: return "AGENTMEM_IOERR_STICKY";
    case kCorruptChecksum: return "AGENTMEM_CORRUPT_CHECKSUM";
    case kCorruptPage: return "AGENTMEM_CORRUPT_PAGE";
    case kCorruptIndex: return "AGENTMEM_CORRUPT_INDEX";
    case kCorruptSuperblock: return "AGENTMEM_CORRUPT_SUPERBLOCK";
    case kCorruptHeader: return "AGENTMEM_CORRUPT_HEADER";
    case kNotFoundChanges: return "AGENTMEM_NOTFOUND_CHANGES";
    case kBusyTimeout: return "AGENTMEM_BUSY_TIMEOUT";
    case kReadOnlyFile: return "AGENTMEM_READONLY_FILE";
    case kCantOpenExists: return "AGENTMEM_CANTOPEN_EXISTS";
    case kMismatchDimension: return "AGENTMEM_MISMATCH_DIMENSION";
    case kMismatchUtf8: return "AGENTMEM_MISMATCH_UTF8";
    case kMismatchJson: return "AGENTMEM_MISMATCH_JSON";
    default: return "AGENTMEM_(unknown)";
  }
}

const char* CodeString(int code) {
  switch (code & 0xff) {
    case kOk: return "not an error";
    case kError: return "error";
    case kInternal: return "internal error (a bug in agentmem)";
    case kNoMem: return "out of memory";
    case kIoErr: return "disk I/O error";
    case kCorrupt: return "database file is malformed";
    case kNotADb: return "file is not an agentmem database";
    case kFormatVersion: return "file format version not supported";
    case kBusy: return "database is locked by another writer";
    case kReadOnly: return "attempt to write a read-only database";
    case kMisuse: return "bad parameter or API misuse";
    case kFull: return "disk is full";
    case kCantOpen: return "unable to open database file";
    case kConstraint: return "constraint failed";
    case kNotFound: return "not found";
    case kMismatch: return "value of the wrong kind";
    case kTooBig: return "value too big";
    case kRange: return "parameter out of range";
    case kAbort: return "callback requested abort";
    case kRow: return "another row available";
    case kDone: return "no more rows available";
    default: return "unknown error";
  }
}

}  // namespace agentmem
