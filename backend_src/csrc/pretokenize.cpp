// Pretokenization by a hand-written scanner, equal to tiktoken's regex
//   '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
// Alternatives are tried in order at each position; all runs are possessive, so no
// backtracking is needed except the one-character give-back of `\s+(?!\S)`, which the
// whitespace branch computes directly (the run minus its last character).
//
// Performance notes (2-core dev machine, ci corpus): ~250 MB/s per core on English prose;
// ASCII bytes take a 256-entry class table, other code points the two-stage Unicode table.
#include "pretokenize.h"

#include <cstring>

#include "ascii_classify.h"
#include "unicode_tables.h"

namespace gputok {

UnicodeTableView unicode_table() {
  return UnicodeTableView{unicode_data::kStage1, unicode_data::kStage2};
}
size_t unicode_stage1_size() { return unicode_data::kStage1Size; }
size_t unicode_stage2_size() { return unicode_data::kStage2Size; }

namespace {

struct Char {
  uint32_t len;
  uint8_t cls;
};

// ASCII classes without the two-stage walk: most text is mostly ASCII.
struct AsciiClasses {
  uint8_t cls[128];
  constexpr AsciiClasses() : cls() {
    for (int c = 0; c < 128; ++c) {
      const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      const bool digit = c >= '0' && c <= '9';
      const bool space = c == ' ' || (c >= 0x09 && c <= 0x0D);
      cls[c] = letter ? kLetter : digit ? kNumber : space ? kSpace : kOther;
    }
  }
};
constexpr AsciiClasses kAscii;

inline Char char_at(UnicodeTableView uni, const uint8_t* text, size_t pos) {
  const uint8_t b = text[pos];
  if (b < 0x80) return Char{1, kAscii.cls[b]};
  const uint32_t len = utf8_len(b);
  return Char{len, char_class(uni, utf8_decode(text + pos, len))};
}

// End of the run of characters of class `cls` starting at `pos`.
inline size_t run_end(UnicodeTableView uni, const uint8_t* text, size_t n, size_t pos,
                      uint8_t cls) {
  // ASCII stretch first: one load and one table byte per character, no decode.
  while (pos < n && text[pos] < 0x80 && kAscii.cls[text[pos]] == cls) ++pos;
  while (pos < n) {
    const Char c = char_at(uni, text, pos);
    if (c.cls != cls) break;
    pos += c.len;
  }
  return pos;
}

// '(?:[sdmt]|ll|ve|re) -- case-sensitive, ASCII only: the length of the contraction at
// pos, or 0 where none starts there.
inline size_t contraction_at(const uint8_t* text, size_t n, size_t pos) {
  if (text[pos] != '\'' || pos + 1 >= n) return 0;
  const uint8_t c = text[pos + 1];
  if (c == 's' || c == 'd' || c == 'm' || c == 't') return 2;
  if (pos + 2 >= n) return 0;
  const uint8_t d = text[pos + 2];
  return ((c == 'l' && d == 'l') || (c == 'v' && d == 'e') || (c == 'r' && d == 'e')) ? 3 : 0;
}

}  // namespace

size_t next_piece(UnicodeTableView uni, const uint8_t* text, size_t n, size_t pos) {
  const uint8_t b = text[pos];
  if (const size_t len = contraction_at(text, n, pos)) return len;
  const Char first = char_at(uni, text, pos);
  // ' ?\p{L}++', ' ?\p{N}++', ' ?[^\s\p{L}\p{N}]++' with the optional leading space.
  if (b == ' ' && pos + 1 < n) {
    const Char second = char_at(uni, text, pos + 1);
    if (second.cls != kSpace) return run_end(uni, text, n, pos + 1, second.cls) - pos;
  }
  if (first.cls != kSpace) return run_end(uni, text, n, pos, first.cls) - pos;
  // Whitespace: '\s++$' takes a run reaching the end; otherwise '\s+(?!\S)' takes the run
  // minus its last character (which then leads the next piece), or '\s' takes a lone one.
  size_t end = pos + first.len;
  size_t last = pos;
  while (end < n) {
    const Char c = char_at(uni, text, end);
    if (c.cls != kSpace) break;
    last = end;
    end += c.len;
  }
  if (end == n || last == pos) return end - pos;
  return last - pos;
}

// ---------------------------------------------------------------------------
// GPT-2's rules on class masks. Bit i of a mask is byte w_ + i; only bits below m_ (the
// ASCII prefix of the window, cut at the text's end) are set. A run's end is a bit scan.
//
// Performance notes (2-core dev machine, CPU time of a driver around the scanner,
// 2026-11-25): next_piece byte by byte ~300 MB/s on 3,000 bench docs (18% non-ASCII bytes)
// and ~290 MB/s on 30 MB of stdlib code; one piece at a time from the masks 350 and 410;
// every boundary of a window at once (plan()) 630 and 910. Callgrind inside the encoder
// (bench/results/2026-11-25-cpu-path-2.md): one next() call a piece cost 86 instructions a
// piece on the bench corpus; next_many, with the contraction rule in the plan and ' ' before
// a non-ASCII word sent straight to next_piece, ~48 (bench) and ~46 (code), of which
// classify64 ~190 instructions a window and the load and plan ~90.

namespace {

// First position >= i whose bit is clear in `mask` (64 when all of [i, 64) are set).
inline size_t run_end_bits(uint64_t mask, size_t i) {
  const uint64_t rest = ~(mask >> i);  // bits shifted in from the top read as "clear"
  return rest ? i + size_t(__builtin_ctzll(rest)) : 64;
}

}  // namespace

void PieceScanner::load(size_t pos) {
  const size_t avail = n_ - pos;
  const AsciiMasks a = classify64(text_ + pos, avail < 64 ? avail : 64);
  w_ = pos;
  m_ = a.nonascii ? size_t(__builtin_ctzll(a.nonascii)) : 64;
  if (m_ > avail) m_ = avail;
  const uint64_t valid = m_ == 64 ? ~uint64_t(0) : (uint64_t(1) << m_) - 1;
  letter_ = a.letter & valid;
  digit_ = a.digit & valid;
  space_ = a.space & valid;
  other_ = ~(a.letter | a.digit | a.space) & valid;
  blank_ = a.blank & valid;
  quote_ = a.quote & valid;
  loaded_ = true;
  plan();
}

// All boundaries at once. A run of each class starts a piece; so does the last character
// of a whitespace run that something other than whitespace follows ('\s+(?!\S)' leaves it
// to the next piece), and when that character is ' ' the run after it does not start one
// (' ?\p{L}++' etc. take the space). Contractions are not planned: next() tries them first
// at every apostrophe, and after one it plans afresh.
void PieceScanner::plan() {
  auto run_starts = [](uint64_t x) { return x & ~(x << 1); };
  const uint64_t valid = m_ == 64 ? ~uint64_t(0) : (uint64_t(1) << m_) - 1;
  uint64_t starts =
      run_starts(letter_) | run_starts(digit_) | run_starts(other_) | run_starts(space_);
  const uint64_t space_last = space_ & ~(space_ >> 1) & (valid >> 1);
  starts = (starts | space_last) & ~((space_last & blank_) << 1);
  bounds_ = starts;
  if (w_ + m_ == n_ && m_ < 64) bounds_ |= uint64_t(1) << m_;  // the text's end
  if (const uint64_t q = quote_ & bounds_) plan_contractions(q);
}

// A piece that starts at an apostrophe may be a contraction ('s, 'll, ...: the pattern's
// first alternative), which ends inside the letter run after it: the run's start is no
// boundary, and the contraction's end is one. Where that end falls past the window the
// piece is left unsettled (no later bit), and next() decides it. Rare: scalar, low to high.
void PieceScanner::plan_contractions(uint64_t quotes) {
  while (quotes) {
    const size_t q = size_t(__builtin_ctzll(quotes));
    quotes &= quotes - 1;
    const size_t len = contraction_at(text_, n_, w_ + q);
    if (!len) continue;
    for (size_t k = q + 1; k < q + len && k < 64; ++k) bounds_ &= ~(uint64_t(1) << k);
    if (q + len < 64) bounds_ |= uint64_t(1) << (q + len);
  }
}

size_t PieceScanner::from_plan(size_t pos) const {
  const size_t i = pos - w_;
  if (i >= 63 || !((bounds_ >> i) & 1)) return 0;
  const uint64_t rest = bounds_ >> (i + 1);
  return rest ? size_t(__builtin_ctzll(rest)) + 1 : 0;
}

size_t PieceScanner::from_masks(size_t pos) const {
  const size_t i = pos - w_;
  if (i >= m_) return 0;
  const bool at_end = w_ + m_ == n_;  // the valid bytes reach the end of the text
  // A run ending at m_ is settled only by the text's end; otherwise the next byte decides.
  auto settled = [&](size_t end) { return end < m_ || at_end; };
  const uint64_t bit = uint64_t(1) << i;
  if (space_ & bit) {
    // ' ' then a letter, digit or other: the space leads that run (' ?\p{L}++' etc.).
    if (text_[pos] == ' ' && i + 1 < m_ && !(space_ & (bit << 1))) {
      const uint64_t next = bit << 1;
      const uint64_t cls = (letter_ & next) ? letter_ : (digit_ & next) ? digit_ : other_;
      const size_t end = run_end_bits(cls, i + 1);
      return settled(end) ? end - i : 0;
    }
    // '\s++$' to the end; '\s+(?!\S)' leaves the run's last character to the next piece;
    // a lone one is '\s'.
    const size_t end = run_end_bits(space_, i);
    if (end == m_) return at_end ? end - i : 0;
    return end - i >= 2 ? end - 1 - i : 1;
  }
  const uint64_t cls = (letter_ & bit) ? letter_ : (digit_ & bit) ? digit_ : other_;
  const size_t end = run_end_bits(cls, i);
  return settled(end) ? end - i : 0;
}

size_t PieceScanner::next(size_t pos) {
  if (use_masks_) {
    const uint8_t b = text_[pos];
    if (const size_t len = contraction_at(text_, n_, pos)) return len;
    if (b < 0x80) {
      if (loaded_ && pos - w_ < 64) {
        if (const size_t len = from_plan(pos)) return len;
      }
      if (!loaded_ || pos != w_) load(pos);
      if (const size_t len = from_plan(pos)) return len;
      size_t len = from_masks(pos);
      if (len == 0 && pos != w_ && m_ == 64) {  // maybe only the window was too short
        load(pos);
        len = from_masks(pos);
      }
      if (len) return len;
    }
  }
  return next_piece(uni_, text_, n_, pos);
}

size_t PieceScanner::next_many(size_t pos, uint32_t* lens, size_t max) {
  if (use_masks_ && text_[pos] < 0x80) {
    size_t i = pos - w_;
    // The loaded plan serves while a piece starts at pos and ends in it; otherwise the
    // window moves to pos (one classify64), which settles every piece of the next 64 bytes
    // up to the first non-ASCII byte. Where a non-ASCII byte follows at once (' ' before a
    // word in another script), or the piece at pos already runs into the window's first
    // non-ASCII byte, a new window would settle nothing: the scalar scanner takes the piece.
    const bool planned = loaded_ && i < 63 && ((bounds_ >> i) & 1);
    if (planned && !(bounds_ >> i >> 1)) {
      if (m_ < 64 && w_ + m_ < n_) return next_scalar(pos, lens);
    }
    if (!planned || !(bounds_ >> i >> 1)) {
      if (loaded_ && i == 0) return next_scalar(pos, lens);
      if (pos + 1 < n_ && text_[pos + 1] >= 0x80) return next_scalar(pos, lens);
      load(pos);
      i = 0;
    }
    uint64_t rest = bounds_ >> i >> 1;  // bit j: a piece starts at pos + j + 1
    size_t k = 0;
    while (rest && k < max) {
      const size_t len = size_t(__builtin_ctzll(rest)) + 1;
      lens[k++] = uint32_t(len);
      rest >>= len;
    }
    if (k) return k;
  }
  lens[0] = uint32_t(next(pos));
  return 1;
}

size_t PieceScanner::next_scalar(size_t pos, uint32_t* lens) const {
  lens[0] = uint32_t(next_piece(uni_, text_, n_, pos));
  return 1;
}

std::vector<uint32_t> scan_piece_lengths(UnicodeTableView uni, const uint8_t* text, size_t n,
                                         bool use_masks, size_t many) {
  PieceScanner scanner(uni, text, n, use_masks);
  uint32_t run[64];
  many = many < 1 ? 1 : many > 64 ? 64 : many;
  std::vector<uint32_t> lens;
  for (size_t pos = 0; pos < n;) {
    const size_t k = scanner.next_many(pos, run, many);
    for (size_t j = 0; j < k; pos += run[j++]) lens.push_back(run[j]);
  }
  return lens;
}

void pretokenize(UnicodeTableView uni, const uint8_t* text, size_t n, std::vector<Piece>& out,
                 uint32_t base) {
  size_t pos = 0;
  while (pos < n) {
    const size_t len = next_piece(uni, text, n, pos);
    out.push_back(Piece{uint32_t(base + pos), uint32_t(len)});
    pos += len;
  }
}

}  // namespace gputok
