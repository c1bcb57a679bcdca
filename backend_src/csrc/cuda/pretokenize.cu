// GPU pretokenization and the final compaction.
//
// Piece boundaries of GPT-2's pattern
//   '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
// turn out to be a LOCAL property of each character: whether a piece starts at character
// i depends only on the characters i-3 .. i+1 of its unit. The seemingly sequential parts
// resolve locally as follows (C(i) is the class L/N/S/O of character i, S = White_Space):
//  * a whitespace run always starts a piece (no other alternative consumes \s), and inside
//    a run [s, e) the only other boundary is e-1, when e is not the end of the unit
//    (\s++$ takes a run reaching the end; \s+(?!\S) gives back exactly its last char);
//  * so a U+0020 just before a non-space is always a piece start, and it always joins the
//    following L/N/O run (' ?X++'): a non-space after U+0020 never starts a piece;
//  * a non-space after another class, or after a non-U+0020 space, starts a piece; after
//    the same class it continues the run (possessive runs never stop early);
//  * a contraction can only begin at a piece start: an apostrophe after O is swallowed by
//    the punctuation run, after U+0020 it joins ' ?[^\s\p{L}\p{N}]++'; after L, N, other
//    whitespace or at the unit start it is a start, and the contraction then covers 2 or
//    3 ASCII bytes and forces a start right after it (even before a letter).
// Hence one thread per byte decides "piece starts here" with no loop over the text, and the
// only scan is the compaction (cub::DeviceSelect) of the flags into a piece list. The CPU
// scanner (pretokenize.cpp) is the twin; tests/test_gpu.py checks they agree everywhere.
//
// Performance notes (H200, 2026-11-22): flags + select 0.65 ms for 64 MB (~100 GB/s);
// compaction 0.51 ms as a scan of one flag per byte + scatter, 0.20 ms tiled (07:34 UTC;
// 0.33 ms before the tiles' ids went through shared memory). CPU pretokenization instead
// costs ~365 ms of host time for the same 64 MB (one thread), so the GPU scanner wins at
// every size measured.
#include <thrust/iterator/counting_iterator.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include "common.cuh"
#include "kernels.cuh"
#include "pretok_device.cuh"

