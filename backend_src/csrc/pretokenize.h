// Pretokenization: GPT-2's pattern, as tiktoken's regex engine runs it,
//   '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
// by a hand-written scanner (no regex library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "types.h"
#include "utf8.h"  // validation and repair at the edge, before any scanner

namespace gputok {

// The host copy of the generated Unicode table (unicode_tables.h).
UnicodeTableView unicode_table();
size_t unicode_stage1_size();
size_t unicode_stage2_size();

// Length in bytes of the piece that starts at `pos` (pos < n). `text` is valid UTF-8.
size_t next_piece(UnicodeTableView uni, const uint8_t* text, size_t n, size_t pos);

// next_piece over a whole text, fast: GPT-2's rules applied to 64-byte class masks
// (ascii_classify.h, AVX2 where the CPU has it) while the text is ASCII; any piece the
// masks cannot settle (a non-ASCII byte in or right after it, or longer than the window)
// goes to next_piece, which stays the reference. Pieces come in order: next(pos) must be
// called with pos = 0, then each previous pos + length.
class PieceScanner {
 public:
  PieceScanner(UnicodeTableView uni, const uint8_t* text, size_t n, bool use_masks = true)
      : uni_(uni), text_(text), n_(n), use_masks_(use_masks) {}
  size_t next(size_t pos);
  // The lengths of the pieces from `pos` on, as many as the loaded window settles (at least
  // one, at most `max` >= 1), into lens[]: the same pieces as calls of next(), in order,
  // with the boundaries read off the window's plan by bit scans instead of one call each.
  size_t next_many(size_t pos, uint32_t* lens, size_t max);

 private:
  void load(size_t pos);
  void plan();                              // every settled boundary of the loaded window
  void plan_contractions(uint64_t quotes);  // the contraction rule on the plan
  size_t from_plan(size_t pos) const;       // 0 where the plan has no settled piece at pos
  size_t from_masks(size_t pos) const;      // 0 where the masks cannot decide
  size_t next_scalar(size_t pos, uint32_t* lens) const;  // next_piece into lens[0]; 1
  UnicodeTableView uni_;
  const uint8_t* text_;
  size_t n_;
  bool use_masks_;
  size_t w_ = 0, m_ = 0;  // window start; bytes [w_, w_ + m_) are ASCII and classified
  bool loaded_ = false;
  uint64_t letter_ = 0, digit_ = 0, space_ = 0, other_ = 0, blank_ = 0, quote_ = 0;
  // Piece boundaries in the window (bit i: a piece starts at w_ + i, or the text ends there).
  uint64_t bounds_ = 0;
};

// The lengths of text[0, n)'s pieces by PieceScanner::next_many, at most `many` (clamped to
// 1..64) a call; use_masks false: by next_piece alone (the reference). For tests.
std::vector<uint32_t> scan_piece_lengths(UnicodeTableView uni, const uint8_t* text, size_t n,
                                         bool use_masks, size_t many);

// Appends every piece of text[0, n) to `out`, offsets relative to `base`.
void pretokenize(UnicodeTableView uni, const uint8_t* text, size_t n, std::vector<Piece>& out,
                 uint32_t base = 0);

}  // namespace gputok
