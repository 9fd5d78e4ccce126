// format/compress.h -- the zstd frame wrapper for page payloads (docs/format.md §4).
#pragma once

#include <string>
#include <string_view>

#include "format/status.h"

namespace agentmem::format {

// Compresses src with zstd at a fast level. Returns false (and leaves *dst
// unspecified) when compression does not save at least 1/8 of the bytes, or
// shrinks them more than kMaxCompressionRatio (format/page.h) times, or zstd
// has no memory, in which case the caller stores src uncompressed.
bool CompressIfItPays(std::string_view src, std::string* dst);

// Decompresses a zstd frame whose decompressed size must be exactly
// expected_size (recorded beside it in the page). Any mismatch or zstd error is
// reported as corruption of page_no.
// Errors: kCorruptPage naming page_no; kNoMem when there is no memory for
// this thread's zstd context (the next call tries again).
Status Decompress(std::string_view src, size_t expected_size, int64_t page_no, std::string* dst);

#ifdef AGENTMEM_TEST_HOOKS
// Tests (builds with -Dtest_hooks=true): on the calling thread, the
// allocation zstd makes after `after` more succeed fails, once; -1 disarms.
// ZstdAllocationsFailedForTest() says whether it has happened since.
void FailZstdAllocationForTest(int after);
int ZstdAllocationsFailedForTest();
#endif

}  // namespace agentmem::format
