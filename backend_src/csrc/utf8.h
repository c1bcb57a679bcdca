// UTF-8 validation and repair: every text is checked (or repaired) once at the edge, so
// the scanners behind it decode without error paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gputok {

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
