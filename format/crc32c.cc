// format/crc32c.cc -- CRC-32C, reflected polynomial 0x82F63B78.
#include "format/crc32c.h"

#include <array>
#include <cstring>

namespace agentmem::format {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;

struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
      for (int s = 1; s < 8; s++) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};
constexpr Tables kTables;

uint32_t Software(uint32_t crc, const unsigned char* p, size_t n) {
  const auto& t = kTables.t;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= crc;
    crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^
          t[4][(w >> 24) & 0xff] ^ t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^
          t[1][(w >> 48) & 0xff] ^ t[0][(w >> 56) & 0xff];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return crc;
}

// Skipping ahead: the CRC register is linear over GF(2), so the register after
// a run of L bytes started from r is Shift_L(r) XOR (the register after the same
// bytes started from 0). Shift_L is a 32x32 bit matrix, applied here through
// four byte tables. It lets three runs be checksummed at once and joined.
constexpr size_t kStripe = 4096;       // bytes per run; a power of two
constexpr size_t kShortStripe = 256;   // the same for inputs of 768 bytes to 12 KiB (pages)

using Matrix = std::array<uint32_t, 32>;  // column i: the image of bit i

uint32_t Apply(const Matrix& m, uint32_t v) {
  uint32_t r = 0;
  for (int i = 0; v != 0; i++, v >>= 1) {
    if (v & 1) r ^= m[i];
  }
  return r;
}

struct ShiftTables {
  std::array<std::array<uint32_t, 256>, 4> t{};
  explicit ShiftTables(size_t stripe) {
    Matrix m;  // one zero byte
    for (int i = 0; i < 32; i++) {
      uint32_t c = uint32_t{1} << i;
      m[i] = (c >> 8) ^ kTables.t[0][c & 0xff];
    }
    for (size_t len = 1; len < stripe; len *= 2) {  // square: twice as many bytes
      Matrix sq;
      for (int i = 0; i < 32; i++) sq[i] = Apply(m, m[i]);
      m = sq;
    }
    for (int k = 0; k < 4; k++)
      for (uint32_t b = 0; b < 256; b++) t[k][b] = Apply(m, b << (8 * k));
  }
  uint32_t Shift(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

#if defined(__x86_64__)
// Three independent runs of `stripe` bytes keep the crc32 unit busy (its
// latency is three times its issue rate), then are joined.
template <size_t stripe>
__attribute__((target("sse4.2"))) uint64_t HardwareStripes(uint64_t c, const unsigned char** pp,
                                                           size_t* pn, const ShiftTables& shift) {
  const unsigned char* p = *pp;
  size_t n = *pn;
  while (n >= 3 * stripe) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < stripe; i += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p + stripe + i, 8);
      std::memcpy(&w2, p + 2 * stripe + i, 8);
      c = __builtin_ia32_crc32di(c, w0);
      c1 = __builtin_ia32_crc32di(c1, w1);
      c2 = __builtin_ia32_crc32di(c2, w2);
    }
    c = shift.Shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1);
    c = shift.Shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c2);
    p += 3 * stripe;
    n -= 3 * stripe;
  }
  *pp = p;
  *pn = n;
  return c;
}

__attribute__((target("sse4.2"))) uint32_t Hardware(uint32_t crc, const unsigned char* p,
                                                    size_t n) {
  static const ShiftTables kShift(kStripe), kShortShift(kShortStripe);
  uint64_t c = HardwareStripes<kStripe>(crc, &p, &n, kShift);
  c = HardwareStripes<kShortStripe>(c, &p, &n, kShortShift);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
bool DetectHardware() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#else
uint32_t Hardware(uint32_t crc, const unsigned char* p, size_t n) { return Software(crc, p, n); }
bool DetectHardware() { return false; }
#endif

const bool kHardware = DetectHardware();

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  crc = kHardware ? Hardware(crc, p, n) : Software(crc, p, n);
  return ~crc;
}

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n) {
  return ~Software(~crc, static_cast<const unsigned char*>(data), n);
}

bool Crc32cHardware() { return kHardware; }

}  // namespace agentmem::format
