// Byte classification (ascii_classify.h). AVX2 where the CPU has it, chosen at run time
// (the library is built for baseline x86-64; the AVX2 function carries its own target).
#include "ascii_classify.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GPUTOK_CLASSIFY_AVX2 1
#endif

namespace gputok {

namespace {

// 1 letter, 2 digit, 3 space, 0 other: the ASCII half of the pretokenizer's classes.
struct Table {
  uint8_t cls[128];
  constexpr Table() : cls() {
    for (int c = 0; c < 128; ++c) {
      const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      const bool digit = c >= '0' && c <= '9';
      const bool space = c == ' ' || (c >= 0x09 && c <= 0x0D);
      cls[c] = letter ? 1 : digit ? 2 : space ? 3 : 0;
    }
  }
};
constexpr Table kTable;

#ifdef GPUTOK_CLASSIFY_AVX2
__attribute__((target("avx2"))) inline void classify32(const uint8_t* p, uint32_t* letter,
                                                       uint32_t* digit, uint32_t* space,
                                                       uint32_t* high, uint32_t* blank,
                                                       uint32_t* quote) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  // Signed compares: bytes >= 0x80 are negative and fall out of every ASCII range.
  const __m256i lower = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
  const __m256i is_letter = _mm256_and_si256(_mm256_cmpgt_epi8(lower, _mm256_set1_epi8('a' - 1)),
                                             _mm256_cmpgt_epi8(_mm256_set1_epi8('z' + 1), lower));
  const __m256i is_digit = _mm256_and_si256(_mm256_cmpgt_epi8(v, _mm256_set1_epi8('0' - 1)),
                                            _mm256_cmpgt_epi8(_mm256_set1_epi8('9' + 1), v));
  const __m256i is_space =
      _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(' ')),
                      _mm256_and_si256(_mm256_cmpgt_epi8(v, _mm256_set1_epi8(0x08)),
                                       _mm256_cmpgt_epi8(_mm256_set1_epi8(0x0E), v)));
  *letter = uint32_t(_mm256_movemask_epi8(is_letter));
  *digit = uint32_t(_mm256_movemask_epi8(is_digit));
  *space = uint32_t(_mm256_movemask_epi8(is_space));
  *high = uint32_t(_mm256_movemask_epi8(v));
  *blank = uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(' '))));
  *quote = uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\''))));
}

__attribute__((target("avx2"))) AsciiMasks classify64_avx2(const uint8_t* p, size_t avail) {
  alignas(32) uint8_t pad[64];
  if (avail < 64) {
    std::memset(pad, 0, sizeof pad);
    std::memcpy(pad, p, avail);
    p = pad;
  }
  uint32_t l0, d0, s0, h0, b0, q0, l1, d1, s1, h1, b1, q1;
  classify32(p, &l0, &d0, &s0, &h0, &b0, &q0);
  classify32(p + 32, &l1, &d1, &s1, &h1, &b1, &q1);
  auto join = [](uint32_t lo, uint32_t hi) { return uint64_t(lo) | (uint64_t(hi) << 32); };
  return AsciiMasks{join(l0, l1), join(d0, d1), join(s0, s1),
                    join(h0, h1), join(b0, b1), join(q0, q1)};
}
#endif

}  // namespace

AsciiMasks classify64_portable(const uint8_t* p, size_t avail) {
  AsciiMasks m{0, 0, 0, 0, 0, 0};
  const size_t n = avail < 64 ? avail : 64;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bit = uint64_t(1) << i;
    if (p[i] >= 0x80) {
      m.nonascii |= bit;
      continue;
    }
    if (p[i] == ' ') m.blank |= bit;
    if (p[i] == '\'') m.quote |= bit;
    switch (kTable.cls[p[i]]) {
      case 1:
        m.letter |= bit;
        break;
      case 2:
        m.digit |= bit;
        break;
      case 3:
        m.space |= bit;
        break;
      default:
        break;
    }
  }
  return m;
}

bool classify_has_avx2() {
#ifdef GPUTOK_CLASSIFY_AVX2
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
#else
  return false;
#endif
}

AsciiMasks classify64(const uint8_t* p, size_t avail) {
#ifdef GPUTOK_CLASSIFY_AVX2
  if (classify_has_avx2()) return classify64_avx2(p, avail);
#endif
  return classify64_portable(p, avail);
}

}  // namespace gputok
