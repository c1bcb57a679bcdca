// Snappy (raw format) for Parquet pages: the tag parser shared by the CPU decoder
// (parquet.cpp) and the GPU kernels (cuda/parquet.cu), and the GPU's job description.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define CORPUS_HD __host__ __device__ __forceinline__
#else
#define CORPUS_HD inline
#endif

namespace gputok {

// Snappy (raw format), for Parquet pages: a varint uncompressed length, then tags. A tag is a
// literal (its bytes follow) or a copy of `len` bytes from `offset` bytes back in the output.
// The CPU decoder (parquet.cpp) and the GPU kernels (cuda/parquet.cu) parse tags with the one
// function below.
struct SnappyTag {
  uint32_t len;     // bytes of output
  uint32_t offset;  // copies: distance back (> 0); literals: 0
  uint32_t size;    // bytes of the tag itself (a literal's data follows it)
};

// The tag whose first five bytes are `w` (little-endian; bytes past the input read as 0), with
// `avail` bytes of input from the tag on. False when it runs past the input, is impossibly
// long, or is a copy with offset 0 (which snappy rejects; read as a literal it would decode
// garbage). Branch-free, so that the GPU's lanes, each parsing a different kind of tag, do not
// diverge (cuda/parquet.cu, the windowed decode).
CORPUS_HD bool snappy_tag_of(uint64_t w, uint64_t avail, SnappyTag& t) {
  const uint32_t tag = uint32_t(w & 0xFF), hi = uint32_t(w >> 8), kind = tag & 3, x = tag >> 2;
  // literals: a length in the tag, or in 1-4 bytes after it
  const uint32_t nb = x >= 60 ? x - 59 : 0;
  const uint32_t v = nb == 0 ? x : nb == 4 ? hi : hi & ((1u << (8 * nb)) - 1);
  const uint32_t lit_len = v + 1;
  // copies: kind 1 (length 4-11, 11-bit offset), 2 (16-bit offset), 3 (32-bit offset)
  const uint32_t copy_len = kind == 1 ? 4 + (x & 7) : x + 1;
  const uint32_t off = kind == 1 ? ((tag >> 5) << 8) | (hi & 0xFF) : kind == 2 ? hi & 0xFFFF : hi;
  t.len = kind == 0 ? lit_len : copy_len;
  t.offset = kind == 0 ? 0 : off;
  t.size = kind == 0 ? 1 + nb : kind == 1 ? 2 : kind == 2 ? 3 : 5;
  return t.size <= avail && (kind == 0 ? v < 0x7FFFFFFFu : off != 0);
}

// The tag at src[ip] (ip < end); see snappy_tag_of.
CORPUS_HD bool snappy_tag(const uint8_t* src, size_t ip, size_t end, SnappyTag& t) {
  uint64_t w = 0;
  for (uint32_t k = 0; k < 5 && ip + k < end; ++k) w |= uint64_t(src[ip + k]) << (8 * k);
  return snappy_tag_of(w, end - ip, t);
}

// The stream's uncompressed length (a varint of at most 5 bytes) and the varint's size.
CORPUS_HD bool snappy_length(const uint8_t* src, size_t n, uint32_t& length, uint32_t& size) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < 5 && i < n; ++i) {
    v |= uint64_t(src[i] & 0x7F) << (7 * i);
    if (!(src[i] & 0x80)) {
      if (v > 0xFFFFFFFFu) return false;
      length = uint32_t(v);
      size = i + 1;
      return true;
    }
  }
  return false;
}

// Google's snappy compresses 64 KiB blocks independently: no tag crosses a block's boundary
// in the output and no copy reaches into an earlier block. Where a stream keeps to that, its
// blocks ("fragments") decode in parallel, one warp each.
constexpr uint32_t kSnappyFragment = 1u << 16;
// A stream's state on the GPU: decodable fragment by fragment (and, at the end, decoded),
// to be decoded from start to end by one warp, or malformed.
enum SnappyStatus : int32_t { kSnappyCorrupt = -1, kSnappyFragmented = 0, kSnappySequential = 1 };

// One snappy stream for the GPU (cuda/parquet.cu): input src[0, src_size) of the chunk
// (tags from `ip` on, after the length varint), output dst[0, out_len) of the pages' buffer.
// Its fragments are [frag0, frag0 + ceil(out_len / 64 KiB)) of the call's fragments, its
// input segments (2^seg_shift bytes each, from `ip` on) [seg0, seg0 + segments).
struct SnappyJob {
  uint64_t src, dst;
  uint32_t src_size, ip, out_len, frag0, seg0;
};
// Input segments of 2^kSnappySegmentShift bytes (the GPU's walks; cuda/parquet.cu).
constexpr uint32_t kSnappySegmentShift = 9;

}  // namespace gputok
