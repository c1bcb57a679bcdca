#include "narrow.h"

namespace gputok {

int64_t narrow_uint16(const int32_t* ids, size_t n, uint16_t* out) {
  // No early exit inside the copy, so the compiler vectorizes it: the high halves are OR-ed
  // together (a negative int32 has them set too) and checked once; only a range that has a
  // bad id is scanned again for the first one.
  uint32_t high = 0;
  for (size_t k = 0; k < n; ++k) {
    const uint32_t v = uint32_t(ids[k]);
    high |= v >> 16;
    out[k] = uint16_t(v);
  }
  if (high)
    for (size_t k = 0; k < n; ++k)
      if (uint32_t(ids[k]) > 0xFFFFu) return int64_t(k);
  return -1;
}

int64_t pack_uint16(const int32_t* ids, const int64_t* offsets, size_t n_docs, int32_t sep,
                    uint16_t* out, int64_t* ends) {
  const int64_t base = n_docs ? offsets[0] : 0;
  int64_t o = 0;
  for (size_t d = 0; d < n_docs; ++d) {
    const int64_t a = offsets[d] - base, b = offsets[d + 1] - base;
    const int64_t bad = narrow_uint16(ids + a, size_t(b - a), out + o);
    if (bad >= 0) return a + bad;
    o += b - a;
    if (sep >= 0) out[o++] = uint16_t(sep);
    ends[d] = o;
  }
  return -1;
}

}  // namespace gputok
