// tests/util/page_bytes.h -- what a byte scan for leftovers of forgotten data
// must look at in a file: its raw bytes and every page payload decompressed.
#pragma once

#include <string>

namespace agentmem::test {

// The file's raw bytes followed by the payload of every page that decodes,
// decompressed (docs/format.md §4). Fails the test case when the file
// header does not decode.
std::string AllPageBytes(const std::string& path);

}  // namespace agentmem::test
