// The shared pretoken cache (piece_cache.h).
#include "piece_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace gputok {

PieceCache::PieceCache(size_t capacity_bytes) {
  if (capacity_bytes < kMinBytes) capacity_bytes = kMinBytes;
  // Three quarters in slots (a power of two), the rest arena: on the bench corpus the
  // bytes past 16 and ids past 8 of the cached pieces were ~1/3 of the slots' bytes.
  size_t slots = 256;
  while (slots * 2 * sizeof(Slot) <= capacity_bytes * 3 / 4) slots *= 2;
  arena_bytes_ = capacity_bytes - slots * sizeof(Slot);
  // calloc: all tags 0 (empty), and the pages are only touched as slots fill.
  slots_ = static_cast<Slot*>(std::calloc(slots, sizeof(Slot)));
  arena_ = static_cast<uint8_t*>(std::malloc(arena_bytes_));
  if (!slots_ || !arena_) {
    std::free(slots_);
    std::free(arena_);
    throw std::bad_alloc();
  }
  mask_ = slots - 1;
  max_entries_ = slots / 2;
}

PieceCache::~PieceCache() {
  std::free(slots_);
  std::free(arena_);
}

bool PieceCache::claim_arena(size_t bytes, uint32_t* offset) {
  size_t at = arena_used_.load(std::memory_order_relaxed);
  do {
    if (at + bytes > arena_bytes_) return false;
  } while (!arena_used_.compare_exchange_weak(at, at + bytes, std::memory_order_relaxed));
  *offset = uint32_t(at);
  return true;
}

void PieceCache::insert(const PieceKey& k, const uint8_t* p, uint64_t h, const int32_t* ids,
                        size_t n_ids) {
  if (n_ids == 0 || n_ids > kMaxIds || k.len > kMaxPiece) return;
  if (frozen_.load(std::memory_order_relaxed)) return;
  const size_t tail = k.len > 16 ? k.len - 16 : 0;
  const size_t spill = n_ids > kInlineIds ? n_ids : 0;
  uint32_t extra = 0;  // claims are multiples of 4, so arena offsets stay 4-aligned
  // A full arena only stops pieces that need it; short ones still fit in slots.
  const size_t bytes = ((tail + 3) & ~size_t(3)) + spill * sizeof(int32_t);
  if (bytes > 0 && !claim_arena(bytes, &extra)) return;
  if (entries_.fetch_add(1, std::memory_order_relaxed) >= max_entries_) {
    frozen_.store(true, std::memory_order_relaxed);
    return;
  }
  if (tail) std::memcpy(arena_ + extra, p + 16, tail);
  if (spill) std::memcpy(arena_ + ((extra + tail + 3) & ~size_t(3)), ids, n_ids * sizeof(int32_t));
  for (size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
    Slot& s = slots_[slot];
    uint32_t expected = 0;
    if (s.tag.load(std::memory_order_relaxed) != 0 ||
        !s.tag.compare_exchange_strong(expected, 1, std::memory_order_acquire))
      continue;  // taken (or just claimed by another writer): probe on
    s.len = uint16_t(k.len);
    s.n_ids = uint16_t(n_ids);
    s.extra = extra;
    s.w0 = k.w0;
    s.w1 = k.w1;
    if (!spill) std::memcpy(s.ids, ids, n_ids * sizeof(int32_t));
    s.tag.store(tag_of(h), std::memory_order_release);
    return;
  }
}

PieceCacheStats PieceCache::stats() const {
  PieceCacheStats st;
  st.capacity_bytes = (mask_ + 1) * sizeof(Slot) + arena_bytes_;
  st.entries = std::min(entries_.load(), max_entries_);
  st.max_entries = max_entries_;
  st.arena_used = std::min(arena_used_.load(), arena_bytes_);
  st.arena_bytes = arena_bytes_;
  return st;
}

}  // namespace gputok
