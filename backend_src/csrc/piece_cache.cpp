// The shared pretoken cache (piece_cache.h).
#include "piece_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "huge_pages.h"

namespace gputok {

PieceCache::PieceCache(size_t capacity_bytes, bool narrow_ids)
    : inline_ids_(narrow_ids ? kInlineNarrow : kInlineWide), narrow_(narrow_ids) {
  if (capacity_bytes > kMaxBytes)
    throw std::invalid_argument("piece_cache_bytes must be <= " + std::to_string(kMaxBytes) +
                                " (8 GiB), got " + std::to_string(capacity_bytes));
  if (capacity_bytes < kMinBytes) capacity_bytes = kMinBytes;
  // Half in slots (a power of two), the rest arena: on the bench corpus (85 MB) the arena
  // (bytes past 16 and spilled ids, 4-aligned) took about as much as the slots in use.
  size_t slots = 256;
  while (slots * 2 * sizeof(Slot) <= capacity_bytes / 2) slots *= 2;
  slot_bytes_ = slots * sizeof(Slot);
  arena_bytes_ = capacity_bytes - slot_bytes_;
  slots_ = static_cast<Slot*>(huge_alloc(slot_bytes_));  // zeroed: every tag 0 (empty)
  arena_ = static_cast<uint8_t*>(std::malloc(arena_bytes_));
  if (!arena_) {
    huge_free(slots_, slot_bytes_);
    throw std::bad_alloc();
  }
  mask_ = slots - 1;
  max_entries_ = size_t(double(slots) * kMaxLoad);
}

PieceCache::~PieceCache() {
  huge_free(slots_, slot_bytes_);
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
  if (narrow_)
    for (size_t j = 0; j < n_ids; ++j)
      if (ids[j] < 0 || ids[j] > 0xFFFF) return;  // not what narrow_ids promised: skip it
  if (frozen_.load(std::memory_order_relaxed)) return;
  const bool spill = spills(k.len, n_ids);
  const size_t tail = k.len > 16 ? k.len - 16 : 0;
  uint32_t extra = 0;  // claims are multiples of 4, so arena offsets stay 4-aligned
  // A full arena only stops pieces that need it; short ones still fit in slots.
  const size_t bytes = spill ? tail_bytes(k.len) + ids_bytes(n_ids) : 0;
  if (bytes > 0 && !claim_arena(bytes, &extra)) return;
  if (entries_.fetch_add(1, std::memory_order_relaxed) >= max_entries_) {
    frozen_.store(true, std::memory_order_relaxed);
    return;
  }
  if (tail) std::memcpy(arena_ + extra, p + 16, tail);
  if (spill) {
    uint8_t* at = arena_ + extra + tail_bytes(k.len);
    std::memcpy(at, ids, n_ids * sizeof(int32_t));
    std::memset(at + n_ids * sizeof(int32_t), 0, ids_bytes(n_ids) - n_ids * sizeof(int32_t));
  }
  for (size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
    Slot& s = slots_[slot];
    uint32_t expected = 0;
    if (s.tag.load(std::memory_order_relaxed) != 0 ||
        !s.tag.compare_exchange_strong(expected, 1, std::memory_order_acquire))
      continue;  // taken (or just claimed by another writer): probe on
    s.len = uint8_t(k.len);
    s.n_ids = uint8_t(n_ids);
    s.w0 = k.w0;
    s.w1 = k.w1;
    if (spill) {
      s.extra = extra;
    } else if (narrow_) {
      s.id0 = uint16_t(ids[0]);
      for (size_t j = 1; j < n_ids; ++j) s.ids16[j - 1] = uint16_t(ids[j]);
    } else {
      for (size_t j = 0; j < n_ids; ++j) s.ids32[j] = ids[j];
    }
    s.tag.store(tag_of(h), std::memory_order_release);
    return;
  }
}

PieceCacheStats PieceCache::stats() const {
  PieceCacheStats st;
  st.capacity_bytes = slot_bytes_ + arena_bytes_;
  st.entries = std::min(entries_.load(), max_entries_);
  st.max_entries = max_entries_;
  st.arena_used = std::min(arena_used_.load(), arena_bytes_);
  st.arena_bytes = arena_bytes_;
  return st;
}

}  // namespace gputok
