// The stages of the GPU snappy decode (parquet.cu runs them in order, between its profile
// marks): launchers of the tag walk that finds each 64 KiB fragment's first tag
// (snappy_walks.cu: segments, extend, jumps, chain, starts) and of the decode itself
// (snappy_decode.cu), and the device lookup both halves use. Private to corpus/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "snappy_kernels.cuh"

namespace gputok {
namespace cuda_detail {

// The job of segment (by_seg) or fragment x: the last job whose first index is <= x.
__device__ __forceinline__ uint32_t find_job(const SnappyJob* jobs, uint32_t n_jobs, uint32_t x,
                                             bool by_seg) {
  uint32_t lo = 0, hi = n_jobs;  // last job whose first index <= x
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) >> 1;
    if ((by_seg ? jobs[mid].seg0 : jobs[mid].frag0) <= x)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Each launches its kernels on `stream` and checks the launches (GPUTOK_LAUNCHED).
// 1. Every segment's walk; 1b. each walk extended until it meets a later one.
void launch_snappy_segments(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                            uint32_t n_segs, uint32_t seg_shift, const SnappyScratch& s,
                            cudaStream_t stream);
void launch_snappy_extend(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                          uint32_t n_segs, const SnappyScratch& s, cudaStream_t stream);
// 2. The chain by pointer jumping (`levels` doubling rounds); 2b. the serial chain for the jobs
// it left pending (every job when there are no segments).
void launch_snappy_jumps(const SnappyJob* jobs, uint32_t n_jobs, uint32_t n_segs, uint32_t levels,
                         uint32_t seg_shift, const SnappyScratch& s, cudaStream_t stream);
void launch_snappy_chain(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                         uint32_t seg_shift, const SnappyScratch& s, cudaStream_t stream);
// 3. Each fragment's first tag.
void launch_snappy_starts(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                          uint32_t n_frags, const SnappyScratch& s, cudaStream_t stream);
// 4. One warp per fragment, as `mode` says (SnappyDecode).
void launch_snappy_decode(const uint8_t* src, uint8_t* dst, const SnappyJob* jobs, uint32_t n_jobs,
                          uint32_t n_frags, const SnappyScratch& s, SnappyDecode mode,
                          cudaStream_t stream);

}  // namespace cuda_detail
}  // namespace gputok
