// Device-side GPT-2 piece boundaries, shared by the multi-kernel path (pretokenize.cu) and
// the fused small-input kernel (small.cu). See pretokenize.cu for why a piece start is a
// local property of the characters around it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "types.h"

namespace gputok {
namespace cuda_detail {

// Class of the character whose lead byte is at p (valid UTF-8).
__device__ __forceinline__ uint8_t class_at(UnicodeTableView uni, const uint8_t* text, uint32_t p) {
  const uint8_t b = text[p];
  if (b < 0x80) return char_class(uni, b);
  const uint32_t len = utf8_len(b);
  return char_class(uni, utf8_decode(text + p, len));
}

// Lead byte of the character that ends just before p (p is not a unit start).
__device__ __forceinline__ uint32_t prev_lead(const uint8_t* text, uint32_t p) {
  uint32_t j = p - 1;
  while (utf8_is_continuation(text[j])) --j;
  return j;
}

// `unit_start` below is anything indexed by byte offset: the chunk's flag array, or a block's
// window of it in shared memory (fused_lean.cu's WindowStarts).

// Length (2 or 3) of the contraction that starts at byte p, or 0. Includes the condition
// that p is a piece start at all (see the header comment).
template <class Starts>
__device__ __forceinline__ int contraction_at(UnicodeTableView uni, const uint8_t* text,
                                              const Starts& unit_start, uint32_t p) {
  if (text[p] != '\'') return 0;
  if (!unit_start[p]) {
    if (text[p - 1] == 0x20) return 0;
    if (class_at(uni, text, prev_lead(text, p)) == kOther) return 0;
  }
  if (unit_start[p + 1]) return 0;
  const uint8_t c = text[p + 1];
  if (c == 's' || c == 'd' || c == 'm' || c == 't') return 2;
  if (unit_start[p + 2]) return 0;
  const uint8_t d = text[p + 2];
  if ((c == 'l' && d == 'l') || (c == 'v' && d == 'e') || (c == 'r' && d == 'e')) return 3;
  return 0;
}

template <class Starts>
__device__ __forceinline__ bool piece_starts_at(UnicodeTableView uni, const uint8_t* text,
                                                const Starts& unit_start, uint32_t i) {
  const uint8_t b = text[i];
  if (utf8_is_continuation(b)) return false;
  if (unit_start[i]) return true;
  // Contractions nearby (all ASCII, so byte steps are character steps).
  if (text[i - 1] == '\'' && contraction_at(uni, text, unit_start, i - 1)) return false;
  if (!unit_start[i - 1]) {
    if (text[i - 2] == '\'') {
      const int len = contraction_at(uni, text, unit_start, i - 2);
      if (len == 3) return false;
      if (len == 2) return true;
    }
    if (!unit_start[i - 2] && text[i - 3] == '\'' &&
        contraction_at(uni, text, unit_start, i - 3) == 3)
      return true;
  }
  const uint32_t len = utf8_len(b);
  const uint8_t cls = b < 0x80 ? char_class(uni, b) : char_class(uni, utf8_decode(text + i, len));
  const uint32_t pj = prev_lead(text, i);
  const uint8_t pcls = class_at(uni, text, pj);
  if (cls == kSpace) {
    if (pcls != kSpace) return true;
    const uint32_t k = i + len;  // the next character, if the unit has one
    if (unit_start[k]) return false;
    return class_at(uni, text, k) != kSpace;
  }
  if (pcls == kSpace) return text[i - 1] != 0x20;
  return pcls != cls;
}

}  // namespace cuda_detail
}  // namespace gputok
