// bench/anchors.cc -- fdatasync and page-fault costs of this machine.
#include "anchors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace bench {

namespace {

double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

constexpr size_t kPage = 4096;

// Appends 4 KiB and syncs it, `n` times; the sorted latencies in ms.
std::vector<double> SyncLatencies(const std::string& path, int n) {
  std::vector<double> ms;
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return ms;
  std::string block(kPage, 'a');
  for (int i = 0; i < n; i++) {
    double t = Now();
    if (::pwrite(fd, block.data(), kPage, static_cast<off_t>(i) * kPage) != static_cast<ssize_t>(kPage) ||
        ::fdatasync(fd) != 0) {
      break;
    }
    ms.push_back((Now() - t) * 1e3);
  }
  ::close(fd);
  std::sort(ms.begin(), ms.end());
  return ms;
}

// Touches one byte of each 4 KiB of `bytes` mapped by `map` (writes it when
// `write`, else reads it), in pages of the size `advice` asks for; µs per
// 4 KiB. Reading new anonymous memory maps the shared zero page: only a
// write costs what allocating memory costs.
template <typename Map>
double FaultCost(size_t bytes, bool write, int advice, Map map) {
  void* p = map(bytes);
  if (p == MAP_FAILED) return 0;
  ::madvise(p, bytes, advice);
  volatile char* c = static_cast<char*>(p);
  double t = Now();
  for (size_t off = 0; off < bytes; off += kPage) {
    if (write) {
      c[off] = 1;
    } else {
      (void)c[off];
    }
  }
  double us = (Now() - t) * 1e6 / static_cast<double>(bytes / kPage);
  ::munmap(p, bytes);
  return us;
}

}  // namespace

Anchors MeasureAnchors(const std::string& dir) {
  Anchors a;
  const std::string path = dir + "/anchors.tmp";
  std::vector<double> ms = SyncLatencies(path, 200);
  if (!ms.empty()) {
    a.syncs = static_cast<int>(ms.size());
    a.fdatasync_p50_ms = ms[ms.size() / 2];
    a.fdatasync_p90_ms = ms[ms.size() * 9 / 10];
  }
  const size_t bytes = size_t{64} << 20;
  auto anonymous = [](size_t n) {
    return ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  };
  a.anon_fault_us = FaultCost(bytes, true, MADV_NOHUGEPAGE, anonymous);
  a.huge_fault_us = FaultCost(bytes, true, MADV_HUGEPAGE, anonymous);
  // A file of the same size, written and read once so that it is cached.
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) {
    std::string chunk(size_t{1} << 20, 'b');
    bool ok = true;
    for (size_t off = 0; ok && off < bytes; off += chunk.size()) {
      ok = ::pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(off)) ==
           static_cast<ssize_t>(chunk.size());
    }
    for (size_t off = 0; ok && off < bytes; off += chunk.size()) {
      ok = ::pread(fd, chunk.data(), chunk.size(), static_cast<off_t>(off)) ==
           static_cast<ssize_t>(chunk.size());
    }
    if (ok) {
      a.file_fault_us = FaultCost(bytes, false, MADV_NOHUGEPAGE, [fd](size_t n) {
        return ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
      });
    }
    ::close(fd);
  }
  ::unlink(path.c_str());
  return a;
}

std::string AnchorsLine(const Anchors& a) {
  char buf[600];
  std::snprintf(buf, sizeof buf,
                "Machine anchors: 4 KiB append + fdatasync p50 %.2f ms, p90 %.2f ms (%d "
                "samples); new anonymous memory written first: %.2f µs per 4 KiB page, %.2f µs per "
                "4 KiB in 2 MiB pages; a cached file read through a private map: %.2f µs per 4 KiB "
                "page (the kernel maps several per fault). A ratio between systems that sync or map "
                "differently moves with these from one machine to the next.",
                a.fdatasync_p50_ms, a.fdatasync_p90_ms, a.syncs, a.anon_fault_us, a.huge_fault_us,
                a.file_fault_us);
  return buf;
}

}  // namespace bench
