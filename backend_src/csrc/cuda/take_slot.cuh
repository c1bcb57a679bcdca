// Taking one of a GPU object's slots (each a stream and buffers held by one call at a time, under
// its mutex `mu`): the encoder's encode slots (encode_slot.cuh) and the Parquet page decoder's
// decode slots (corpus/cuda/gpu_page_decoder.cu).
#pragma once

#include <cstddef>
#include <mutex>
#include <utility>

namespace gputok {

// A slot of slots[0, n), locked: the first free one from `first` on; when all are busy, waits
// for slots[wait_on % n].
template <typename Slot>
Slot& take_slot(Slot* slots, size_t n, size_t first, size_t wait_on,
                std::unique_lock<std::mutex>& lock) {
  for (size_t k = 0; k < n; ++k) {
    Slot& s = slots[(first + k) % n];
    std::unique_lock<std::mutex> l(s.mu, std::try_to_lock);
    if (l.owns_lock()) {
      lock = std::move(l);
      return s;
    }
  }
  Slot& s = slots[wait_on % n];
  lock = std::unique_lock<std::mutex>(s.mu);
  return s;
}

}  // namespace gputok