namespace gputok {
namespace cuda_detail {
namespace {

constexpr int kThreads = 256;

inline unsigned grid_for(size_t items, int threads, size_t cap = 1u << 20) {
  size_t g = (items + threads - 1) / threads;
  if (g < 1) g = 1;
  if (g > cap) g = cap;
  return unsigned(g);
}

__global__ void mark_units_kernel(const uint32_t* unit_off, uint32_t n_units, uint8_t* unit_start) {
  const uint32_t u = blockIdx.x * blockDim.x + threadIdx.x;
  if (u <= n_units) unit_start[unit_off[u]] = 1;
}

__global__ void piece_flags_kernel(UnicodeTableView uni, const uint8_t* __restrict__ text,
                                   uint32_t n, const uint8_t* __restrict__ unit_start,
                                   uint8_t* __restrict__ piece_flag) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    piece_flag[i] = piece_starts_at(uni, text, unit_start, i) ? 1 : 0;
}

__global__ void flags_from_pieces_kernel(const uint32_t* starts, uint32_t count, uint8_t* flag) {
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < count; p += gridDim.x * blockDim.x)
    flag[starts[p]] = 1;
}

// Compaction of `tok` (ids at the front of each piece's byte range, -1 elsewhere) into the
// flat id list plus per-unit ends. A tile of kCompactTile entries per block, 16 per thread:
//   compact_count_kernel    tokens per tile
//   cub::DeviceScan         exclusive sum over the tiles (n / 4096 + 1 items)
//   compact_scatter_kernel  each tile again: a block scan places its ids after the tiles
//                           before it, and the units ending inside the tile get their ends.
// `tok` is read twice and nothing of size n is written besides the ids. The scan of one
// flag per byte it replaces wrote and re-read an n-entry position array (aux): 0.51 ms of
// the 64 MB batch's 4.05 ms kernels.
constexpr int kCompactThreads = 256;
constexpr int kCompactItems = 16;
constexpr uint32_t kCompactTile = uint32_t(kCompactThreads) * kCompactItems;

inline uint32_t compact_tiles(uint32_t n) { return (n + kCompactTile - 1) / kCompactTile; }

// Bit k set where tok[i + k] is an id (i is a multiple of 16; tok is 256-byte aligned).
__device__ __forceinline__ uint32_t token_mask16(const int32_t* __restrict__ tok, uint32_t n,
                                                 uint32_t i, int32_t (&v)[kCompactItems]) {
  if (i + kCompactItems <= n) {
    const int4* q = reinterpret_cast<const int4*>(tok + i);
#pragma unroll
    for (int k = 0; k < kCompactItems / 4; ++k) {
      const int4 x = q[k];
      v[4 * k] = x.x;
      v[4 * k + 1] = x.y;
      v[4 * k + 2] = x.z;
      v[4 * k + 3] = x.w;
    }
  } else {
#pragma unroll
    for (int k = 0; k < kCompactItems; ++k) v[k] = i + k < n ? tok[i + k] : -1;
  }
  uint32_t mask = 0;
#pragma unroll
  for (int k = 0; k < kCompactItems; ++k) mask |= uint32_t(v[k] >= 0) << k;
  return mask;
}

__global__ void __launch_bounds__(kCompactThreads)
    compact_count_kernel(const int32_t* __restrict__ tok, uint32_t n, uint32_t* tile_count) {
  using Reduce = cub::BlockReduce<uint32_t, kCompactThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  int32_t v[kCompactItems];
  const uint32_t i = blockIdx.x * kCompactTile + threadIdx.x * kCompactItems;
  const uint32_t c = i < n ? __popc(token_mask16(tok, n, i, v)) : 0u;
  const uint32_t sum = Reduce(tmp).Sum(c);
  if (threadIdx.x == 0) tile_count[blockIdx.x] = sum;
  if (blockIdx.x == 0 && threadIdx.x == 0) tile_count[gridDim.x] = 0;  // the scan's total
}

__global__ void __launch_bounds__(kCompactThreads)
    compact_scatter_kernel(const int32_t* __restrict__ tok, uint32_t n,
                           const uint32_t* __restrict__ tile_off, int32_t* __restrict__ out,
                           const uint32_t* __restrict__ unit_off, uint32_t n_units,
                           uint32_t* __restrict__ unit_ends, uint32_t* counters) {
  using Scan = cub::BlockScan<uint32_t, kCompactThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int32_t s_ids[kCompactTile];         // the tile's ids, compacted
  __shared__ uint32_t s_before[kCompactThreads];  // ids before each thread's 16 entries
  __shared__ uint16_t s_mask[kCompactThreads];
  __shared__ uint32_t s_first_unit;
  const uint32_t base = blockIdx.x * kCompactTile;
  const uint32_t i = base + threadIdx.x * kCompactItems;
  int32_t v[kCompactItems];
  const uint32_t mask = i < n ? token_mask16(tok, n, i, v) : 0u;
  uint32_t before = 0, count = 0;
  Scan(tmp).ExclusiveSum(uint32_t(__popc(mask)), before, count);
  uint32_t k = before;
#pragma unroll
  for (int j = 0; j < kCompactItems; ++j)
    if (mask >> j & 1u) s_ids[k++] = v[j];
  const uint32_t tile_at = tile_off[blockIdx.x];
  s_before[threadIdx.x] = tile_at + before;
  s_mask[threadIdx.x] = uint16_t(mask);
  if (threadIdx.x == 0) {  // the first unit whose end is at or after this tile's start
    uint32_t lo = 0, hi = n_units;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) >> 1;
      if (unit_off[mid + 1] < base)
        lo = mid + 1;
      else
        hi = mid;
    }
    s_first_unit = lo;
  }
  __syncthreads();
  // Stores of consecutive threads are consecutive: ids often go straight to mapped pinned
  // memory (kDirectMaxBytes), where scattered 4-byte stores each cross PCIe on their own.
  // Measured (H200, 2026-11-22 07:29 UTC): a 150 KB sequence spent 100 us here with each
  // thread storing its own 16 entries' ids, against 24 us for the scan it replaced.
  for (uint32_t j = threadIdx.x; j < count; j += kCompactThreads) out[tile_at + j] = s_ids[j];
  // Units ending inside this tile: ids before their end. An end at n is the total, which
  // block 0 writes (the last tile may end exactly at n).
  const uint32_t tile_end = min(base + kCompactTile, n);
  for (uint32_t u = s_first_unit + threadIdx.x; u < n_units; u += kCompactThreads) {
    const uint32_t e = unit_off[u + 1];
    if (e >= tile_end) break;
    const uint32_t r = e - base, t = r / kCompactItems;
    unit_ends[u] = s_before[t] + __popc(s_mask[t] & ((1u << (r % kCompactItems)) - 1u));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const uint32_t total = tile_off[gridDim.x];
    counters[2] = total;
    for (uint32_t u = n_units; u > 0 && unit_off[u] >= n; --u) unit_ends[u - 1] = total;
  }
}

}  // namespace

