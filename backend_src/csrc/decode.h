// Decode: token ids -> bytes. Text decoding (errors= like bytes.decode) stays in Python,
// where bytes.decode is exact by definition.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "vocab.h"

namespace gputok {

// Appends the bytes of ids[0, n) to `out`. Throws std::out_of_range naming the first id
// that is not in the vocabulary (negative, a gap, or >= n_vocab), before writing anything.
void decode_bytes(const Vocab& vocab, const int64_t* ids, size_t n, std::string& out);

}  // namespace gputok
