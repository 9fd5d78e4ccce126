// index/text/glove/linked_table.h -- the bytes of the GloVe table linked into
// the library (glove_embedder.h describes them). The build compiles one of
// two definitions: linked_table.cc over the symbols of the generated
// glove_table.S (an assembler .incbin of the table), or no_table.cc, which
// returns no bytes (meson option glove_table=none, or no table found).
#pragma once

#include <cstdint>
#include <span>

namespace agentmem::index::glove {

// The table's bytes, 64-byte aligned, or an empty span.
std::span<const uint8_t> LinkedTableBytes();

}  // namespace agentmem::index::glove
