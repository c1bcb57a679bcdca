// The pretoken cache: a piece's bytes -> its ids, shared by every thread and every call of
// one Encoder, so a serving process stays warm. The encoder asks it first for every piece of
// 1..kMaxPiece bytes; on a miss it takes a byte's token or asks the vocabulary's token index,
// then merges, and puts the answer here (bytes and whole tokens too, as one id), so a warm
// piece costs one probe.
//
// Concurrency: lock-free. Readers take no lock and write nothing. A writer claims an empty
// slot with one compare-and-swap, fills it, then publishes it with a release store of its
// tag; a reader trusts a slot only after an acquire load of a published tag, and a slot
// never changes after that. Two threads that miss on one piece both compute it and may both
// insert it (the same ids twice: harmless). A slot being filled reads as a miss.
//
// Memory: fixed at construction (`capacity_bytes`, a hard cap: slots plus an arena for bytes
// past 16 and ids past those a slot holds). Once kMaxLoad of the slots or the arena are used
// it stops inserting (the table freezes with what it has): no eviction, so nothing a reader
// holds is ever freed or rewritten. The slots are on huge pages (huge_pages.h).
//
// Layout: 32-byte slots, two to a cache line. A slot holds a piece's first 16 bytes and, for
// a vocabulary whose ids fit 16 bits (GPT-2's 50,257), up to 5 ids inline; otherwise 2.
// Non-token pieces of the bench corpus (85 MB, 2026-11-27): 51% of occurrences give 2 ids,
// 17% 3, 10% 4; 545K distinct ones, 353K of them seen once. With 64-byte slots and a freeze
// at half load (the first design), the default 64 MiB held 256K entries and a warm pass over
// the whole corpus ran at 71-80 MB/s on one thread, against 150 with 256 MiB; 32-byte slots
// at 70% hold 734K entries in the same 64 MiB.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
  // Arena offsets are 32-bit, and the arena is half the cache: 8 GiB at most (std::invalid_
  // argument above it; a larger one wrapped its offsets and gave wrong ids).
  static constexpr size_t kMaxBytes = size_t(8) << 30;
  // find() may write this many ids past the count it returns: room the caller leaves.
  static constexpr size_t kSlackIds = 4;

  // kMinBytes <= capacity_bytes <= kMaxBytes (smaller requests get kMinBytes). narrow_ids:
  // every id the cache will hold is in [0, 65535].
  PieceCache(size_t capacity_bytes, bool narrow_ids);
  ~PieceCache();
  PieceCache(const PieceCache&) = delete;
  PieceCache& operator=(const PieceCache&) = delete;

  // The cached ids of piece p[0, k.len) (key k, hash h) written to out[]; returns how many
  // (0: not cached). out has room for k.len + kSlackIds ids (a piece never has more ids than
  // bytes).
  size_t find(const PieceKey& k, const uint8_t* p, uint64_t h, int32_t* out) const;
  // Inserts (best effort: a full table, a long piece or too many ids are skipped).
  void insert(const PieceKey& k, const uint8_t* p, uint64_t h, const int32_t* ids, size_t n_ids);
  PieceCacheStats stats() const;
  void prefetch(uint64_t h) const { __builtin_prefetch(&slots_[h & mask_]); }

 private:
  static constexpr size_t kInlineNarrow = 5;  // id0 and ids16[4]
  static constexpr size_t kInlineWide = 2;    // ids32[2]
  static constexpr double kMaxLoad = 0.7;
  struct Slot {
    uint64_t w0, w1;
    std::atomic<uint32_t> tag;  // 0 empty, 1 being filled, else the published hash tag
    uint8_t len, n_ids;
    uint16_t id0;  // narrow: the first id; ids16 follows it, so the five are contiguous
    union {
      uint16_t ids16[4];  // narrow: ids 1..4
      int32_t ids32[2];   // wide
      uint32_t extra;     // spilled: arena offset of bytes [16, len), then every id
    };
  };
  static_assert(sizeof(Slot) == 32, "two slots per cache line");
  static uint32_t tag_of(uint64_t h) { return uint32_t(h >> 32) | 2u; }
  bool spills(size_t len, size_t n_ids) const { return len > 16 || n_ids > inline_ids_; }
  // Arena bytes of a spilled entry: its bytes past 16 (to a multiple of 4), then its ids in
  // whole groups of four.
  static size_t tail_bytes(size_t len) { return ((len > 16 ? len - 16 : 0) + 3) & ~size_t(3); }
  static size_t ids_bytes(size_t n_ids) { return ((n_ids + 3) & ~size_t(3)) * sizeof(int32_t); }
  bool claim_arena(size_t bytes, uint32_t* offset);
  size_t read_ids(const Slot& s, int32_t* out) const;

  Slot* slots_ = nullptr;
  size_t mask_ = 0, max_entries_ = 0, slot_bytes_ = 0;
  size_t inline_ids_ = kInlineWide;
  bool narrow_ = false;
  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::atomic<size_t> entries_{0}, arena_used_{0};
  std::atomic<bool> frozen_{false};
};

// Inline: it runs for every piece.
inline size_t PieceCache::read_ids(const Slot& s, int32_t* out) const {
  const size_t n = s.n_ids;
  if (spills(s.len, n)) {
    // Four ids at a time (the arena keeps whole groups of four, the caller kSlackIds of
    // room): a memcpy call of n * 4 bytes cost a call and a mispredicted length.
    const int32_t* ids = reinterpret_cast<const int32_t*>(arena_ + s.extra + tail_bytes(s.len));
    for (size_t j = 0; j < n; j += 4) std::memcpy(out + j, ids + j, 4 * sizeof(int32_t));
  } else if (narrow_) {
    // All five, whatever n is (the caller leaves kSlackIds of room): a loop of n stores
    // mispredicted its exit on about one piece in ten. With SSE2 they are widened from the
    // slot's last 16 bytes (tag, len, n_ids, id0, ids16; published, so they no longer change)
    // by two unpacks: callgrind, one text of 10 KB of code, 4% fewer instructions a call;
    // 2-core dev VM, 2026-11-27, that text 7% faster, 10 MB of code 307 -> 317 MB/s (encoder
    // alone, warm median of 5 alternated rounds).
#if defined(__SSE2__)
    const __m128i v = _mm_srli_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&s.tag)), 6);
    const __m128i zero = _mm_setzero_si128();
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi16(v, zero));
    out[4] = _mm_cvtsi128_si32(_mm_unpackhi_epi16(v, zero));
#else
    out[0] = s.id0;
    out[1] = s.ids16[0];
    out[2] = s.ids16[1];
    out[3] = s.ids16[2];
    out[4] = s.ids16[3];
#endif
  } else {
    for (size_t j = 0; j < n; ++j) out[j] = s.ids32[j];
  }
  return n;
}

inline size_t PieceCache::find(const PieceKey& k, const uint8_t* p, uint64_t h,
                               int32_t* out) const {
  if (k.len > kMaxPiece) return 0;  // never inserted
  const uint32_t tag = tag_of(h);
  for (size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
    const Slot& s = slots_[slot];
    const uint32_t t = s.tag.load(std::memory_order_acquire);
    if (t == 0) return 0;
    if (t != tag || s.w0 != k.w0 || s.w1 != k.w1 || s.len != k.len) continue;
    if (k.len > 16 && std::memcmp(arena_ + s.extra, p + 16, k.len - 16) != 0) continue;
    return read_ids(s, out);
  }
}

}  // namespace gputok