size_t cub_temp_bytes(uint32_t n) {
  size_t a = 0, b = 0;
  thrust::counting_iterator<uint32_t> it(0);
  GPUTOK_CUDA(cub::DeviceSelect::Flagged(nullptr, a, it, (const uint8_t*)nullptr,
                                         (uint32_t*)nullptr, (uint32_t*)nullptr, n));
  GPUTOK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, b, (const uint32_t*)nullptr,
                                            (uint32_t*)nullptr, compact_tiles(n) + 1));
  return a > b ? a : b;
}

int launch_pretokenize(const ChunkDev& c, UnicodeTableView uni, cudaStream_t stream) {
  GPUTOK_CUDA(cudaMemsetAsync(c.unit_start, 0, c.n + 1, stream));
  mark_units_kernel<<<grid_for(c.n_units + 1, kThreads), kThreads, 0, stream>>>(
      c.unit_off, c.n_units, c.unit_start);
  GPUTOK_LAUNCHED("mark_units_kernel");
  piece_flags_kernel<<<grid_for(c.n, kThreads), kThreads, 0, stream>>>(uni, c.text, c.n,
                                                                       c.unit_start, c.piece_flag);
  GPUTOK_LAUNCHED("piece_flags_kernel");
  size_t bytes = c.cub_bytes;
  GPUTOK_CUDA(cub::DeviceSelect::Flagged(c.cub_temp, bytes, thrust::counting_iterator<uint32_t>(0),
                                         (const uint8_t*)c.piece_flag, c.piece_starts, c.counters,
                                         c.n, stream));
  GPUTOK_LAUNCHED("cub::DeviceSelect::Flagged");
  return 3;
}

int launch_flags_from_pieces(const ChunkDev& c, uint32_t n_pieces, cudaStream_t stream) {
  GPUTOK_CUDA(cudaMemsetAsync(c.piece_flag, 0, c.n, stream));
  flags_from_pieces_kernel<<<grid_for(n_pieces, kThreads), kThreads, 0, stream>>>(
      c.piece_starts, n_pieces, c.piece_flag);
  GPUTOK_LAUNCHED("flags_from_pieces_kernel");
  return 1;
}

size_t compact_tile_sums(uint32_t n) { return 2 * (size_t(compact_tiles(n)) + 1); }

int launch_compact(const ChunkDev& c, cudaStream_t stream) {
  const uint32_t tiles = compact_tiles(c.n);
  uint32_t* count = c.tile_sums;
  uint32_t* off = c.tile_sums + tiles + 1;
  compact_count_kernel<<<tiles, kCompactThreads, 0, stream>>>(c.tok, c.n, count);
  GPUTOK_LAUNCHED("compact_count_kernel");
  size_t bytes = c.cub_bytes;
  GPUTOK_CUDA(cub::DeviceScan::ExclusiveSum(c.cub_temp, bytes, (const uint32_t*)count, off,
                                            tiles + 1, stream));
  GPUTOK_LAUNCHED("cub::DeviceScan::ExclusiveSum");
  compact_scatter_kernel<<<tiles, kCompactThreads, 0, stream>>>(
      c.tok, c.n, off, c.ids_out, c.unit_off, c.n_units, c.unit_ends, c.counters);
  GPUTOK_LAUNCHED("compact_scatter_kernel");
  return 3;
}

}  // namespace cuda_detail
}  // namespace gputok
