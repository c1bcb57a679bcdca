#include "pack.h"

#include <stdexcept>

namespace gputok {

size_t pack_uint16_size(const int64_t* offsets, size_t n_docs, size_t n_ids, int32_t sep) {
  if (sep > 0xFFFF) throw std::invalid_argument("sep must be below 65536 (or negative: none)");
  for (size_t d = 0; d < n_docs; ++d)
    if (offsets[d + 1] < offsets[d]) throw std::invalid_argument("offsets must be non-decreasing");
  int64_t span;  // offsets[-1] - offsets[0] of e.g. [-2^63, 2^63 - 1] overflows
  if (__builtin_sub_overflow(offsets[n_docs], offsets[0], &span))
    throw std::invalid_argument("offsets span more than int64 holds");
  if (uint64_t(span) > n_ids) throw std::invalid_argument("offsets reach past the end of ids");
  return size_t(span) + (sep >= 0 ? n_docs : 0);
}

}  // namespace gputok
