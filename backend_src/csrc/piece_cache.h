// The pretoken cache: a piece's bytes -> its ids, shared by every thread and every call of
// one Encoder, so a serving process stays warm. Pieces that are whole tokens never come
// here (the vocabulary's index answers them); this holds what merge_piece computed.
//
// Concurrency: lock-free. Readers take no lock and write nothing. A writer claims an empty
// slot with one compare-and-swap, fills it, then publishes it with a release store of its
// tag; a reader trusts a slot only after an acquire load of a published tag, and a slot
// never changes after that. Two threads that miss on one piece both merge it and may both
// insert it (the same ids twice: harmless). A slot being filled reads as a miss.
//
// Memory: fixed at construction (`capacity_bytes`, a hard cap: slots plus an arena for
// bytes past 16 and ids past kInlineIds). Once half the slots or the arena are used it stops
// inserting (the table freezes with what it has): no eviction, so nothing a reader holds
// is ever freed or rewritten.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "vocab.h"

namespace gputok {

struct PieceCacheStats {
  size_t capacity_bytes = 0;  // what was allocated (<= the cap asked for)
  size_t entries = 0, max_entries = 0;
  size_t arena_used = 0, arena_bytes = 0;
};

class PieceCache {
 public:
  // Pieces longer than this are merged every time: measured on the bench corpus (3,000
  // docs), pieces of <= 128 bytes are 99.996% of the occurrences of pieces that are not
  // tokens; longer ones are nearly all unique.
  static constexpr size_t kMaxPiece = 128;
  static constexpr size_t kMaxIds = 64;
  static constexpr size_t kMinBytes = 64 * 1024;

  // capacity_bytes >= kMinBytes (smaller requests get kMinBytes).
  explicit PieceCache(size_t capacity_bytes);
  ~PieceCache();
  PieceCache(const PieceCache&) = delete;
  PieceCache& operator=(const PieceCache&) = delete;

  // The cached ids of piece p[0, k.len) (key k, hash h), or nullptr; *n_ids gets their count.
  const int32_t* find(const PieceKey& k, const uint8_t* p, uint64_t h, size_t* n_ids) const;
  // Inserts (best effort: a full table, a long piece or too many ids are skipped).
  void insert(const PieceKey& k, const uint8_t* p, uint64_t h, const int32_t* ids, size_t n_ids);
  PieceCacheStats stats() const;
  void prefetch(uint64_t h) const { __builtin_prefetch(&slots_[h & mask_]); }

 private:
  static constexpr size_t kInlineIds = 8;
  struct Slot {
    std::atomic<uint32_t> tag;  // 0 empty, 1 being filled, else the published hash tag
    uint16_t len, n_ids;
    uint32_t extra;  // arena offset: bytes [16, len), then ids past kInlineIds (4-aligned)
    uint32_t pad;
    uint64_t w0, w1;
    int32_t ids[kInlineIds];
  };
  static_assert(sizeof(Slot) == 64, "one cache line per slot");
  static uint32_t tag_of(uint64_t h) { return uint32_t(h >> 32) | 2u; }
  bool claim_arena(size_t bytes, uint32_t* offset);

  Slot* slots_ = nullptr;
  size_t mask_ = 0, max_entries_ = 0;
  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::atomic<size_t> entries_{0}, arena_used_{0};
  std::atomic<bool> frozen_{false};
};

// Inline: it runs for every piece that is not a token.
inline const int32_t* PieceCache::find(const PieceKey& k, const uint8_t* p, uint64_t h,
                                       size_t* n_ids) const {
  const uint32_t tag = tag_of(h);
  for (size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
    const Slot& s = slots_[slot];
    const uint32_t t = s.tag.load(std::memory_order_acquire);
    if (t == 0) return nullptr;
    if (t != tag || s.w0 != k.w0 || s.w1 != k.w1 || s.len != k.len) continue;
    if (k.len > 16 && std::memcmp(arena_ + s.extra, p + 16, k.len - 16) != 0) continue;
    *n_ids = s.n_ids;
    if (s.n_ids <= kInlineIds) return s.ids;
    const size_t ids_at = (s.extra + (k.len > 16 ? k.len - 16 : 0) + 3) & ~size_t(3);
    return reinterpret_cast<const int32_t*>(arena_ + ids_at);
  }
}

}  // namespace gputok
