// Vocabulary: token bytes by id, the byte -> token map, and the pair (merge) table.
//
// Built once per tokenizer. The pair table is the open-addressing map described in
// types.h; the host copy here is what the CPU merge probes, and the GPU encoder copies
// the very same arrays to the device, so both sides probe one table layout.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "huge_pages.h"
#include "types.h"

namespace gputok {

// Raised for any malformed vocabulary; the bindings map it to gputok.VocabError.
class VocabError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A piece's first 16 bytes as two little-endian words (zero-padded) plus its length: the
// key of the token index and of the pretoken cache. Comparing two keys is two word compares,
// with no pointer chase and no memcmp call; pieces over 16 bytes (rare) also compare bytes.
struct PieceKey {
  uint64_t w0, w1;
  uint64_t len;
};

// Masks that keep a key word's first min(len, 8) bytes: kKeyMask[min(len, 8)]. A table read
// instead of a branch on the length: piece lengths are data, and that branch mispredicted on
// about one piece in ten (callgrind's branch simulation, code corpus, 2026-11-27).
struct KeyMasks {
  uint64_t m[9];
  constexpr KeyMasks() : m() {
    for (int i = 0; i < 8; ++i) m[i] = (uint64_t(1) << (8 * i)) - 1;
    m[8] = ~uint64_t(0);
  }
};
inline constexpr KeyMasks kKeyMask{};

// `avail` is how many bytes may be read from p (>= len); with 16 or more, two unaligned
// loads and two masks replace a variable-length copy.
inline PieceKey make_key(const uint8_t* p, size_t len, size_t avail) {
  PieceKey k{0, 0, len};
  if (avail >= 16) {
    std::memcpy(&k.w0, p, 8);
    std::memcpy(&k.w1, p + 8, 8);
    k.w0 &= kKeyMask.m[len < 8 ? len : 8];
    k.w1 &= kKeyMask.m[len < 8 ? 0 : len < 16 ? len - 8 : 8];
  } else {
    const size_t n = len < 16 ? len : 16;
    std::memcpy(&k.w0, p, n < 8 ? n : 8);
    if (n > 8) std::memcpy(&k.w1, p + 8, n - 8);
  }
  return k;
}

inline uint64_t key_hash(const PieceKey& k) {
  uint64_t h = (k.w0 ^ (k.w1 * 0x9E3779B97F4A7C15ULL) ^ (k.len << 56)) * 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 31);
}

// Token bytes -> id, open addressing with the key inline in each slot, in two tables: tokens
// of up to 8 bytes (39,333 of r50k's 50,256) in 16-byte slots, longer ones in 32-byte slots.
// A piece probes the table of its length; one hash (key_hash) serves both.
// Performance notes: the old index (slot -> id -> std::string -> memcmp) cost two dependent
// cache misses per piece; one table of 32-byte slots costs one, into 4 MiB. Split (2 MiB of
// short slots, 1 MiB of long), a warm batch ran 5% faster on the bench corpus (vocab.cpp).
class TokenIndex {
 public:
  void build(const std::vector<std::string>& tokens);
  // Returns the id of the piece p[0, k.len) whose key is k (hash h = key_hash(k)), or -1.
  int32_t find(const PieceKey& k, const uint8_t* p) const { return find(k, p, key_hash(k)); }
  int32_t find(const PieceKey& k, const uint8_t* p, uint64_t h) const {
    if (k.len <= 8) {
      for (uint64_t slot = h & short_mask_;; slot = (slot + 1) & short_mask_) {
        const ShortSlot& s = short_[slot];
        if (s.id < 0) return -1;
        if (s.w0 == k.w0 && s.len == k.len) return s.id;
      }
    }
    for (uint64_t slot = h & mask_;; slot = (slot + 1) & mask_) {
      const Slot& s = slots_[slot];
      if (s.id < 0) return -1;
      if (s.w0 == k.w0 && s.w1 == k.w1 && s.len == k.len &&
          (k.len <= 16 || std::memcmp((*tokens_)[s.id].data() + 16, p + 16, k.len - 16) == 0))
        return s.id;
    }
  }
  // Starts loading the slot a find of a `len`-byte piece with hash h reads first (the batch
  // encoder hides the cache miss behind other pieces' work).
  void prefetch(uint64_t h, size_t len) const {
    __builtin_prefetch(len <= 8 ? static_cast<const void*>(&short_[h & short_mask_])
                                : static_cast<const void*>(&slots_[h & mask_]));
  }
  int32_t find(std::string_view s) const {
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    return find(make_key(p, s.size(), s.size()), p);
  }

