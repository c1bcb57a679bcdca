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
// Performance notes: see docs/benchmarks.md for measured numbers. Pass cost is
// O(parts / 32) warp steps; a 1M-part piece of one repeated character takes ~10 passes.
#include "common.cuh"
#include "kernels.cuh"

namespace gputok {
namespace cuda_detail {
namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kShortThreads = 256;
constexpr int kWarpsPerBlock = 4;
constexpr int kWarpCap = 512;  // parts held in shared memory per warp

// tiktoken's loop, one thread per piece, parts in local memory.
__device__ __forceinline__ void merge_short(VocabView v, const uint8_t* __restrict__ p, int len,
                                            int32_t* __restrict__ out) {
  int32_t ids[kShortPiece];
  uint32_t rk[kShortPiece];
  for (int j = 0; j < len; ++j) ids[j] = v.byte_token[p[j]];
  for (int j = 0; j + 1 < len; ++j) rk[j] = lookup_rank(v, ids[j], ids[j + 1]);
  int m = len;
  while (m > 1) {
    uint32_t best = kNoRank;
    int bj = 0;
    for (int j = 0; j + 1 < m; ++j)
      if (rk[j] < best) {
        best = rk[j];
        bj = j;
      }
    if (best == kNoRank) break;
    ids[bj] = int32_t(pair_merged(pair_lookup(v.pairs, ids[bj], ids[bj + 1])));
    for (int j = bj + 1; j + 1 < m; ++j) {
      ids[j] = ids[j + 1];
      rk[j] = rk[j + 1];
    }
    --m;
    rk[bj] = bj + 1 < m ? lookup_rank(v, ids[bj], ids[bj + 1]) : kNoRank;
    if (bj > 0) rk[bj - 1] = lookup_rank(v, ids[bj - 1], ids[bj]);
  }
  for (int j = 0; j < len; ++j) out[j] = j < m ? ids[j] : -1;
}

__global__ void per_word_short_kernel(VocabView v, const uint8_t* __restrict__ text, uint32_t n,
                                      const uint32_t* __restrict__ starts, uint32_t* counters,
                                      int32_t* __restrict__ tok, uint32_t* __restrict__ long_list) {
  const uint32_t np = counters[0];
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < np; p += gridDim.x * blockDim.x) {
    const uint32_t s = starts[p];
    const uint32_t e = p + 1 < np ? starts[p + 1] : n;
    const uint32_t len = e - s;
    if (len <= uint32_t(kShortPiece)) {
      merge_short(v, text + s, int(len), tok + s);
    } else {
      long_list[atomicAdd(&counters[1], 1u)] = p;
    }
  }
}

// The pass algorithm over parts A[0, len) with pair ranks R and per-part "just merged"
// flags F, all owned by this warp. Returns the final number of parts (ids in A[0, m)).
__device__ int merge_warp(VocabView v, const uint8_t* __restrict__ p, int len, int32_t* A,
                          uint32_t* R, uint8_t* F, int lane) {
  for (int j = lane; j < len; j += 32) A[j] = v.byte_token[p[j]];
  __syncwarp();
  for (int j = lane; j < len; j += 32) R[j] = j + 1 < len ? lookup_rank(v, A[j], A[j + 1]) : kNoRank;
  __syncwarp();
  const uint32_t below = (1u << lane) - 1u;
  int m = len;
  for (;;) {
    uint32_t r = kNoRank;
    for (int j = lane; j + 1 < m; j += 32) r = min(r, R[j]);
    r = __reduce_min_sync(kFull, r);
    if (r == kNoRank) break;

    // Phase 1: choose, cut, compact in place (tiles in order; within a tile every lane
    // reads before any lane writes, and writes only go to positions <= what was read).
    bool cut_found = false;
    uint32_t prev_applied = 0;  // applied mask of the previous tile
    int32_t prev_a1 = 0, prev_a2 = 0;  // original A[base-1], A[base-2]
    int removed_before = 0;
    for (int base = 0; base < m; base += 32) {
      const int k = base + lane;
      const bool in = k < m;
      const int32_t a = in ? A[k] : 0;
      const uint32_t rk = in ? R[k] : kNoRank;
      const int32_t a1 = k + 1 < m ? A[k + 1] : 0;
      const int32_t a2 = k + 2 < m ? A[k + 2] : 0;
      int32_t l1 = __shfl_up_sync(kFull, a, 1);
      int32_t l2 = __shfl_up_sync(kFull, a, 2);
      if (lane == 0) {
        l1 = prev_a1;
        l2 = prev_a2;
      } else if (lane == 1) {
        l2 = prev_a1;
      }
      const bool sel = !cut_found && k + 1 < m && rk == r;
      const uint32_t S = __ballot_sync(kFull, sel);
      bool chosen = false;
      if (sel) {
        const uint32_t z = ~S & below;
        const int rs = z ? 32 - __clz(z) : 0;  // start of this lane's run of selected pairs
        const int carry = rs == 0 ? int(prev_applied >> 31) : 0;
        chosen = ((lane - rs + carry) & 1) == 0;
      }
      const uint32_t C = __ballot_sync(kFull, chosen);
      bool flag = false;
      int32_t M = 0;
      if (chosen) {
        M = int32_t(pair_merged(pair_lookup(v.pairs, a, a1)));
        if (k >= 1) {
          const bool lchosen = lane >= 2 ? (C >> (lane - 2)) & 1u
                                         : (prev_applied >> (lane == 1 ? 31 : 30)) & 1u;
          const int32_t L = lchosen ? int32_t(pair_merged(pair_lookup(v.pairs, l2, l1))) : l1;
          if (lookup_rank(v, L, M) < r) flag = true;
        }
        if (k + 2 < m && lookup_rank(v, M, a2) < r) flag = true;
      }
      const uint32_t Fm = __ballot_sync(kFull, flag);
      uint32_t applied_mask = C;
      if (Fm) {
        const int cl = __ffs(Fm) - 1;
        applied_mask = C & (cl == 31 ? kFull : ((2u << cl) - 1u));
        cut_found = true;
      }
      const bool applied = (applied_mask >> lane) & 1u;
      const uint32_t RM = (applied_mask << 1) | (prev_applied >> 31);
      const bool removed = in && ((RM >> lane) & 1u);
      const int q = k - removed_before - __popc(RM & below);
      __syncwarp();
      if (in && !removed && (removed_before != 0 || RM != 0 || applied_mask != 0)) {
        A[q] = applied ? M : a;
        R[q] = rk;
      }
      if (in && !removed) F[q] = applied ? 1 : 0;
      __syncwarp();
      removed_before += __popc(RM);
      prev_a1 = __shfl_sync(kFull, a, 31);
      prev_a2 = __shfl_sync(kFull, a, 30);
      prev_applied = applied_mask;
    }
    const int m2 = m - removed_before;
    // Phase 2: re-probe the pairs that touch a merged part.
    for (int j = lane; j < m2; j += 32) {
      if (j + 1 >= m2)
        R[j] = kNoRank;
      else if (F[j] || F[j + 1])
        R[j] = lookup_rank(v, A[j], A[j + 1]);
    }
    __syncwarp();
    m = m2;
  }
  return m;
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

int launch_merge_per_word(const ChunkDev& c, VocabView v, int n_sms, cudaStream_t stream) {
  size_t est = (size_t(c.n) / 4 + kShortThreads - 1) / kShortThreads;
  const size_t cap = size_t(n_sms) * 16;
  unsigned grid = unsigned(est < 1 ? 1 : est > cap ? cap : est);
  per_word_short_kernel<<<grid, kShortThreads, 0, stream>>>(v, c.text, c.n, c.piece_starts,
                                                            c.counters, c.tok, c.long_list);
  GPUTOK_LAUNCHED("per_word_short_kernel");
  unsigned lgrid = unsigned(n_sms) * 4;
  per_word_long_kernel<<<lgrid, kWarpsPerBlock * 32, 0, stream>>>(
      v, c.text, c.n, c.piece_starts, c.counters, c.long_list, c.tok, c.aux, c.piece_flag);
  GPUTOK_LAUNCHED("per_word_long_kernel");
  return 2;
}

}  // namespace cuda_detail
}  // namespace gputok
