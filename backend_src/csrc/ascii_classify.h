// Byte classification 64 bytes at a time: the SIMD machinery of the pretokenizer, with no
// pattern in it. Each mask's bit i describes byte i of the window. A pattern's rules
// (pretokenize.cpp's PieceScanner for GPT-2) find piece ends in these masks with bit
// scans; other patterns (cl100k, o200k) can take the same masks (and ask for more classes
// here, e.g. upper/lower case) without touching the SIMD code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gputok {

struct AsciiMasks {
  uint64_t letter;    // [A-Za-z]
  uint64_t digit;     // [0-9]
  uint64_t space;     // ASCII White_Space: \t \n \v \f \r and ' ' (not U+001C..U+001F)
  uint64_t nonascii;  // bytes >= 0x80 (their class needs the Unicode table)
  uint64_t blank;     // ' ' (0x20)
  uint64_t quote;     // '\'' (0x27)
};

// Masks of p[0, 64); bytes at and past `avail` (< 64 allowed) read as 0 (an "other" byte):
// callers never trust bits past the text's end.
AsciiMasks classify64(const uint8_t* p, size_t avail);
// The portable twin (one table lookup a byte), used where the CPU has no AVX2, and the
// reference the AVX2 version is tested against.
AsciiMasks classify64_portable(const uint8_t* p, size_t avail);
// Whether classify64 runs the AVX2 code on this CPU (checked once, at run time).
bool classify_has_avx2();

}  // namespace gputok
