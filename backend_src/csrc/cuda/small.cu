// The fused small-input path of per_word: one block of 1024 threads does the whole chunk
// (unit starts, piece flags, piece list, merges, compaction, unit ends) in ONE launch.
//
// Why: below ~4 KB the multi-kernel pipeline (~10 launches incl. CUB's) costs ~50 us of
// launch gaps for a few microseconds of work, which is what made the GPU lose to tiktoken
// at 256 tokens. Measured (H200, 2026-11-22, bench/bench_gpu.py): 256 tokens 0.072 ms end to
// end / 0.028 ms kernel, against 0.099 / 0.058 ms on the multi-kernel path (tiktoken 0.113).
// With a 16 KB limit the 4K-token sequence took 0.39 ms instead of 0.20 ms: one block has
// only 32 warps for long pieces, hence 4 KB. Same device functions as the multi-kernel path
// (pretok_device.cuh, per_word_device.cuh), so the same exactness argument holds; stages
// are separated by __syncthreads instead of kernel boundaries, and the two scans are
// block-wide CUB scans over 1024-byte tiles with a running carry.
#include <cub/block/block_scan.cuh>

#include "common.cuh"
#include "kernels.cuh"
#include "learned_cache.cuh"
#include "per_word_device.cuh"
#include "pretok_device.cuh"

namespace gputok {
namespace cuda_detail {
namespace {

constexpr int kSmallThreads = 1024;
constexpr int kLongWarps = 8;
constexpr int kWarpCapSmall = 512;

__global__ void __launch_bounds__(kSmallThreads)
    fused_small_kernel(UnicodeTableView uni, VocabView v, PieceCacheView cache, ChunkDev c) {
  using Scan = cub::BlockScan<int, kSmallThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ uint32_t s_long;
  __shared__ uint32_t s_long_list[kSmallMaxBytes / (kShortPiece + 1) + 1];
  __shared__ int32_t sA[kLongWarps][kWarpCapSmall];
  __shared__ uint32_t sR[kLongWarps][kWarpCapSmall];
  __shared__ uint8_t sF[kLongWarps][kWarpCapSmall];
  const uint32_t n = c.n;
  const int tid = threadIdx.x;

  for (uint32_t i = tid; i <= n; i += kSmallThreads) c.unit_start[i] = 0;
  if (tid == 0) s_long = 0;
  __syncthreads();
  for (uint32_t u = tid; u <= c.n_units; u += kSmallThreads) c.unit_start[c.unit_off[u]] = 1;
  __syncthreads();

  // Piece starts, compacted in order.
  int np = 0;
  for (uint32_t base = 0; base < n; base += kSmallThreads) {
    const uint32_t i = base + tid;
    const int f = (i < n && piece_starts_at(uni, c.text, c.unit_start, i)) ? 1 : 0;
    int pos, agg;
    Scan(scan_tmp).ExclusiveSum(f, pos, agg);
    if (f) c.piece_starts[np + pos] = i;
    np += agg;
    __syncthreads();
  }

  // Short pieces by thread; long ones listed for the warps.
  for (int p = tid; p < np; p += kSmallThreads) {
    const uint32_t s = c.piece_starts[p];
    const uint32_t e = p + 1 < np ? c.piece_starts[p + 1] : n;
    const uint32_t len = e - s;
    // A piece over kShortPiece bytes is left (-1) for a warp.
    if (piece_ids_thread<16>(v, cache, c.text + s, int(len), kShortPiece, c.tok + s) < 0)
      s_long_list[atomicAdd(&s_long, 1u)] = uint32_t(p);
  }
  __syncthreads();
  // Long pieces: every warp takes some; the first kLongWarps hold parts in shared memory
  // (up to kWarpCapSmall), the others work in global memory. A long piece's passes are the
  // critical path of a small input, so both parallelism and fast memory matter.
  const uint32_t nl = s_long;
  const int warp = tid >> 5, lane = tid & 31;
  for (uint32_t q = warp; q < nl; q += kSmallThreads / 32) {
    const uint32_t p = s_long_list[q];
    const uint32_t s = c.piece_starts[p];
    const uint32_t e = p + 1 < uint32_t(np) ? c.piece_starts[p + 1] : n;
    const int len = int(e - s);
    const bool fits = warp < kLongWarps && len <= kWarpCapSmall;
    const int w = fits ? warp : 0;  // warps past kLongWarps have no shared parts
    warp_piece_ids(v, cache, c.text, s, len, fits, WarpParts{sA[w], sR[w], sF[w], nullptr}, c.tok,
                   c.aux, c.piece_flag, lane, true);
  }
  __syncthreads();

  // Compaction by position; aux becomes the exclusive scan (pos[n] = total).
  int total = 0;
  for (uint32_t base = 0; base <= n; base += kSmallThreads) {
    const uint32_t i = base + tid;
    const int32_t t = i < n ? c.tok[i] : -1;
    const int f = t >= 0 ? 1 : 0;
    int pos, agg;
    Scan(scan_tmp).ExclusiveSum(f, pos, agg);
    if (i <= n) c.aux[i] = total + pos;
    if (f) c.ids_out[total + pos] = t;
    total += agg;
    __syncthreads();
  }
  for (uint32_t u = tid; u < c.n_units; u += kSmallThreads)
    c.unit_ends[u] = uint32_t(c.aux[c.unit_off[u + 1]]);
  if (tid == 0) {
    c.counters[0] = uint32_t(np);
    c.counters[1] = nl;
    c.counters[2] = uint32_t(total);
  }
}

}  // namespace

int launch_fused_small(const ChunkDev& c, UnicodeTableView uni, VocabView v, PieceCacheView cache,
                       cudaStream_t stream) {
  fused_small_kernel<<<1, kSmallThreads, 0, stream>>>(uni, v, cache, c);
  GPUTOK_LAUNCHED("fused_small_kernel");
  return 1;
}

}  // namespace cuda_detail
}  // namespace gputok
