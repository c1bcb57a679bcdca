// per_word: the default merge. Every GPT-2 piece is merged on its own, many in parallel.
//
//  * Pieces of <= kShortPiece bytes (almost all of prose: English averages ~4.5 bytes a
//    piece) take one thread each and run tiktoken's own loop: find the lowest-rank adjacent
//    pair, leftmost on ties, merge it, re-probe its two neighbours, repeat.
//  * Longer pieces (CJK runs, digit runs, base64, "aaaa...") go to a list and are merged by
//    one warp each with the pass algorithm below, in shared memory up to kWarpCap parts and
//    in place in global memory beyond (a 100 MB piece works the same way, only slower).
//
// The pass algorithm (GPT-2 encoder.py style: all occurrences of the best pair per pass)
// and why it equals tiktoken's one-merge-at-a-time order. Let r be the lowest rank among
// the current adjacent pairs. tiktoken merges the leftmost rank-r pair, then looks again.
// After that merge of (x, y) -> M at position k:
//   - the pairs that overlapped it, (k-1,k) and (k+1,k+2), are gone;
//   - two new pairs (L, M) and (M, R) appear. Neither has rank r: rank r belongs to token M
//     itself and L+M or M+R is longer than M.
//   - If both new pairs rank > r, the lowest rank is still r and the next merge is the
//     leftmost rank-r pair that still exists, i.e. the next rank-r pair of the ORIGINAL
//     sequence that does not overlap a merged one. Over a run of overlapping rank-r pairs
//     (e.g. "aaaa" with (a,a)) that is every other pair, starting with the run's first:
//     chosen[k] = (rank[k] == r) && !chosen[k-1], computed per 32-part tile with ballots.
//   - If a new pair ranks < r, tiktoken merges it next, before any further rank-r pair, and
//     may destroy one. So the pass stops right there ("cut"): it applies the chosen merges up
//     to and including the first one that creates a lower-rank neighbour pair, and the next
//     pass starts from the true global minimum again, which is that new pair (leftmost).
// With the cut this is exactly tiktoken's order for ANY rank table, not only r50k's; in
// r50k a merge seldom creates a lower-ranked pair (BPE training ranks a token after its
// parts), so a pass nearly always applies every non-overlapping occurrence.
// tiktoken's first step, "the whole piece is a token -> return it", needs no special case:
// for r50k, BPE of every token's bytes yields that token (checked in tests/test_gpu.py).
//
// Performance notes (H200, 2026-11-22, 64 MB bench corpus): merge 5.9 ms of 6.9 ms kernels:
// short pieces 3.6 ms (4.1 without the whole-piece cache), long pieces 2.2 ms (CJK runs
// dominate). Pass cost is O(parts / 32) warp steps; "a" * 200,000 takes a handful of passes.
#include "common.cuh"
#include "kernels.cuh"
#include "per_word_device.cuh"

namespace gputok {
namespace cuda_detail {
namespace {

constexpr int kShortThreads = 256;
constexpr int kWarpsPerBlock = 4;
constexpr int kWarpCap = 512;  // parts held in shared memory per warp

__global__ void per_word_short_kernel(VocabView v, PieceCacheView cache,
                                      const uint8_t* __restrict__ text, uint32_t n,
                                      const uint32_t* __restrict__ starts, uint32_t* counters,
                                      int32_t* __restrict__ tok, uint32_t* __restrict__ long_list) {
  const uint32_t np = counters[0];
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < np; p += gridDim.x * blockDim.x) {
    const uint32_t s = starts[p];
    const uint32_t e = p + 1 < np ? starts[p + 1] : n;
    const uint32_t len = e - s;
    if (len <= uint32_t(kShortPiece)) {
      merge_short(v, cache, text + s, int(len), tok + s);
    } else {
      long_list[atomicAdd(&counters[1], 1u)] = p;
    }
  }
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    per_word_long_kernel(VocabView v, const uint8_t* __restrict__ text, uint32_t n,
                         const uint32_t* __restrict__ starts, const uint32_t* __restrict__ counters,
                         const uint32_t* __restrict__ long_list, int32_t* tok, int32_t* aux,
                         uint8_t* flags) {
  __shared__ int32_t sA[kWarpsPerBlock][kWarpCap];
  __shared__ uint32_t sR[kWarpsPerBlock][kWarpCap];
  __shared__ uint8_t sF[kWarpsPerBlock][kWarpCap];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const uint32_t np = counters[0], nl = counters[1];
  for (uint32_t q = blockIdx.x * kWarpsPerBlock + warp; q < nl; q += gridDim.x * kWarpsPerBlock) {
    const uint32_t p = long_list[q];
    const uint32_t s = starts[p];
    const uint32_t e = p + 1 < np ? starts[p + 1] : n;
    const int len = int(e - s);
    int32_t* A;
    uint32_t* R;
    uint8_t* F;
    if (len <= kWarpCap) {
      A = sA[warp];
      R = sR[warp];
      F = sF[warp];
    } else {
      A = tok + s;
      R = reinterpret_cast<uint32_t*>(aux) + s;
      F = flags + s;
    }
    const int m = merge_warp(v, text + s, len, A, R, F, lane);
    for (int j = lane; j < len; j += 32) tok[s + j] = j < m ? A[j] : -1;
    __syncwarp();
  }
}

}  // namespace

int launch_merge_per_word(const ChunkDev& c, VocabView v, PieceCacheView cache, int n_sms,
                          cudaStream_t stream, cudaEvent_t mid) {
  size_t est = (size_t(c.n) / 4 + kShortThreads - 1) / kShortThreads;
  const size_t cap = size_t(n_sms) * 16;
  unsigned grid = unsigned(est < 1 ? 1 : est > cap ? cap : est);
  per_word_short_kernel<<<grid, kShortThreads, 0, stream>>>(v, cache, c.text, c.n, c.piece_starts,
                                                            c.counters, c.tok, c.long_list);
  GPUTOK_LAUNCHED("per_word_short_kernel");
  if (mid) GPUTOK_CUDA(cudaEventRecord(mid, stream));
  unsigned lgrid = unsigned(n_sms) * 4;
  per_word_long_kernel<<<lgrid, kWarpsPerBlock * 32, 0, stream>>>(
      v, c.text, c.n, c.piece_starts, c.counters, c.long_list, c.tok, c.aux, c.piece_flag);
  GPUTOK_LAUNCHED("per_word_long_kernel");
  return 2;
}

}  // namespace cuda_detail
}  // namespace gputok
