// Vocabulary construction. Performance notes (2-core dev machine, r50k_base): from_ranks
//   probes ~230k candidate splits and keeps 108,299 pairs; the table is sized by the pairs
//   kept (2^18 slots of 16 bytes, 4 MiB, 41% load), not by the candidates (it was 2^20 slots,
//   16 MiB, 10% load). Built in ~25 ms. At 41% load a miss ends within a couple of probes: the
//   merge loop's hot question is usually "does this pair merge?".
#include "vocab.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <unordered_map>

namespace gputok {

// ---------------------------------------------------------------------------
void TokenIndex::build(const std::vector<std::string>& tokens) {
  tokens_ = &tokens;
  size_t n_short = 0;
  for (const std::string& t : tokens) n_short += !t.empty() && t.size() <= 8;
  const size_t n_long = tokens.size() - n_short;
  // Short slots at <= 30% load, long ones at <= 40%: 2 MiB + 1 MiB for r50k, where one
  // table of 32-byte slots was 4 MiB. Warm batch, one thread, CPU time on 20 MB of the bench
  // corpus (2-core dev machine, 2026-11-25, three alternations): 109-114 -> 116-120 MB/s;
  // with the short table at 62.5% load (1 MiB) 107-115; code corpus within noise.
  size_t short_cap = 16, cap = 16;
  while (short_cap * 3 < n_short * 10) short_cap <<= 1;
  while (cap < n_long * 5 / 2) cap <<= 1;
  short_.assign(short_cap, ShortSlot{0, 0, -1});
  slots_.assign(cap, Slot{0, 0, 0, -1, 0});
  short_mask_ = short_cap - 1;
  mask_ = cap - 1;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& t = tokens[id];
    if (t.empty()) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(t.data());
    const int32_t existing = find(t);
    if (existing >= 0)
      throw VocabError("duplicate token bytes for ids " + std::to_string(existing) + " and " +
                       std::to_string(id));
    const PieceKey k = make_key(p, t.size(), t.size());
    const uint64_t h = key_hash(k);
    if (k.len <= 8) {
      uint64_t slot = h & short_mask_;
      while (short_[slot].id >= 0) slot = (slot + 1) & short_mask_;
      short_[slot] = ShortSlot{k.w0, uint32_t(k.len), int32_t(id)};
    } else {
      uint64_t slot = h & mask_;
      while (slots_[slot].id >= 0) slot = (slot + 1) & mask_;
      slots_[slot] = Slot{k.w0, k.w1, k.len, int32_t(id), 0};
    }
  }
}

Vocab& Vocab::operator=(Vocab&& o) noexcept {
  tokens_ = std::move(o.tokens_);
  present_ = std::move(o.present_);
  specials_ = std::move(o.specials_);
  pair_slots_ = std::move(o.pair_slots_);
  byte_token_ = std::move(o.byte_token_);
  byte_pairs_ = std::move(o.byte_pairs_);
  index_ = std::move(o.index_);
  index_.tokens_ = &tokens_;
  n_pairs_ = o.n_pairs_;
  n_vocab_ = o.n_vocab_;
  whole_piece_lookup_ = o.whole_piece_lookup_;
  return *this;
}

// ---------------------------------------------------------------------------
void Vocab::allocate_pairs(size_t expected) {
  size_t cap = 1024;
  while (cap < expected * 2) cap <<= 1;  // load <= 50%
  pair_slots_.assign(2 * cap, 0);
  for (size_t s = 0; s < cap; ++s) pair_slots_[2 * s] = kEmptyKey;
  n_pairs_ = 0;
}

void Vocab::insert_pair(uint32_t left, uint32_t right, uint32_t merged, uint32_t rank) {
  const uint64_t key = pair_key(left, right);
  const uint32_t mask = uint32_t(pair_capacity() - 1);
  uint32_t slot = pair_hash(key) & mask;
  while (pair_slots_[2 * size_t(slot)] != kEmptyKey) {
    if (pair_slots_[2 * size_t(slot)] == key) {
      // Keep the lowest rank: with HF merges a pair listed twice merges at its first line.
      uint64_t& value = pair_slots_[2 * size_t(slot) + 1];
      if (rank < pair_rank(value)) value = (uint64_t(merged) << 32) | rank;
      return;
    }
    slot = (slot + 1) & mask;
  }
  pair_slots_[2 * size_t(slot)] = key;
  pair_slots_[2 * size_t(slot) + 1] = (uint64_t(merged) << 32) | rank;
  ++n_pairs_;
}

