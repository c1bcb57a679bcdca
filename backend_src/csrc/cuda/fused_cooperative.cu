// The fused mid-size path of per_word: the whole chunk (unit starts, piece flags, piece list,
// merges, compaction, unit ends) in ONE cooperative launch of a grid of co-resident blocks,
// the stages separated by grid-wide barriers (cooperative_groups grid.sync) instead of kernel
// boundaries.
//
// Why: between the fused one-block kernel (small.cu, <= 4 KB) and ~128 KB, the multi-kernel
// pipeline is latency-bound. A 16K-token sequence (45 KB) took 0.110 ms of kernels for a few
// microseconds of work: ~12 launches (CUB's select and scan are two each) with their gaps,
// and the warp pieces queued behind the one-thread pieces. One block (small.cu) is too
// narrow there (it took 0.39 ms at 16 KB); a grid of blocks that sync costs a few
// microseconds per barrier instead of a launch each.
//
// Stages, each a loop over the block's contiguous byte range [lo, hi) or grid-strided:
//   0  zero unit_start and the counters                     | sync
//   1  mark unit starts                                     | sync
//   2a piece flags of the range, counted per block          | sync
//   2b piece starts compacted: block prefix + BlockScan     | sync
//   3  one thread per piece: cache hit, single byte, or the register merge loop for
//      misses of <= warp_min bytes; longer pieces listed    | sync
//   4  one warp per listed piece (merge_warp)               | sync
//   5a tokens of the range counted per block                | sync
//   5b ids compacted, aux = exclusive scan of token flags   | sync
//   6  unit ends
// The kernel zeroes its own counters (stage 0) and, when the encoder passes host_head (mapped
// pinned memory), writes the counts and unit ends there as it does the ids, so the host
// needs no memset and no copy back.
// Exactness: the same device functions as the other paths (pretok_device.cuh's
// piece_starts_at, per_word_device.cuh's piece_as_token / merge_short_regs / merge_warp), so
// the arguments in pretokenize.cu and merge_per_word.cu hold unchanged; only the scheduling
// differs. Data another block wrote before a barrier is read with __ldcg (L2), never from a
// possibly stale L1 line.
//
// Performance notes (H200, 2026-11-22 05:39 UTC, GpuTuning::profile, one 76 KB sequence):
// kernel 0.070 ms (0.096 for the multi-kernel pipeline): zeroing + unit starts 2.5 us, flags
// 8.7, piece list 2.7, one-thread pieces 17, warp pieces 25 (its critical path: CJK runs of
// ~100 bytes, 3-4 passes each, every pass a few dependent pair-table loads), compaction 5.
// One block per SM beat all ~4 resident blocks per SM (0.088 vs 0.105 ms, the barriers cost
// less) and half an SM each (0.119). The size limit (kFusedMaxBytes) is set in gpu_encoder.cu.
#include <cooperative_groups.h>

#include <algorithm>

#include "common.cuh"
#include "coop_device.cuh"
#include "kernels.cuh"
#include "per_word_device.cuh"
#include "pretok_device.cuh"

