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
// compaction (scan + scatter) 0.51 ms. CPU pretokenization instead costs ~365 ms of host
// time for the same 64 MB (one thread), so the GPU scanner wins at every size measured.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

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

struct IsToken {
  const int32_t* tok;
  uint32_t n;
  __host__ __device__ uint32_t operator()(uint32_t i) const {
    return i < n && tok[i] >= 0 ? 1u : 0u;
  }
};

__global__ void scatter_kernel(const int32_t* __restrict__ tok, const int32_t* __restrict__ pos,
                               uint32_t n, int32_t* __restrict__ out, const uint32_t* unit_off,
                               uint32_t n_units, uint32_t* unit_ends, uint32_t* counters) {
  const uint32_t stride = gridDim.x * blockDim.x;
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  for (uint32_t i = t; i < n; i += stride) {
    const int32_t id = tok[i];
    if (id >= 0) out[pos[i]] = id;
  }
  for (uint32_t u = t; u < n_units; u += stride) unit_ends[u] = uint32_t(pos[unit_off[u + 1]]);
  if (t == 0) counters[2] = uint32_t(pos[n]);
}

}  // namespace

size_t cub_temp_bytes(uint32_t n) {
  size_t a = 0, b = 0;
  thrust::counting_iterator<uint32_t> it(0);
  GPUTOK_CUDA(cub::DeviceSelect::Flagged(nullptr, a, it, (const uint8_t*)nullptr,
                                         (uint32_t*)nullptr, (uint32_t*)nullptr, n));
  auto flags = thrust::make_transform_iterator(it, IsToken{nullptr, n});
  GPUTOK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, b, flags, (int32_t*)nullptr, n + 1));
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

int launch_compact(const ChunkDev& c, cudaStream_t stream) {
  size_t bytes = c.cub_bytes;
  auto flags =
      thrust::make_transform_iterator(thrust::counting_iterator<uint32_t>(0), IsToken{c.tok, c.n});
  GPUTOK_CUDA(cub::DeviceScan::ExclusiveSum(c.cub_temp, bytes, flags, c.aux, c.n + 1, stream));
  GPUTOK_LAUNCHED("cub::DeviceScan::ExclusiveSum");
  scatter_kernel<<<grid_for(c.n > c.n_units ? c.n : c.n_units, kThreads), kThreads, 0, stream>>>(
      c.tok, c.aux, c.n, c.ids_out, c.unit_off, c.n_units, c.unit_ends, c.counters);
  GPUTOK_LAUNCHED("scatter_kernel");
  return 2;
}

}  // namespace cuda_detail
}  // namespace gputok
