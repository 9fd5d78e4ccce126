// format/crc32c.h -- CRC-32C (Castagnoli), the checksum of every page, header
// and superblock (docs/format.md §2). Uses the SSE4.2 crc32 instruction when the
// CPU has it (checked at run time), a table otherwise; both give the same value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace agentmem::format {

// CRC-32C of data[0,n) continuing from crc (0 to start).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// Stored checksums are masked, as LevelDB does, so that a CRC computed over
// bytes that contain an embedded CRC is not trivially related to it.
constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta; }
inline uint32_t UnmaskCrc(uint32_t masked) {
  uint32_t rot = masked - kCrcMaskDelta;
  return (rot >> 17) | (rot << 15);
}

// Crc32cExtend by table lookups, the path of CPUs without SSE4.2 (for tests
// that check the two paths agree).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);

// True when the hardware path is in use (for diagnostics).
bool Crc32cHardware();

}  // namespace agentmem::format
