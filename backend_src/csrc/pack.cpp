#include "pack.h"

namespace gputok {

int64_t pack_uint16(const int32_t* ids, const int64_t* offsets, size_t n_docs, int32_t sep,
                    uint16_t* out, int64_t* ends) {
  const int64_t base = n_docs ? offsets[0] : 0;
  int64_t o = 0;
  for (size_t d = 0; d < n_docs; ++d) {
    const int64_t a = offsets[d] - base, b = offsets[d + 1] - base;
    // No early exit inside the copy, so the compiler vectorizes it: the high halves are
    // OR-ed together (a negative int32 has them set too) and checked once per document;
    // only a document that has a bad id is scanned again for the first one.
    uint32_t high = 0;
    uint16_t* dst = out + o;
    for (int64_t k = a; k < b; ++k) {
      const uint32_t v = uint32_t(ids[k]);
      high |= v >> 16;
      dst[k - a] = uint16_t(v);
    }
    if (high)
      for (int64_t k = a; k < b; ++k)
        if (uint32_t(ids[k]) > 0xFFFFu) return k;
    o += b - a;
    if (sep >= 0) out[o++] = uint16_t(sep);
    ends[d] = o;
  }
  return -1;
}

}  // namespace gputok
