// UTF-8 validation and repair (utf8.h), byte for byte CPython's decoder.
//
// Performance notes: on the multilingual bench corpus (18% non-ASCII bytes), 0.96 GB/s byte
// by byte, 7.3 GB/s with the AVX2 whole-buffer check (2-core dev machine, 2026-11-23).
#include "utf8.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GPUTOK_UTF8_AVX2 1
#endif

namespace gputok {

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
