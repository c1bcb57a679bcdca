// The tokenizer's uint16 output (Tokenizer.encode_*_uint16, and the GPU's uint16 copy-out):
// ids narrowed to uint16, optionally with a separator after every text. Offsets here come from
// the encoder itself; the corpus tool's packer checks caller-given ones (corpus/pack.h) before
// calling pack_uint16.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gputok {

// out[k] = ids[k] as uint16 for k < n. Returns -1, or the index of the first id outside
// [0, 65535] (out is then fully written, that id wrapped).
int64_t narrow_uint16(const int32_t* ids, size_t n, uint16_t* out);

// Documents are ids[offsets[d] - offsets[0], offsets[d + 1] - offsets[0]) for d < n_docs
// (offsets non-decreasing). Writes each document's ids as uint16 to `out`, followed by `sep`
// when sep >= 0, and the end of document d in `out` to ends[d]. `out` holds
// (offsets[n_docs] - offsets[0]) + (sep >= 0 ? n_docs : 0) entries. Returns -1, or the index
// in `ids` of the first id outside [0, 65535] (then `out` and `ends` are partly written).
int64_t pack_uint16(const int32_t* ids, const int64_t* offsets, size_t n_docs, int32_t sep,
                    uint16_t* out, int64_t* ends);

}  // namespace gputok