namespace gputok {
namespace cuda_detail {
namespace {

namespace cg = cooperative_groups;

struct CoopShared {
  CoopScanShared s;
  CoopWarpShared w;
};

__global__ void __launch_bounds__(kCoopThreads)
    fused_cooperative_kernel(UnicodeTableView uni, VocabView v, PieceCacheView cache, ChunkDev c,
                             uint32_t warp_min, bool multi) {
  __shared__ CoopShared sh;
  cg::grid_group grid = cg::this_grid();
  const uint32_t n = c.n, tid = threadIdx.x, b = blockIdx.x, nb = gridDim.x;
  const uint32_t gtid = b * kCoopThreads + tid, gstride = nb * kCoopThreads;
  // This block's byte range, whole tiles of kCoopThreads.
  const uint32_t span = coop_span(n, nb);
  const uint32_t lo = min(n, b * span), hi = min(n, lo + span);
  uint32_t* sums_pieces = c.block_sums;
  uint32_t* sums_tokens = c.block_sums + nb;
  stamp(c, 0);

  // 0, 1: unit starts (and the counters, so the host needs no memset).
  for (uint32_t i = gtid; i <= n; i += gstride) c.unit_start[i] = 0;
  if (gtid < 16) c.counters[gtid] = 0;
  grid.sync();
  stamp(c, 1);
  for (uint32_t u = gtid; u <= c.n_units; u += gstride) c.unit_start[c.unit_off[u]] = 1;
  grid.sync();
  stamp(c, 2);

  // 2a: piece flags, counted.
  const uint32_t n_flags = count_range(lo, span, hi, [&](uint32_t i) {
    const bool f = piece_starts_at(uni, c.text, c.unit_start, i);
    c.piece_flag[i] = uint8_t(f);
    return f;
  });
  if (tid == 0) sums_pieces[b] = n_flags;
  grid.sync();
  stamp(c, 3);

  // 2b: piece starts, in order (piece_flag[i] was written by this thread in 2a).
  {
    const uint32_t end = scan_range(
        sh.s, block_prefix(sh.s, sums_pieces, b), lo, span, hi,
        [&](uint32_t i) { return c.piece_flag[i] != 0; },
        [&](uint32_t i, bool, bool f, uint32_t at) {
          if (f) c.piece_starts[at] = i;
        });
    if (b == nb - 1 && tid == 0) c.counters[0] = end;  // the last block's end is the total
  }
  grid.sync();
  stamp(c, 4);

  // 3: one thread per piece: a cache hit, a single byte, or the register merge loop for
  // misses of up to warp_min bytes; longer pieces are listed for the warps.
  // (Tried: starting the pieces over kShortPiece bytes on their warps in this stage, beside
  // the one-thread pieces: 0.088 -> 0.108 ms for 76 KB; the listing in 2b cost 5 us and
  // the warp pieces did not get faster.)
  const uint32_t np = __ldcg(c.counters);
  for (uint32_t p = gtid; p < np; p += gstride) {
    const uint32_t s = __ldcg(c.piece_starts + p);
    const uint32_t e = p + 1 < np ? __ldcg(c.piece_starts + p + 1) : n;
    const uint32_t len = e - s;
    if (len > uint32_t(kShortPiece)) {
      c.long_list[atomicAdd(&c.counters[1], 1u)] = p;
    } else if (!piece_as_token(v, cache, c.text + s, int(len), c.tok + s)) {
      if (len > warp_min)
        c.long_list[atomicAdd(&c.counters[1], 1u)] = p;
      else
        merge_thread<kCoopRegPiece>(v, c.text + s, int(len), c.tok + s);
    }
  }
  grid.sync();
  stamp(c, 5);

  // 4: one warp per listed piece.
  const uint32_t n_listed = __ldcg(c.counters + 1);
  {
    const uint32_t warp = tid >> 5, lane = tid & 31;
    for (uint32_t q = b * kCoopWarps + warp; q < n_listed; q += nb * kCoopWarps) {
      const uint32_t p = __ldcg(c.long_list + q);
      const uint32_t s = __ldcg(c.piece_starts + p);
      const uint32_t e = p + 1 < np ? __ldcg(c.piece_starts + p + 1) : n;
      const int len = int(e - s);
      merge_listed_piece(v, c.text, s, len, len <= kCoopWarpCap,
                         WarpParts{sh.w.A[warp], sh.w.R[warp], sh.w.F[warp], sh.w.MG[warp]}, c.tok,
                         c.aux, c.piece_flag, int(lane), multi);
    }
  }
  grid.sync();
  stamp(c, 6);

  // 5a: tokens of the range, counted.
  auto is_token = [&](uint32_t i) { return __ldcg(c.tok + i) >= 0; };
  const uint32_t n_tokens = count_range(lo, span, hi, is_token);
  if (tid == 0) sums_tokens[b] = n_tokens;
  grid.sync();
  stamp(c, 7);

  // 5b: ids compacted; aux[i] = tokens before byte i (aux[n] = the total).
  {
    const uint32_t total = scan_range(sh.s, block_prefix(sh.s, sums_tokens, b), lo, span, hi,
                                      is_token, [&](uint32_t i, bool in, bool f, uint32_t at) {
                                        if (in) c.aux[i] = int32_t(at);
                                        if (f) c.ids_out[at] = __ldcg(c.tok + i);
                                      });
    if (b == nb - 1 && tid == 0) {
      c.aux[n] = int32_t(total);
      c.counters[2] = total;
      if (c.host_head) {  // mapped pinned memory: the host reads it after the sync
        c.host_head[0] = np;
        c.host_head[1] = n_listed;
        c.host_head[2] = total;
      }
    }
  }
  grid.sync();
  stamp(c, 8);

  // 6: unit ends.
  for (uint32_t u = gtid; u < c.n_units; u += gstride) {
    const uint32_t end = uint32_t(__ldcg(c.aux + c.unit_off[u + 1]));
    c.unit_ends[u] = end;
    if (c.host_head) c.host_head[16 + u] = end;
  }
  stamp(c, kCoopStamps - 1);
}

}  // namespace

int fused_cooperative_max_blocks(int n_sms) {
  return coop_resident_blocks(fused_cooperative_kernel, n_sms);
}

int launch_fused_cooperative(const ChunkDev& c, UnicodeTableView uni, VocabView v,
                             PieceCacheView cache, uint32_t warp_min, bool multi, int max_blocks,
                             cudaStream_t stream) {
  // One tile of bytes per block at least; never more blocks than can be resident at once
  // (a grid barrier with a block that cannot be scheduled would never return; the launch
  // itself refuses such a grid).
  const uint32_t tiles = (c.n + kCoopThreads - 1) / kCoopThreads;
  const unsigned grid = unsigned(std::max(1, std::min<int>(max_blocks, int(tiles))));
  if (grid > kMaxCoopBlocks) throw CudaError("fused_cooperative_kernel: grid over kMaxCoopBlocks");
  ChunkDev cc = c;
  void* args[] = {&uni, &v, &cache, &cc, &warp_min, &multi};
  GPUTOK_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(fused_cooperative_kernel),
                                          dim3(grid), dim3(kCoopThreads), args, 0, stream));
  GPUTOK_LAUNCHED("fused_cooperative_kernel");
  return 1;
}

}  // namespace cuda_detail
}  // namespace gputok
