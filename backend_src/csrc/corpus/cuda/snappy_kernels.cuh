// The GPU snappy kernels' launchers (parquet.cu; the kernels are in snappy_walks.cu and
// snappy_decode.cu), for the page decoder (gpu_page_decoder.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../snappy.h"

namespace gputok {
namespace cuda_detail {

// Parquet pages (parquet.cu): the snappy streams of a column chunk, decoded 64 KiB fragment
// by fragment (segments walk, chain, fragment starts, shared-memory decode), then, for jobs
// whose tags cross the fragments, from start to end by one warp. src: the chunk; dst: the
// pages' buffer. cum (one per chunk byte) must be all 0xFFFFFFFF on entry.
struct SnappyScratch {
  uint32_t* cum = nullptr;        // chunk bytes
  uint32_t* seg_exit = nullptr;   // segments
  uint32_t* seg_total = nullptr;  // segments
  uint32_t* frag_q = nullptr;     // fragments
  uint32_t* frag_op = nullptr;    // fragments
  uint32_t* frag_ip = nullptr;    // fragments
  int32_t* status = nullptr;      // jobs: SnappyStatus
  // The chain's pointer jumping, levels + 1 arrays of `segments` each; `on` zeroed on entry.
  uint32_t* jump = nullptr;
  uint32_t* weight = nullptr;
  uint8_t* valid = nullptr;
  uint8_t* on = nullptr;  // segments
};
// Doubling rounds for paths of up to `segments` hops: the least r with 2^r > segments.
inline uint32_t snappy_jump_levels(uint32_t segments) {
  uint32_t r = 0;
  while ((uint64_t(1) << r) <= segments) ++r;
  return r;
}
// How the streams are cut and decoded; the defaults are the measured best, PageDecoderOptions
// overrides them for ablations (segment_bytes, decode).
// The fragment decode: lanes parse 32 bytes at once into shared memory (windowed), the same
// straight into the output (global), or every lane on one tag at a time (tagwise).
enum class SnappyDecode { kWindowed, kGlobal, kTagwise };
// Their names, in that order (PageDecoderOptions::decode, the profile's lines).
inline constexpr const char* kSnappyDecodeNames[] = {"windowed", "global", "tagwise"};
struct SnappyOptions {
  uint32_t seg_shift = kSnappySegmentShift;  // input segment of the walks: 2^seg_shift bytes
  SnappyDecode decode = SnappyDecode::kWindowed;
};
int launch_snappy_fragments(const uint8_t* src, uint8_t* dst, const SnappyJob* jobs,
                            uint32_t n_jobs, uint32_t n_segs, uint32_t n_frags, uint32_t levels,
                            const SnappyScratch& s, SnappyOptions o, cudaStream_t stream,
                            cudaEvent_t* marks = nullptr);  // 7 events, or null
int launch_snappy_sequential(const uint8_t* src, uint8_t* dst, const SnappyJob* jobs,
                             uint32_t n_jobs, int32_t* status, cudaStream_t stream);

}  // namespace cuda_detail
}  // namespace gputok
