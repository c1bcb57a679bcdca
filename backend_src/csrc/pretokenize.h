// Pretokenization: GPT-2's pattern, as tiktoken's regex engine runs it,
//   '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
// by a hand-written scanner (no regex library). Also UTF-8 validation and repair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "types.h"

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

 private:
  void load(size_t pos);
  void plan();                          // every settled boundary of the loaded window
  size_t from_plan(size_t pos) const;   // 0 where the plan has no settled piece at pos
  size_t from_masks(size_t pos) const;  // 0 where the masks cannot decide
  UnicodeTableView uni_;
  const uint8_t* text_;
  size_t n_;
  bool use_masks_;
  size_t w_ = 0, m_ = 0;  // window start; bytes [w_, w_ + m_) are ASCII and classified
  bool loaded_ = false;
  uint64_t letter_ = 0, digit_ = 0, space_ = 0, other_ = 0, blank_ = 0;
  // Piece boundaries in the window (bit i: a piece starts at w_ + i, or the text ends there).
  uint64_t bounds_ = 0;
};

// Appends every piece of text[0, n) to `out`, offsets relative to `base`.
void pretokenize(UnicodeTableView uni, const uint8_t* text, size_t n, std::vector<Piece>& out,
                 uint32_t base = 0);

// Offset of the first byte that is not part of valid UTF-8, or n when all of it is valid.
// "Valid" is Python's strict decoder: no surrogates, no overlongs, nothing above U+10FFFF.
size_t utf8_first_invalid(const uint8_t* text, size_t n);
// The same answer by the byte-by-byte decoder alone (utf8_first_invalid asks a SIMD check
// first where the CPU has AVX2): the reference its tests compare against.
size_t utf8_first_invalid_reference(const uint8_t* text, size_t n);

// bytes.decode("utf-8", "replace").encode("utf-8"): each maximal invalid subpart becomes
// U+FFFD, exactly as CPython's decoder does.
std::string utf8_replace_invalid(const uint8_t* text, size_t n);

}  // namespace gputok
