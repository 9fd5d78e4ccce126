// bench/anchors.h -- the machine's own costs that the bench's ratios rest on:
// a durable 4 KiB write (write + fdatasync) and a page fault (new anonymous
// memory written, in 4 KiB and in 2 MiB pages, and a file already in the page
// cache read). A ratio between systems that sync or map differently moves
// with these from one machine to the next, so the report prints them beside
// the ratios.
#pragma once

#include <string>

namespace bench {

struct Anchors {
  double fdatasync_p50_ms = 0, fdatasync_p90_ms = 0;  // 4 KiB append + fdatasync
  double anon_fault_us = 0;  // per 4 KiB of new anonymous memory written, 4 KiB pages
  double huge_fault_us = 0;  // the same in 2 MiB pages (MADV_HUGEPAGE), per 4 KiB
  double file_fault_us = 0;  // per 4 KiB page of a cached file read through MAP_PRIVATE
  int syncs = 0;             // samples behind the fdatasync figures
};

// Measures in `dir` (a scratch file is created and removed there). About a
// second on a disk with 2 ms syncs.
Anchors MeasureAnchors(const std::string& dir);

// One line for the report.
std::string AnchorsLine(const Anchors& a);

}  // namespace bench
