// tests/util/page_bytes.cc -- AllPageBytes (page_bytes.h).
#include "tests/util/page_bytes.h"

#include <doctest/doctest.h>

#include <string_view>

#include "format/file_header.h"
#include "format/page.h"
#include "tests/util/temp_dir.h"

namespace agentmem::test {

std::string AllPageBytes(const std::string& path) {
  namespace fmt = agentmem::format;
  std::string raw = ReadFileBytes(path);
  fmt::FileHeader h;
  REQUIRE(fmt::DecodeFileHeader(std::string_view(raw).substr(0, fmt::kFirstPageOffset), &h).ok());
  std::string out = raw;
  for (uint64_t pos = fmt::kFirstPageOffset; pos + fmt::kPageHeaderSize <= raw.size();) {
    fmt::PageHeader ph;
    std::string_view at = std::string_view(raw).substr(pos);
    if (!fmt::PeekPageHeader(at.substr(0, fmt::kPageHeaderSize), pos, h.salt, &ph).ok()) break;
    uint64_t padded = fmt::PaddedPageSize(ph.length);
    std::string payload;
    if (fmt::DecodePage(at.substr(0, padded), pos, h.salt, &ph, &payload).ok()) out += payload;
    pos += padded;
  }
  return out;
}

}  // namespace agentmem::test
