#include "pack.h"

namespace gputok {

int64_t pack_uint16(const int32_t* ids, const int64_t* offsets, size_t n_docs, int32_t sep,
                    uint16_t* out, int64_t* ends) {
  const int64_t base = n_docs ? offsets[0] : 0;
  int64_t o = 0;
  for (size_t d = 0; d < n_docs; ++d) {
    const int64_t a = offsets[d] - base, b = offsets[d + 1] - base;
    // One unsigned compare catches both ends: a negative int32 is a huge uint32.
    for (int64_t k = a; k < b; ++k) {
      const uint32_t v = uint32_t(ids[k]);
      if (v > 0xFFFFu) return k;
      out[o++] = uint16_t(v);
    }
    if (sep >= 0) out[o++] = uint16_t(sep);
    ends[d] = o;
  }
  return -1;
}

}  // namespace gputok
