// format/codes.h -- result codes, shared by every layer. include/agentmem.h
// repeats these values as AGENTMEM_* macros for C callers; engine/capi/capi.cc has a
// static_assert per code that keeps the two lists identical.
//
// Shape follows SQLite: a primary code in the low 8 bits, extended codes are
// primary | (n << 8).
#pragma once

namespace agentmem {

enum : int {
  kOk = 0,
  kError = 1,          // generic error; see the message
  kInternal = 2,       // a bug in agentmem
  kNoMem = 3,          // allocation failed
  kIoErr = 4,          // an I/O call failed
  kCorrupt = 5,        // the file is damaged
  kNotADb = 6,         // the file is not an agentmem file
  kFormatVersion = 7,  // the file needs a newer agentmem
  kBusy = 8,           // another writer holds the write lock
  kReadOnly = 9,       // write on a read-only handle (or after a sticky I/O error)
  kMisuse = 10,        // API used incorrectly (NULL or closed handle, bad state)
  kFull = 11,          // disk full
  kCantOpen = 12,      // the file cannot be opened
  kConstraint = 13,    // a constraint failed (block limit, empty key, …)
  kNotFound = 14,      // no such record
  kMismatch = 15,      // value of the wrong kind: vector dimension/space, invalid UTF-8, bad JSON
  kTooBig = 16,        // a value is larger than the limits allow
  kRange = 17,         // a parameter is out of range
  kAbort = 18,         // an agentmem_exec() callback asked to stop
  kRow = 100,          // a cursor has a row ready
  kDone = 101,         // a cursor is finished

  kIoErrRead = kIoErr | (1 << 8),
  kIoErrWrite = kIoErr | (2 << 8),
  kIoErrFsync = kIoErr | (3 << 8),
  kIoErrShortRead = kIoErr | (4 << 8),
  kIoErrTruncate = kIoErr | (5 << 8),
  kIoErrLock = kIoErr | (6 << 8),
  kIoErrSticky = kIoErr | (7 << 8),  // an earlier write or sync failed; reopen

  kCorruptChecksum = kCorrupt | (1 << 8),
  kCorruptPage = kCorrupt | (2 << 8),
  kCorruptIndex = kCorrupt | (3 << 8),
  kCorruptSuperblock = kCorrupt | (4 << 8),
  kCorruptHeader = kCorrupt | (5 << 8),

  // The change feed position asked for is not in the file (another log, or
  // past its last commit): read the file's log from 0 again.
  kNotFoundChanges = kNotFound | (1 << 8),

  kBusyTimeout = kBusy | (1 << 8),
  kReadOnlyFile = kReadOnly | (1 << 8),  // handle opened read-only
  kCantOpenExists = kCantOpen | (1 << 8),
  kMismatchDimension = kMismatch | (1 << 8),
  kMismatchUtf8 = kMismatch | (2 << 8),
  kMismatchJson = kMismatch | (3 << 8),
};

// The name of a code, e.g. "AGENTMEM_CORRUPT_CHECKSUM".
const char* CodeName(int code);
// A short English description of a code, e.g. "database disk image is malformed".
const char* CodeString(int code);

}  // namespace agentmem
