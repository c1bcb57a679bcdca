// Pretokenization by a hand-written scanner, equal to tiktoken's regex
//   '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
// Alternatives are tried in order at each position; all runs are possessive, so no
// backtracking is needed except the one-character give-back of `\s+(?!\S)`, which the
// whitespace branch computes directly (the run minus its last character).
//
// Performance notes (2-core dev machine, ci corpus): ~250 MB/s per core on English prose;
// ASCII bytes take a 256-entry class table, other code points the two-stage Unicode table.
// UTF-8 validation (utf8_first_invalid), on the multilingual bench corpus (18% non-ASCII
// bytes): 0.96 GB/s byte by byte, 7.3 GB/s with the AVX2 whole-buffer check (2026-11-23).
#include "pretokenize.h"

#include <cstring>

#include "ascii_classify.h"
#include "unicode_tables.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GPUTOK_UTF8_AVX2 1
#endif

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

}  // namespace

size_t next_piece(UnicodeTableView uni, const uint8_t* text, size_t n, size_t pos) {
  const uint8_t b = text[pos];
  // '(?:[sdmt]|ll|ve|re) -- case-sensitive, ASCII only.
  if (b == '\'' && pos + 1 < n) {
    const uint8_t c = text[pos + 1];
    if (c == 's' || c == 'd' || c == 'm' || c == 't') return 2;
    if (pos + 2 < n) {
      const uint8_t d = text[pos + 2];
      if ((c == 'l' && d == 'l') || (c == 'v' && d == 'e') || (c == 'r' && d == 'e')) return 3;
    }
  }
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
// every boundary of a window at once (plan()) 630 and 910.

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
    if (b == '\'' && pos + 1 < n_) {  // contractions: the scalar code, as it is
      const uint8_t c = text_[pos + 1];
      if (c == 's' || c == 'd' || c == 'm' || c == 't' ||
          (pos + 2 < n_ &&
           ((c == 'l' && text_[pos + 2] == 'l') || (c == 'v' && text_[pos + 2] == 'e') ||
            (c == 'r' && text_[pos + 2] == 'e'))))
        return next_piece(uni_, text_, n_, pos);
    }
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

void pretokenize(UnicodeTableView uni, const uint8_t* text, size_t n, std::vector<Piece>& out,
                 uint32_t base) {
  size_t pos = 0;
  while (pos < n) {
    const size_t len = next_piece(uni, text, n, pos);
    out.push_back(Piece{uint32_t(base + pos), uint32_t(len)});
    pos += len;
  }
}

// ---------------------------------------------------------------------------
// UTF-8 validation and repair, byte for byte CPython's decoder.

namespace {

// Length of the valid prefix of the sequence at text[i]: returns the sequence length when
// it is complete and valid, otherwise -(number of bytes in its maximal invalid subpart).
inline int sequence_at(const uint8_t* text, size_t n, size_t i) {
  const uint8_t b = text[i];
  if (b < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return -1;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= n) return -k;
    const uint8_t c = text[i + k];
    const bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) return -k;
  }
  return need + 1;
}

inline size_t ascii_prefix(const uint8_t* text, size_t n, size_t i) {
  while (i + 8 <= n) {
    uint64_t w;
    std::memcpy(&w, text + i, 8);
    const uint64_t high = w & 0x8080808080808080ULL;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (high) return i + size_t(__builtin_ctzll(high) >> 3);  // the first byte >= 0x80
#else
    if (high) break;
#endif
    i += 8;
  }
  while (i < n && text[i] < 0x80) ++i;
  return i;
}