 private:
  struct ShortSlot {
    uint64_t w0;
    uint32_t len;
    int32_t id;
  };
  struct Slot {
    uint64_t w0, w1;
    uint64_t len;
    int32_t id;
    int32_t pad;
  };
  std::vector<ShortSlot, HugePageAllocator<ShortSlot>> short_;  // huge_pages.h
  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  // The tokens' vector lives in the move-only Vocab that owns this index; its address is
  // re-pointed by Vocab after every move (see Vocab's move operations).
  const std::vector<std::string>* tokens_ = nullptr;
  uint64_t short_mask_ = 0, mask_ = 0;
  friend class Vocab;
};

// The pair table's slots (4 MiB for r50k): on huge pages, as every merge probes it at random.
using PairSlots = std::vector<uint64_t, HugePageAllocator<uint64_t>>;

struct SpecialToken {
  std::string text;
  int32_t id;
};

class Vocab {
 public:
  Vocab() = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;
  Vocab(Vocab&& o) noexcept { *this = std::move(o); }
  Vocab& operator=(Vocab&& o) noexcept;

  // tiktoken semantics: `tokens[id]` are the token bytes and rank == id. The pair table
  // holds every split of every token into two tokens (see types.h).
  static Vocab from_ranks(std::vector<std::string> tokens, std::vector<SpecialToken> specials);

  // HF semantics: merges in priority order (rank = line index), each `(left, right)` by
  // token bytes; the merged token must exist in `tokens`.
  static Vocab from_merges(std::vector<std::string> tokens,
                           const std::vector<std::pair<std::string, std::string>>& merges,
                           std::vector<SpecialToken> specials);

  VocabView view() const { return VocabView{pair_view(), byte_token_.data(), byte_pairs_.data()}; }
  PairTableView pair_view() const {
    return PairTableView{pair_slots_.data(), uint32_t(pair_capacity() - 1)};
  }

  const std::vector<std::string>& tokens() const { return tokens_; }
  // Interleaved key, value per slot (types.h); pair_capacity() slots.
  const PairSlots& pair_slots() const { return pair_slots_; }
  size_t pair_capacity() const { return pair_slots_.size() / 2; }
  const int32_t* byte_token() const { return byte_token_.data(); }
  const std::vector<SpecialToken>& specials() const { return specials_; }
  size_t n_pairs() const { return n_pairs_; }
  // tiktoken returns a piece's own id when the whole piece is a token, before any merge;
  // HF's BPE always merges. For GPT-2 both give the same ids (tested), but each loader
  // keeps the semantics of its format.
  bool whole_piece_lookup() const { return whole_piece_lookup_; }

  // Number of ids, specials included (50257 for GPT-2).
  size_t n_vocab() const { return n_vocab_; }
  // The id of a whole-piece token, or -1.
  int32_t find_token(const PieceKey& k, const uint8_t* p) const { return index_.find(k, p); }
  int32_t find_token(const PieceKey& k, const uint8_t* p, uint64_t h) const {
    return index_.find(k, p, h);
  }
  void prefetch_token(uint64_t h, size_t len) const { index_.prefetch(h, len); }
  int32_t find_token(std::string_view bytes) const { return index_.find(bytes); }
  // Bytes of any id (ordinary or special); throws std::out_of_range for unknown ids.
  std::string_view token_bytes(int64_t id) const;
  bool has_id(int64_t id) const;

 private:
  void finish(std::vector<SpecialToken> specials);
  void insert_pair(uint32_t left, uint32_t right, uint32_t merged, uint32_t rank);
  void allocate_pairs(size_t expected);
  void build_byte_pairs();

  std::vector<std::string> tokens_;  // by id; ids without a token are empty (gaps)
  std::vector<uint8_t> present_;     // 1 where tokens_[id] is a real token
  std::vector<SpecialToken> specials_;
  PairSlots pair_slots_;
  std::vector<int32_t> byte_token_ = std::vector<int32_t>(256, -1);
  std::vector<uint64_t> byte_pairs_;  // see VocabView::byte_pairs
  TokenIndex index_;
  size_t n_pairs_ = 0;
  size_t n_vocab_ = 0;
  bool whole_piece_lookup_ = true;
};

}  // namespace gputok
