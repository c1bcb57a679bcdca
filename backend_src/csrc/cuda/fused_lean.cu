// The fused mid-size path of per_word with three grid barriers instead of nine: the same
// work as fused_cooperative.cu (which stays as the ablation GpuTuning::fused_lean = false),
// scheduled so that every stage that only needs its own block's bytes runs without a barrier.
//
//   A  each block: unit starts of its byte range (+ a few bytes each side) in shared memory,
//      its piece starts compacted in order into piece_starts[lo, lo + count)      | sync
//   B  each block, its own pieces (the next piece's start ends the last one): a cache hit,
//      a single byte or the register merge loop; longer pieces are listed with their
//      length. Every piece adds its ids' count to the block(s) whose byte range holds the
//      ids (ids sit at the front of the piece's range). With GpuTuning::lean_take_early,
//      a warp done with its own pieces takes listed ones while others still list theirs | sync
//   C  the listed pieces (nobody took yet), one warp each                            | sync
//   D  each block: ids of its range compacted after the blocks before it (their counts are
//      complete), and the ends of the units that end in its range
//
// Where the old kernel's barriers went: zeroing unit_start and marking unit starts (two; a
// block now marks the starts of its own window), counting piece flags before their scan (one:
// each block compacts its starts into its own slots, the piece list is per block), counting
// tokens before their scan (one: B and C count while they merge) and the unit ends after the
// scan (one: the block that scans a unit's end writes it). A grid barrier over 132 blocks on
// the H100 costs a few microseconds, and the short texts this path serves are latency-bound.
// Measured (H100, 2026-11-25 14:03 UTC, bench/bench_gpu_latency.py via scripts/gpu_latency.sh,
// GpuTuning.profile, one run): a 16K-token text (45 KB) 47.7 us in the kernel (starts 5.6,
// pieces 13.8, warps 26.5, ids 1.8) against the nine-barrier kernel's 56.4; end to end 86.1
// us against 94.5, 4K tokens 67.8 against 73.7, 32K 109.4 against 116.9. The warp pieces
// (26 us) still begin only after the slowest one-thread piece of any block: taking them
// early (GpuTuning::lean_take_early) moved that time into stage B instead of saving it
// (pieces + warps 40 us either way; 4K tokens 81 us end to end), so it is not the default.
// Exactness: the same device functions as every other path (piece_starts_at, piece_as_token,
// merge_thread, merge_listed_piece), only scheduled differently, so the arguments in
// pretokenize.cu and merge_per_word.cu hold unchanged. Data another block wrote before a
// barrier is read with __ldcg (L2).
#include <cooperative_groups.h>

#include <algorithm>

#include "common.cuh"
#include "coop_device.cuh"
#include "kernels.cuh"
#include "learned_cache.cuh"
#include "per_word_device.cuh"
#include "pretok_device.cuh"

