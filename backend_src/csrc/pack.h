// Pack: token ids -> the corpus shard format (uint16, a separator after every document).
// The corpus writer's hot loop: in numpy it was a boolean-mask scatter that holds the GIL, so
// the writer threads of a Dask worker running several shards took turns; here it is one pass
// with the GIL released (bindings).
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
// Checks `offsets` (n_docs + 1 of them) against ids of n_ids entries and returns the size of
// pack_uint16's `out`. Throws std::invalid_argument where offsets decrease, their span
// overflows int64 or reaches past the ids, so that pack_uint16 reads and writes in bounds.
size_t pack_uint16_size(const int64_t* offsets, size_t n_docs, size_t n_ids, int32_t sep);

int64_t pack_uint16(const int32_t* ids, const int64_t* offsets, size_t n_docs, int32_t sep,
                    uint16_t* out, int64_t* ends);

}  // namespace gputok
