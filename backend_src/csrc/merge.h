// BPE merge of one piece with tiktoken's semantics: repeatedly merge the adjacent pair of
// parts with the lowest rank, leftmost first, until no pair merges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "types.h"

namespace gputok {

struct MergeScratch {
  std::vector<int32_t> ids;
  std::vector<uint64_t> vals;
  std::vector<int32_t> next, prev;
  std::vector<uint64_t> heap;
  std::vector<int32_t> out;  // one piece's ids (the encoder merges into it, then copies)
};

// Appends the tokens of piece[0, n) (n >= 1) to `out`. Short pieces use tiktoken's
// O(n^2) scan; long ones a heap, so 1 MB of one character stays O(n log n).
void merge_piece(VocabView v, const uint8_t* piece, size_t n, std::vector<int32_t>& out,
                 MergeScratch& scratch);

// The simplest statement of the semantics, O(n^2): the reference the fast paths and the
// GPU kernels are tested against.
void merge_piece_reference(VocabView v, const uint8_t* piece, size_t n, std::vector<int32_t>& out);

}  // namespace gputok