namespace gputok {
namespace cuda_detail {
namespace {

namespace cg = cooperative_groups;

// piece_starts_at reads unit starts from 3 bytes before to 4 after the byte it decides.
constexpr uint32_t kWindowPad = 16;
// Misses merged by one thread are at most warp_min bytes (8 for chunks up to 1 MiB, the
// only ones this kernel sees at the default tuning): registers for 8 parts, half the
// unrolled loop of 16 per merge (not timed apart from the rest of this kernel); longer ones
// (a warp_min tuned above 8) take merge_thread's local-memory loop.
constexpr int kLeanRegPiece = 8;
constexpr uint32_t kNone = 0xFFFFFFFFu;

struct LeanShared {
  CoopScanShared s;
  CoopWarpShared w;
  uint32_t first_unit;  // the first unit whose start is in the window
  uint32_t next_start;  // the first piece start after this block's range (n if none)
  uint32_t own_tokens;  // ids that this block's pieces put in its own range (stage B)
  uint8_t starts[kLeanSpan + kWindowPad];  // unit starts over [wlo, wlo + span + pad)
};

// A block's window of unit starts, indexed by byte offset as the chunk's flag array is.
struct WindowStarts {
  const uint8_t* w;
  uint32_t base;
  __device__ __forceinline__ uint8_t operator[](uint32_t i) const { return w[i - base]; }
};

// Counts m ids at byte positions [s, s + m) for the blocks whose ranges hold them: into `own`
// (shared) for block `b`, into sums[] otherwise. A short piece's ids straddle at most two.
__device__ __forceinline__ void add_tokens(uint32_t* own, uint32_t b, uint32_t* sums, uint32_t span,
                                           uint32_t s, uint32_t m) {
  for (uint32_t x = s, end = s + m; x < end;) {
    const uint32_t bb = x / span, stop = min(end, (bb + 1) * span);
    atomicAdd(own && bb == b ? own : sums + bb, stop - x);
    x = stop;
  }
}

// unit_ends[u] = at for every unit that ends at byte i (empty units share their offset).
__device__ __forceinline__ void unit_ends_at(const ChunkDev& c, uint32_t i, uint32_t at) {
  for (uint32_t u = lower_bound_u32(c.unit_off + 1, c.n_units, i);
       u < c.n_units && c.unit_off[u + 1] == i; ++u) {
    c.unit_ends[u] = at;
    if (c.host_head) c.host_head[16 + u] = at;
  }
}

// Stage A: the block's window of unit starts, then its piece starts, compacted in order into
// piece_starts[lo, lo + count). Returns the count.
__device__ uint32_t lean_pieces(LeanShared& sh, UnicodeTableView uni, const ChunkDev& c,
                                uint32_t lo, uint32_t span, uint32_t hi, uint32_t wlo) {
  const uint32_t wsize = span + kWindowPad;  // span <= kLeanSpan
  for (uint32_t k = threadIdx.x; k < wsize; k += kCoopThreads) sh.starts[k] = 0;
  if (threadIdx.x == 0) sh.first_unit = lower_bound_u32(c.unit_off, c.n_units + 1, wlo);
  __syncthreads();
  const uint32_t whi = wlo + wsize;
  for (uint32_t u = sh.first_unit + threadIdx.x; u <= c.n_units; u += kCoopThreads) {
    const uint32_t off = c.unit_off[u];  // sorted: every later unit is past the window too
    if (off >= whi) break;
    sh.starts[off - wlo] = 1;
  }
  __syncthreads();
  const WindowStarts us{sh.starts, wlo};
  return scan_range(
      sh.s, 0, lo, span, hi, [&](uint32_t i) { return piece_starts_at(uni, c.text, us, i); },
      [&](uint32_t i, bool, bool f, uint32_t at) {
        if (f) c.piece_starts[lo + at] = i;
      });
}

// The first piece start after block b's range: the first start of the next block that has
// any (one warp looks at 32 blocks at a time), else n.
__device__ uint32_t next_piece_start(const ChunkDev& c, const uint32_t* sums_pieces, uint32_t b,
                                     uint32_t nb, uint32_t span) {
  const uint32_t lane = threadIdx.x & 31;
  for (uint32_t base = b + 1; base < nb; base += 32) {
    const uint32_t bb = base + lane;
    const unsigned any = __ballot_sync(0xFFFFFFFFu, bb < nb && __ldcg(sums_pieces + bb) != 0);
    if (any) return __ldcg(c.piece_starts + min(c.n, (base + __ffs(any) - 1) * span));
  }
  return c.n;
}

// Listed pieces are 64-bit words (length << 32 | start), zeroed in stage A: a nonzero word is
// written, and the length of a listed piece is never 0.
__device__ __forceinline__ uint64_t* listed(const ChunkDev& c) {
  return reinterpret_cast<uint64_t*>(c.long_list);
}

// One warp: listed piece q (its word is being written if it is not yet: whoever listed it
// holds that slot), merged, its ids added to the counts (global atomics: a listed piece may
// be any block's).
__device__ void merge_listed_at(const ChunkDev& c, VocabView v, const PieceCacheView& cache,
                                LeanShared& sh, uint32_t* sums_tokens, uint32_t span, bool multi,
                                uint32_t q) {
  const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  uint64_t e = 0;
  if (lane == 0) {
    volatile uint64_t* w = listed(c) + q;
    while ((e = *w) == 0) {
    }
  }
  e = __shfl_sync(kFull, e, 0);
  const uint32_t s = uint32_t(e), len = uint32_t(e >> 32);
  const int m = warp_piece_ids(v, cache, c.text, s, int(len), len <= uint32_t(kCoopWarpCap),
                               WarpParts{sh.w.A[warp], sh.w.R[warp], sh.w.F[warp], sh.w.MG[warp]},
                               c.tok, c.aux, c.piece_flag, int(lane), multi);
  if (lane == 0) add_tokens(nullptr, 0, sums_tokens, span, s, uint32_t(m));
}

// Stage B's end, one warp (GpuTuning::lean_take_early): while pieces are listed that nobody
// has taken, takes one (a ticket: counters[3]) and merges it. A ticket drawn just after the
// last listed piece was taken names a piece not listed yet: it is returned, for stage C.
// (A compare-and-swap that took only listed pieces ran 2-40x slower: a thousand warps
// retrying on one word.)
__device__ uint32_t merge_early(const ChunkDev& c, VocabView v, const PieceCacheView& cache,
                                LeanShared& sh, uint32_t* sums_tokens, uint32_t span, bool multi) {
  const uint32_t lane = threadIdx.x & 31;
  for (;;) {
    uint32_t q = kNone, now = 0;
    if (lane == 0) {
      volatile uint32_t* vc = c.counters;
      if (vc[3] < vc[1]) {
        q = atomicAdd(&c.counters[3], 1u);
        now = q < vc[1];
      }
    }
    q = __shfl_sync(kFull, q, 0);
    if (q == kNone || !__shfl_sync(kFull, now, 0)) return q;
    merge_listed_at(c, v, cache, sh, sums_tokens, span, multi, q);
  }
}

__global__ void __launch_bounds__(kCoopThreads)
    fused_lean_kernel(UnicodeTableView uni, VocabView v, PieceCacheView cache, ChunkDev c,
                      uint32_t warp_min, bool multi, bool take_early) {
  __shared__ LeanShared sh;
  cg::grid_group grid = cg::this_grid();
  const uint32_t n = c.n, tid = threadIdx.x, b = blockIdx.x, nb = gridDim.x;
  const uint32_t span = coop_span(n, nb);  // <= kLeanSpan: the launcher sizes the grid
  const uint32_t lo = min(n, b * span), hi = min(n, lo + span);
  const uint32_t wlo = lo < 4 ? 0 : lo - 4;
  uint32_t* sums_pieces = c.block_sums;
  uint32_t* sums_tokens = c.block_sums + nb;
  stamp(c, 0);
  if (b == 0 && tid == 0) host_stamp(c, 0);

  // A: piece starts of the range, per block.
  if (tid == 0) sh.own_tokens = 0;
  const uint32_t np = lean_pieces(sh, uni, c, lo, span, hi, wlo);
  if (tid == 0) {
    sums_pieces[b] = np;
    sums_tokens[b] = 0;
  }
  if (b == 0 && tid < 4) c.counters[tid] = 0;  // [0] pieces, [1] listed, [3] taken
  for (uint32_t q = b * kCoopThreads + tid; q < c.long_cap; q += nb * kCoopThreads)
    listed(c)[q] = 0;
  grid.sync();
  stamp(c, 1);

  // B: the block's pieces, one thread each; long ones listed as (start, length), and taken
  // by whichever warp is free.
  if (tid < 32) {
    const uint32_t next = next_piece_start(c, sums_pieces, b, nb, span);
    if (tid == 0) sh.next_start = next;
  }
  if (tid == 0 && np) atomicAdd(&c.counters[0], np);
  __syncthreads();
  for (uint32_t k = tid; k < np; k += kCoopThreads) {
    const uint32_t s = __ldcg(c.piece_starts + lo + k);
    const uint32_t len = (k + 1 < np ? __ldcg(c.piece_starts + lo + k + 1) : sh.next_start) - s;
    const int m =
        piece_ids_thread<kLeanRegPiece>(v, cache, c.text + s, int(len), int(warp_min), c.tok + s);
    if (m < 0) {
      const uint32_t q = atomicAdd(&c.counters[1], 1u);
      atomicExch(reinterpret_cast<unsigned long long*>(listed(c) + q), (uint64_t(len) << 32) | s);
    } else {
      add_tokens(&sh.own_tokens, b, sums_tokens, span, s, uint32_t(m));
    }
  }
  const uint32_t pending =
      take_early ? merge_early(c, v, cache, sh, sums_tokens, span, multi) : kNone;
  __syncthreads();
  if (tid == 0 && sh.own_tokens) atomicAdd(sums_tokens + b, sh.own_tokens);
  grid.sync();
  stamp(c, 2);

  // C: what is still listed, one warp each: in turn, or by tickets after those taken in B.
  const uint32_t n_listed = __ldcg(c.counters + 1);
  const uint32_t warp = tid >> 5, lane = tid & 31;
  if (!take_early) {
    for (uint32_t q = b * kCoopWarps + warp; q < n_listed; q += nb * kCoopWarps)
      merge_listed_at(c, v, cache, sh, sums_tokens, span, multi, q);
  } else {
    uint32_t q = pending;
    for (;;) {
      if (q == kNone) {
        q = lane == 0 ? atomicAdd(&c.counters[3], 1u) : 0;
        q = __shfl_sync(kFull, q, 0);
      }
      if (q >= n_listed) break;
      merge_listed_at(c, v, cache, sh, sums_tokens, span, multi, q);
      q = kNone;
    }
  }
  grid.sync();
  stamp(c, 3);

  // D: ids compacted after the blocks before this one; unit ends where they fall.
  const WindowStarts us{sh.starts, wlo};
  const uint32_t total = scan_range(
      sh.s, block_prefix(sh.s, sums_tokens, b), lo, span, hi,
      [&](uint32_t i) { return __ldcg(c.tok + i) >= 0; },
      [&](uint32_t i, bool in, bool f, uint32_t at) {
        if (f) c.ids_out[at] = __ldcg(c.tok + i);
        if (in && us[i]) unit_ends_at(c, i, at);
      });
  if (b == nb - 1 && tid == 0) {  // the last block's end is the total; units ending at n
    unit_ends_at(c, n, total);
    c.counters[2] = total;
    if (c.host_head) {  // mapped pinned memory: the host reads it after the sync
      c.host_head[0] = __ldcg(c.counters);
      c.host_head[1] = n_listed;
      c.host_head[2] = total;
      host_stamp(c, 1);
    }
  }
  stamp(c, 4);
}

}  // namespace

int fused_lean_max_blocks(int n_sms) { return coop_resident_blocks(fused_lean_kernel, n_sms); }

int launch_fused_lean(const ChunkDev& c, UnicodeTableView uni, VocabView v, PieceCacheView cache,
                      uint32_t warp_min, bool multi, bool take_early, int max_blocks,
                      cudaStream_t stream) {
  // One tile of bytes per block at least, at most kLeanSpan bytes per block (the window),
  // and never more blocks than can be resident at once (a grid barrier with a block that
  // cannot be scheduled would never return; the launch itself refuses such a grid).
  const uint32_t tiles = (c.n + kCoopThreads - 1) / kCoopThreads;
  const uint32_t least = (c.n + kLeanSpan - 1) / kLeanSpan;
  const unsigned grid = std::max({1u, least, std::min<uint32_t>(uint32_t(max_blocks), tiles)});
  if (grid > unsigned(max_blocks) || grid > unsigned(kMaxCoopBlocks))
    throw CudaError("fused_lean_kernel: " + std::to_string(c.n) + " bytes need " +
                    std::to_string(grid) + " blocks, over the " + std::to_string(max_blocks) +
                    " that can be resident");
  ChunkDev cc = c;
  void* args[] = {&uni, &v, &cache, &cc, &warp_min, &multi, &take_early};
  GPUTOK_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(fused_lean_kernel), dim3(grid),
                                          dim3(kCoopThreads), args, 0, stream));
  GPUTOK_LAUNCHED("fused_lean_kernel");
  return 1;
}

}  // namespace cuda_detail
}  // namespace gputok