void Vocab::finish(std::vector<SpecialToken> specials) {
  present_.assign(tokens_.size(), 0);
  for (size_t id = 0; id < tokens_.size(); ++id) present_[id] = tokens_[id].empty() ? 0 : 1;
  for (int b = 0; b < 256; ++b) {
    byte_token_[b] = -1;
  }
  index_.build(tokens_);
  for (int b = 0; b < 256; ++b) {
    const char c = char(b);
    byte_token_[b] = index_.find(std::string_view(&c, 1));
    if (byte_token_[b] < 0)
      throw VocabError("not a byte-level vocabulary: no token for byte " + std::to_string(b));
  }
  n_vocab_ = tokens_.size();
  for (const auto& s : specials) {
    if (s.id < 0) throw VocabError("special token '" + s.text + "' has a negative id");
    if (s.text.empty()) throw VocabError("empty special token");
    if (size_t(s.id) < tokens_.size() && present_[s.id])
      throw VocabError("special token '" + s.text + "' reuses ordinary id " + std::to_string(s.id));
    n_vocab_ = std::max(n_vocab_, size_t(s.id) + 1);
  }
  specials_ = std::move(specials);
}

void Vocab::build_byte_pairs() {
  byte_pairs_.assign(65536, kEmptyKey);
  for (int a = 0; a < 256; ++a)
    for (int b = 0; b < 256; ++b)
      byte_pairs_[(a << 8) | b] =
          pair_lookup(pair_view(), uint32_t(byte_token_[a]), uint32_t(byte_token_[b]));
}

Vocab Vocab::from_ranks(std::vector<std::string> tokens, std::vector<SpecialToken> specials) {
  Vocab v;
  v.tokens_ = std::move(tokens);
  v.finish(std::move(specials));
  // Every split of every token into two tokens. A part is always a token (parts start as
  // single bytes and only ever become the concatenation of two parts that is a token), so
  // probing (left, right) answers tiktoken's question "is left+right a token, at which rank".
  // The table is sized by the pairs found, not by the candidate splits (3x more for GPT-2).
  std::vector<std::array<uint32_t, 3>> found;
  for (size_t id = 0; id < v.tokens_.size(); ++id) {
    const std::string& t = v.tokens_[id];
    for (size_t k = 1; k < t.size(); ++k) {
      const int32_t l = v.index_.find(std::string_view(t).substr(0, k));
      if (l < 0) continue;
      const int32_t r = v.index_.find(std::string_view(t).substr(k));
      if (r < 0) continue;
      found.push_back({uint32_t(l), uint32_t(r), uint32_t(id)});
    }
  }
  v.allocate_pairs(found.size());
  for (const auto& [l, r, id] : found) v.insert_pair(l, r, id, id);
  v.build_byte_pairs();
  return v;
}

Vocab Vocab::from_merges(std::vector<std::string> tokens,
                         const std::vector<std::pair<std::string, std::string>>& merges,
                         std::vector<SpecialToken> specials) {
  Vocab v;
  v.tokens_ = std::move(tokens);
  v.finish(std::move(specials));
  v.whole_piece_lookup_ = false;
  v.allocate_pairs(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t l = v.index_.find(a);
    const int32_t r = v.index_.find(b);
    const int32_t m = v.index_.find(a + b);
    if (l < 0 || r < 0 || m < 0)
      throw VocabError("merge " + std::to_string(rank + 1) +
                       " names a token missing from the vocabulary");
    v.insert_pair(uint32_t(l), uint32_t(r), uint32_t(m), uint32_t(rank));
  }
  v.build_byte_pairs();
  return v;
}

bool Vocab::has_id(int64_t id) const {
  if (id < 0) return false;
  if (size_t(id) < tokens_.size() && present_[size_t(id)]) return true;
  for (const auto& s : specials_)
    if (s.id == id) return true;
  return false;
}

std::string_view Vocab::token_bytes(int64_t id) const {
  if (id >= 0 && size_t(id) < tokens_.size() && present_[size_t(id)]) return tokens_[size_t(id)];
  for (const auto& s : specials_)
    if (s.id == id) return s.text;
  throw std::out_of_range("token id " + std::to_string(id) + " is not in the vocabulary (n_vocab " +
                          std::to_string(n_vocab_) + ")");
}

}  // namespace gputok
