// gputok: the one plain-data header shared by the CPU reference and the CUDA kernels.
//
// Everything here is trivially copyable and free of owning pointers: host objects
// (Vocab on the CPU, the GPU encoder's device tables) own the memory, and pass these
// views by value to CPU loops and CUDA kernels alike. Functions are GPUTOK_HD so the
// very same code classifies characters and probes the merge table on both sides,
// which is what makes "GPU == CPU" a property of one implementation, not two.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define GPUTOK_HD __host__ __device__ __forceinline__
#else
#define GPUTOK_HD inline
#endif

namespace gputok {

using TokenId = int32_t;

constexpr uint32_t kNoRank = 0xFFFFFFFFu;
constexpr uint32_t kNoToken = 0xFFFFFFFFu;

// ---------------------------------------------------------------------------
// Character classes of GPT-2's pattern. Only four matter:
//   kLetter = \p{L}, kNumber = \p{N}, kSpace = \s (Unicode White_Space), kOther = the rest.
// The table is generated (tools/gen_unicode_tables.py) from Unicode 16, the version
// tiktoken 0.14 and tokenizers 0.23 classify with.
enum CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

// Two-stage table: stage1[cp >> kUniShift] names a block, stage2 holds the blocks.
constexpr uint32_t kUniShift = 7;
constexpr uint32_t kUniBlock = 1u << kUniShift;
constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct UnicodeTableView {
  const uint16_t* stage1;  // (kMaxCodepoint >> kUniShift) + 1 entries
  const uint8_t* stage2;   // n_blocks * kUniBlock entries
};

GPUTOK_HD uint8_t char_class(UnicodeTableView t, uint32_t cp) {
  return t.stage2[(uint32_t(t.stage1[cp >> kUniShift]) << kUniShift) | (cp & (kUniBlock - 1))];
}

// ---------------------------------------------------------------------------
// UTF-8. Text reaching the scanners is valid UTF-8 (validated or repaired at the edge),
// so decoding needs no error paths: the lead byte gives the length.
GPUTOK_HD uint32_t utf8_len(uint8_t lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

GPUTOK_HD bool utf8_is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Decodes the code point starting at p (valid UTF-8, at least utf8_len bytes available).
GPUTOK_HD uint32_t utf8_decode(const uint8_t* p, uint32_t len) {
  switch (len) {
    case 1:
      return p[0];
    case 2:
      return (uint32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    case 3:
      return (uint32_t(p[0] & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    default:
      return (uint32_t(p[0] & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) |
             (uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  }
}

// A position where a piece boundary is certain, whatever surrounds it: a space (0x20)
// preceded by a printable ASCII character. No alternative of the pattern matches a
// non-space character followed by a space, and every alternative only looks ahead, so
// scanning [0, i) and [i, n) separately gives exactly the pieces of scanning [0, n).
// Both the CPU batch encoder (to split one long document across threads) and the GPU
// (to cut text into blocks) rely on this; it is what keeps chunking exact.
GPUTOK_HD bool is_safe_split(const uint8_t* text, size_t i) {
  return i > 0 && text[i] == 0x20 && text[i - 1] > 0x20 && text[i - 1] < 0x7F;
}

// ---------------------------------------------------------------------------
// A piece of pretokenized text: a byte span into the text it came from.
struct Piece {
  uint32_t start;
  uint32_t len;
};

// ---------------------------------------------------------------------------
// The merge table: a static open-addressing hash map, linear probing, ~50% load.
//   key   = (left << 32) | right          (token ids of two adjacent parts)
//   value = (merged << 32) | rank          (the token their bytes concatenate to, its rank)
// Key and value of a slot sit side by side (16 bytes), so a hit costs one cache line or one
// 32-byte GPU sector instead of two. For GPT-2: 108,299 pairs in 262,144 slots (41% load),
// 4 MiB (it was 1M slots / 16 MiB in two arrays, sized by the candidate splits instead of the
// pairs found). No measurable change on the H200, where the old table already hit L2 84% of
// the time; it is the ~50% load this header promises, and a quarter of the CPU cache footprint.
// It holds every split of every token into two tokens, not only the 50,000 "merges":
// tiktoken ranks the concatenated bytes of two parts, and with all splits present a
// pair probe answers exactly that question (each part is always a token).
constexpr uint64_t kEmptyKey = ~uint64_t(0);

struct PairTableView {
  const uint64_t* slots;  // 2 * capacity: slot i's key at [2i], its value at [2i + 1]
  uint32_t mask;          // capacity - 1; capacity is a power of two
};

GPUTOK_HD uint64_t pair_key(uint32_t left, uint32_t right) {
  return (uint64_t(left) << 32) | uint64_t(right);
}

// splitmix64 finalizer: cheap, and spreads the dense id space over the table.
GPUTOK_HD uint32_t pair_hash(uint64_t key) {
  key ^= key >> 30;
  key *= 0xbf58476d1ce4e5b9ULL;
  key ^= key >> 27;
  key *= 0x94d049bb133111ebULL;
  key ^= key >> 31;
  return uint32_t(key);
}

// Returns the packed value, or kEmptyKey when the pair does not merge.
GPUTOK_HD uint64_t pair_lookup(PairTableView t, uint32_t left, uint32_t right) {
  const uint64_t key = pair_key(left, right);
  uint32_t slot = pair_hash(key) & t.mask;
  for (;;) {
#ifdef __CUDA_ARCH__
    // Key and value in one 16-byte read-only load: a probe is one round trip to memory,
    // not two (the merge loops' latency is a chain of these).
    const ulonglong2 kv = __ldg(reinterpret_cast<const ulonglong2*>(t.slots) + slot);
    if (kv.x == key) return kv.y;
    if (kv.x == kEmptyKey) return kEmptyKey;
#else
    const uint64_t k = t.slots[2 * size_t(slot)];
    if (k == key) return t.slots[2 * size_t(slot) + 1];
    if (k == kEmptyKey) return kEmptyKey;
#endif
    slot = (slot + 1) & t.mask;
  }
}

GPUTOK_HD uint32_t pair_rank(uint64_t value) { return uint32_t(value); }
GPUTOK_HD uint32_t pair_merged(uint64_t value) { return uint32_t(value >> 32); }

// ---------------------------------------------------------------------------
// Everything a merge loop needs, by value.
struct VocabView {
  PairTableView pairs;
  const int32_t* byte_token;  // 256 entries: the token of each single byte
  // Optional (may be null): 65536 packed pair values indexed by (byte0 << 8) | byte1, the
  // pairs every merge starts from. 512 KB stays in L2, where the hash table (4 MiB for GPT-2:
  // 262,144 slots of 16 bytes) does not, so the first n-1 probes of a piece cost a cache hit
  // instead of a miss each.
  const uint64_t* byte_pairs = nullptr;
};

}  // namespace gputok
