// index/text/glove/no_table.cc -- a build without the GloVe table.
#include "index/text/glove/linked_table.h"

namespace agentmem::index::glove {

std::span<const uint8_t> LinkedTableBytes() { return {}; }

}  // namespace agentmem::index::glove
