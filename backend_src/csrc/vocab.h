// Vocabulary: token bytes by id, the byte -> token map, and the pair (merge) table.
//
// Built once per tokenizer. The pair table is the open-addressing map described in
// types.h; the host copy here is what the CPU merge probes, and the GPU encoder copies
// the very same arrays to the device, so both sides probe one table layout.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "types.h"

namespace gputok {

// Raised for any malformed vocabulary; the bindings map it to gputok.VocabError.
class VocabError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A flat hash map from byte strings to ids (open addressing, linear probing). Used for
// whole-token lookups (tiktoken returns a piece's own rank when the piece is a token).
class BytesIndex {
 public:
  void build(const std::vector<std::string>& keys);
  // Returns the id of `s`, or -1. `hash` is hash_bytes(s), when the caller has it already.
  int32_t find(std::string_view s, uint64_t hash) const;
  int32_t find(std::string_view s) const;

 private:
  std::vector<int32_t> slots_;  // id or -1
  // The keys' heap buffer, which a move of the owning vector keeps in place (the Vocab is
  // move-only, and its tokens never change after build).
  const std::string* keys_ = nullptr;
  uint64_t mask_ = 0;
};

uint64_t hash_bytes(const void* data, size_t len);

struct SpecialToken {
  std::string text;
  int32_t id;
};

class Vocab {
 public:
  Vocab() = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;
  Vocab(Vocab&&) = default;
  Vocab& operator=(Vocab&&) = default;

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
    return PairTableView{pair_keys_.data(), pair_values_.data(), uint32_t(pair_keys_.size() - 1)};
  }

  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<uint64_t>& pair_keys() const { return pair_keys_; }
  const std::vector<uint64_t>& pair_values() const { return pair_values_; }
  const int32_t* byte_token() const { return byte_token_.data(); }
  const std::vector<SpecialToken>& specials() const { return specials_; }
  size_t n_pairs() const { return n_pairs_; }
  // tiktoken returns a piece's own id when the whole piece is a token, before any merge;
  // HF's BPE always merges. For GPT-2 both give the same ids (tested), but each loader
  // keeps the semantics of its format.
  bool whole_piece_lookup() const { return whole_piece_lookup_; }

  // Number of ids, specials included (50257 for GPT-2).
  size_t n_vocab() const { return n_vocab_; }
  // The id of a whole-piece token, or -1. `hash` is hash_bytes(bytes).
  int32_t find_token(std::string_view bytes, uint64_t hash) const { return index_.find(bytes, hash); }
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
  std::vector<uint64_t> pair_keys_;
  std::vector<uint64_t> pair_values_;
  std::vector<int32_t> byte_token_ = std::vector<int32_t>(256, -1);
  std::vector<uint64_t> byte_pairs_;  // see VocabView::byte_pairs
  BytesIndex index_;
  size_t n_pairs_ = 0;
  size_t n_vocab_ = 0;
  bool whole_piece_lookup_ = true;
};

}  // namespace gputok
