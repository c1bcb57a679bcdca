// Pack: token ids -> the corpus shard format (uint16, a separator after every document).
// The corpus writer's hot loop: in numpy it was a boolean-mask scatter that holds the GIL, so
// the writer threads of a Dask worker running several shards took turns; here it is one pass
// with the GIL released (bindings). The packing itself is the tokenizer's uint16 output
// (narrow.h, pack_uint16); what the corpus adds is the check of offsets it is handed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gputok {

// Checks `offsets` (n_docs + 1 of them) against ids of n_ids entries and returns the size of
// pack_uint16's `out`. Throws std::invalid_argument where offsets decrease, their span
// overflows int64 or reaches past the ids, so that pack_uint16 reads and writes in bounds.
size_t pack_uint16_size(const int64_t* offsets, size_t n_docs, size_t n_ids, int32_t sep);

}  // namespace gputok
