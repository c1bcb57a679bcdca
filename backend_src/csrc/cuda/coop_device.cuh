// Block-level pieces shared by the fused cooperative kernels (fused_cooperative.cu,
// fused_lean.cu): shared-memory layouts, the profile's stage stamps, and in-order scans of a
// block's byte range in tiles of kCoopThreads.
#pragma once

#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common.cuh"
#include "kernels.cuh"

namespace gputok {
namespace cuda_detail {

constexpr int kCoopThreads = 256;
constexpr int kCoopWarps = kCoopThreads / 32;
constexpr int kCoopWarpCap = 256;  // parts per warp in shared memory, as per_word_long_kernel
constexpr int kCoopRegPiece = 16;  // misses up to this long merge in registers

using CoopScan = cub::BlockScan<uint32_t, kCoopThreads>;
using CoopReduce = cub::BlockReduce<uint32_t, kCoopThreads>;

struct CoopScanShared {
  union {
    typename CoopScan::TempStorage scan;
    typename CoopReduce::TempStorage reduce;
  } tmp;
  uint32_t prefix;
};

// Each warp's parts for merge_listed_piece (per_word_device.cuh's WarpParts).
struct CoopWarpShared {
  int32_t A[kCoopWarps][kCoopWarpCap];
  uint32_t R[kCoopWarps][kCoopWarpCap];
  int32_t MG[kCoopWarps][kCoopWarpCap];
  uint8_t F[kCoopWarps][kCoopWarpCap];
};

// GpuTuning::profile: block 0 stamps the global timer (ns) at the start and after every
// barrier, so the profile line can split the kernel by stage.
__device__ __forceinline__ void stamp(const ChunkDev& c, int k) {
  if (c.phase_ns && blockIdx.x == 0 && threadIdx.x == 0) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    c.phase_ns[k] = t;
  }
}

// The fused kernels' own clock for a call's kernel time (GpuEncoder::encode's return) when
// no CUDA events are recorded (encode_chunk.cu): the global timer (ns) written by one thread
// into mapped pinned memory, host_head[kHostStampAt, +2) at the start and [+2, +4) at the end,
// which the host reads after its sync. Two event records and an elapsed-time query cost the host
// more than the kernel of a short text gains from anything else (the notes in encode_chunk.cu).
__device__ __forceinline__ void host_stamp(const ChunkDev& c, int k) {
  if (!c.host_head) return;
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  c.host_head[kHostStampAt + 2 * k] = uint32_t(t);
  c.host_head[kHostStampAt + 2 * k + 1] = uint32_t(t >> 32);
}

// Sum of sums[0, b), computed by the whole block (after a grid barrier).
__device__ inline uint32_t block_prefix(CoopScanShared& sh, const uint32_t* sums, uint32_t b) {
  uint32_t acc = 0;
  for (uint32_t k = threadIdx.x; k < b; k += kCoopThreads) acc += __ldcg(sums + k);
  const uint32_t total = CoopReduce(sh.tmp.reduce).Sum(acc);
  if (threadIdx.x == 0) sh.prefix = total;
  __syncthreads();
  const uint32_t p = sh.prefix;
  __syncthreads();  // tmp and prefix are reused next
  return p;
}

// How many i in [lo, hi) satisfy pred(i), over the block's tiles [lo, lo + span) (pred runs
// only for i < hi). All threads of the block call it.
template <class Pred>
__device__ uint32_t count_range(uint32_t lo, uint32_t span, uint32_t hi, Pred pred) {
  uint32_t count = 0;
  for (uint32_t t = lo; t < lo + span; t += kCoopThreads) {
    const uint32_t i = t + threadIdx.x;
    count += uint32_t(__syncthreads_count(i < hi && pred(i)));
  }
  return count;
}

// In order over the same tiles: emit(i, in_range, flagged, carry + rank among the flagged),
// starting from `carry`; returns carry + the number flagged.
template <class Flag, class Emit>
__device__ uint32_t scan_range(CoopScanShared& sh, uint32_t carry, uint32_t lo, uint32_t span,
                               uint32_t hi, Flag flag, Emit emit) {
  for (uint32_t t = lo; t < lo + span; t += kCoopThreads) {
    const uint32_t i = t + threadIdx.x;
    const bool in = i < hi;
    const uint32_t f = in && flag(i) ? 1u : 0u;
    uint32_t pos, agg;
    CoopScan(sh.tmp.scan).ExclusiveSum(f, pos, agg);
    emit(i, in, f != 0, carry + pos);
    carry += agg;
    __syncthreads();  // the scan's temp storage is reused
  }
  return carry;
}

// Bytes per block of a cooperative grid of nb blocks over n bytes: whole tiles.
__host__ __device__ __forceinline__ uint32_t coop_span(uint32_t n, uint32_t nb) {
  return ((n + nb - 1) / nb + kCoopThreads - 1) / kCoopThreads * kCoopThreads;
}

// Blocks of `kernel` (kCoopThreads each) that fit on the device at once, capped at
// kMaxCoopBlocks; 0 when the device cannot launch cooperative kernels.
template <class Kernel>
int coop_resident_blocks(Kernel kernel, int n_sms) {
  int device = 0, coop = 0, per_sm = 0;
  GPUTOK_CUDA(cudaGetDevice(&device));
  GPUTOK_CUDA(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device));
  if (!coop) return 0;
  GPUTOK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kCoopThreads, 0));
  return std::min(per_sm * n_sms, kMaxCoopBlocks);
}

}  // namespace cuda_detail
}  // namespace gputok
