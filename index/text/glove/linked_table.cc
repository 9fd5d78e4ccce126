// index/text/glove/linked_table.cc -- the table that glove_table.S includes.
#include "index/text/glove/linked_table.h"

extern "C" const uint8_t agentmem_glove_table[];
extern "C" const uint8_t agentmem_glove_table_end[];

namespace agentmem::index::glove {

std::span<const uint8_t> LinkedTableBytes() {
  return std::span<const uint8_t>(agentmem_glove_table,
                                  static_cast<size_t>(agentmem_glove_table_end - agentmem_glove_table));
}

}  // namespace agentmem::index::glove