#ifdef GPUTOK_UTF8_AVX2
// Whole-buffer check, 32 bytes at a time: Keiser and Lemire's lookup algorithm ("Validating
// UTF-8 in less than one instruction per byte", 2021), as simdjson and simdutf use it. Three
// 16-entry tables indexed by the high nibble of the previous byte, its low nibble and the
// high nibble of this byte flag every invalid two-byte pattern (too short, too long,
// overlong, surrogate, above U+10FFFF, two continuations); a third or fourth byte that must be
// a continuation is checked from the bytes two and three back. It only answers "all valid?":
// where it says no, the scalar decoder above finds the exact offset, so it cannot change a
// result, only its cost. The scalar path ran at 0.96 GB/s on the multilingual bench corpus
// (18% of its bytes non-ASCII), which was most of a GPU call's host time.
namespace simd {

constexpr uint8_t kTooShort = 1 << 0;   // lead or ASCII, then lead or ASCII where a cont. is due
constexpr uint8_t kTooLong = 1 << 1;    // ASCII, then a continuation
constexpr uint8_t kOverlong3 = 1 << 2;  // E0 80..9F
constexpr uint8_t kTooLarge = 1 << 3;   // F4 90..BF, F5..FF
constexpr uint8_t kSurrogate = 1 << 4;  // ED A0..BF
constexpr uint8_t kOverlong2 = 1 << 5;  // C0, C1
constexpr uint8_t kTooLarge1000 = 1 << 6;
constexpr uint8_t kOverlong4 = 1 << 6;  // F0 80..8F
constexpr uint8_t kTwoConts = 1 << 7;   // a continuation after a continuation (checked below)
constexpr uint8_t kCarry = kTooShort | kTooLong | kTwoConts;

__attribute__((target("avx2"))) inline __m256i table(uint8_t a0, uint8_t a1, uint8_t a2, uint8_t a3,
                                                     uint8_t a4, uint8_t a5, uint8_t a6, uint8_t a7,
                                                     uint8_t a8, uint8_t a9, uint8_t a10,
                                                     uint8_t a11, uint8_t a12, uint8_t a13,
                                                     uint8_t a14, uint8_t a15) {
  return _mm256_setr_epi8(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a0,
                          a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
}

// The 32 bytes ending N bytes before the end of `in`: prev's last N, then in's first 32 - N.
template <int N>
__attribute__((target("avx2"))) inline __m256i prev_bytes(__m256i in, __m256i prev) {
  return _mm256_alignr_epi8(in, _mm256_permute2x128_si256(prev, in, 0x21), 16 - N);
}

__attribute__((target("avx2"))) inline __m256i high_nibbles(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}

__attribute__((target("avx2"))) inline __m256i block_errors(__m256i in, __m256i prev) {
  const __m256i prev1 = prev_bytes<1>(in, prev);
  const __m256i byte_1_high = _mm256_shuffle_epi8(
      table(kTooLong, kTooLong, kTooLong, kTooLong, kTooLong, kTooLong, kTooLong, kTooLong,
            kTwoConts, kTwoConts, kTwoConts, kTwoConts, kTooShort | kOverlong2, kTooShort,
            kTooShort | kOverlong3 | kSurrogate,
            kTooShort | kTooLarge | kTooLarge1000 | kOverlong4),
      high_nibbles(prev1));
  const __m256i byte_1_low = _mm256_shuffle_epi8(
      table(kCarry | kOverlong3 | kOverlong2 | kOverlong4, kCarry | kOverlong2, kCarry, kCarry,
            kCarry | kTooLarge, kCarry | kTooLarge | kTooLarge1000,
            kCarry | kTooLarge | kTooLarge1000, kCarry | kTooLarge | kTooLarge1000,
            kCarry | kTooLarge | kTooLarge1000, kCarry | kTooLarge | kTooLarge1000,
            kCarry | kTooLarge | kTooLarge1000, kCarry | kTooLarge | kTooLarge1000,
            kCarry | kTooLarge | kTooLarge1000, kCarry | kTooLarge | kTooLarge1000 | kSurrogate,
            kCarry | kTooLarge | kTooLarge1000, kCarry | kTooLarge | kTooLarge1000),
      _mm256_and_si256(prev1, _mm256_set1_epi8(0x0F)));
  const uint8_t cont80 =
      kTooLong | kOverlong2 | kTwoConts | kOverlong3 | kTooLarge1000 | kOverlong4;
  const uint8_t cont90 = kTooLong | kOverlong2 | kTwoConts | kOverlong3 | kTooLarge;
  const uint8_t contA0 = kTooLong | kOverlong2 | kTwoConts | kSurrogate | kTooLarge;
  const __m256i byte_2_high = _mm256_shuffle_epi8(
      table(kTooShort, kTooShort, kTooShort, kTooShort, kTooShort, kTooShort, kTooShort, kTooShort,
            cont80, cont90, contA0, contA0, kTooShort, kTooShort, kTooShort, kTooShort),
      high_nibbles(in));
  const __m256i special = _mm256_and_si256(_mm256_and_si256(byte_1_high, byte_1_low), byte_2_high);
  // Two and three bytes back: a lead of 3 (>= E0) or 4 (>= F0) bytes makes this byte a
  // continuation that must be there; the tables flagged every continuation after a
  // continuation (kTwoConts), so the two must agree.
  const __m256i third =
      _mm256_subs_epu8(prev_bytes<2>(in, prev), _mm256_set1_epi8(char(0xE0 - 0x80)));
  const __m256i fourth =
      _mm256_subs_epu8(prev_bytes<3>(in, prev), _mm256_set1_epi8(char(0xF0 - 0x80)));
  const __m256i must_cont =
      _mm256_and_si256(_mm256_or_si256(third, fourth), _mm256_set1_epi8(char(0x80)));
  return _mm256_xor_si256(must_cont, special);
}

// Nonzero where the block ends inside a sequence (a lead in its last 1, 2 or 3 bytes that
// needs more than is left).
__attribute__((target("avx2"))) inline __m256i incomplete_tail(__m256i in) {
  const __m256i max_ok =
      _mm256_setr_epi8(char(255), char(255), char(255), char(255), char(255), char(255), char(255),
                       char(255), char(255), char(255), char(255), char(255), char(255), char(255),
                       char(255), char(255), char(255), char(255), char(255), char(255), char(255),
                       char(255), char(255), char(255), char(255), char(255), char(255), char(255),
                       char(255), char(0xF0 - 1), char(0xE0 - 1), char(0xC0 - 1));
  return _mm256_subs_epu8(in, max_ok);
}

struct State {
  __m256i error, prev, prev_incomplete;
};

__attribute__((target("avx2"))) inline void step(State& st, __m256i in) {
  if (_mm256_movemask_epi8(in) == 0) {  // ASCII: only a sequence cut off before it is wrong
    st.error = _mm256_or_si256(st.error, st.prev_incomplete);
    st.prev_incomplete = _mm256_setzero_si256();
  } else {
    st.error = _mm256_or_si256(st.error, block_errors(in, st.prev));
    st.prev_incomplete = incomplete_tail(in);
  }
  st.prev = in;
}

__attribute__((target("avx2"))) bool all_valid(const uint8_t* text, size_t n) {
  State st{_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    step(st, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(text + i)));
    if ((i & 0xFFFF) == 0 && !_mm256_testz_si256(st.error, st.error)) return false;  // early
  }
  // The rest, then zeros (at least one, as n - i < 32): a sequence the text cuts off meets
  // a zero inside this block, and with no rest the all-zero block closes the last one.
  alignas(32) uint8_t tail[32] = {};
  std::memcpy(tail, text + i, n - i);
  step(st, _mm256_load_si256(reinterpret_cast<const __m256i*>(tail)));
  return _mm256_testz_si256(st.error, st.error) != 0;
}

}  // namespace simd

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

}  // namespace

size_t utf8_first_invalid(const uint8_t* text, size_t n) {
#ifdef GPUTOK_UTF8_AVX2
  if (n >= 64 && have_avx2() && simd::all_valid(text, n)) return n;
#endif
  return utf8_first_invalid_reference(text, n);
}

size_t utf8_first_invalid_reference(const uint8_t* text, size_t n) {
  size_t i = 0;
  for (;;) {
    i = ascii_prefix(text, n, i);
    if (i >= n) return n;
    const int len = sequence_at(text, n, i);
    if (len < 0) return i;
    i += size_t(len);
  }
}

std::string utf8_replace_invalid(const uint8_t* text, size_t n) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(n + 16);
  size_t i = 0;
  while (i < n) {
    const size_t j = ascii_prefix(text, n, i);
    out.append(reinterpret_cast<const char*>(text + i), j - i);
    i = j;
    if (i >= n) break;
    const int len = sequence_at(text, n, i);
    if (len > 0) {
      out.append(reinterpret_cast<const char*>(text + i), size_t(len));
      i += size_t(len);
    } else {
      out.append(kReplacement, 3);
      i += size_t(-len);
    }
  }
  return out;
}

}  // namespace gputok
