// per_word: the default merge. Every GPT-2 piece is merged on its own, many in parallel.
//
//  * One thread per piece first asks the whole-piece cache (kernels.cuh) or takes a single
//    byte: 73% of the bench corpus's pieces end there (per_word_short_kernel).
//  * Pieces equal to an earlier one of the same call wait for its ids and copy them (the
//    per-call memo, memo_owner; followers, per_word_follow_kernel).
//  * The other pieces ("misses") of <= warp_min bytes go to a list and run tiktoken's own
//    loop, one thread each, with the parts in registers (per_word_miss_kernel,
//    merge_short_regs): find the lowest-rank adjacent pair, leftmost on ties, merge it,
//    re-probe its two neighbours, repeat.
//  * Longer misses and every piece over kShortPiece bytes (CJK runs, digit runs, base64,
//    "aaaa...") go to a warp each (per_word_long_kernel, merge_warp), in shared memory up
//    to kWarpCap parts and in place in global memory beyond (a 100 MB piece works the same
//    way, only slower). warp_min is 16 bytes, 8 for chunks up to 1 MB (PerWordOptions).
//
// A warp merges in passes. Each pass is tiktoken's order, made parallel; two kinds:
//
// Single-rank pass (GPT-2 encoder.py style: all occurrences of the best pair). Let r be the
// lowest rank among the current adjacent pairs. tiktoken merges the leftmost rank-r pair,
// then looks again. After that merge of (x, y) -> M at position k:
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
// With the cut this is exactly tiktoken's order for ANY rank table.
//
// Multi-rank pass (tried first; the single-rank pass is its fallback). Give pair k the key
// (rank[k], k). Take a threshold T and suppose that no merge tiktoken makes while the
// lowest rank is below T creates a pair ranked below T. Then, while ranks below T remain,
// every pair tiktoken can merge is an ORIGINAL pair (new ones rank >= T), and it merges the
// one with the smallest key that no earlier merge has destroyed (a pair is destroyed when a
// neighbour pair merges). That is the greedy set G of the path of pairs in key order, and
// the pass applies all of G below T at once. G has a local form: pair k is in G iff the
// strictly descending runs of keys from k to the left and to the right both have even
// length (the end of a descending run is a local minimum, so it is taken; membership then
// alternates back up the run); two backward/forward sweeps of ballots compute the parities.
// The supposition is checked, not assumed: for each k in G, q[k] is the lowest rank among
// the pairs its merge can create, (A[k-1] or M[k-2], M[k]) and (M[k], A[k+2] or M[k+2]) (M:
// merged ids; every order in which G's neighbours merge is covered), and T = min over k in G
// of max(rank[k], q[k]) is the largest threshold for which it holds. The pass runs only if
// T > r (else the single-rank pass does); then the smallest key is below T and the pass
// merges at least one pair. tests/test_pass_algorithm.py models both passes on the CPU and
// checks them against tiktoken's loop on corpus pieces, random pieces and random rank
// tables whose merges often create lower-ranked pairs (the fallback path).
// tiktoken's first step, "the whole piece is a token -> return it", needs no special case:
// for r50k, BPE of every token's bytes yields that token (checked in tests/test_gpu.py).
//
// Performance notes (H200, 2026-11-22 03:15 UTC, 64 MB bench corpus, bench/gpu_ablation.py):
// merge 3.3 of 4.45 ms kernels: cache hits + misses 2.1 ms (hit kernel 0.75, miss kernel
// ~1.4), warp pieces 1.2 ms. Multi-rank passes: 123K passes instead of 714K for the corpus's
// 46,688 distinct long pieces, 5.8 -> 4.45 ms kernels (single-rank only: 5.83); miss list
// 4.61 -> 4.45; registers instead of local arrays: the miss kernel 3.1 -> ~1.4 ms (ncu had
// it L2-bound at 59%); long-piece grid from occupancy (4 -> 12 blocks/SM: 23% -> 61% achieved).
// 05:39 UTC: merge 2.88 of 4.05 ms kernels (hits + misses 2.0, warp pieces 0.9) with the
// device pair table at 4x the CPU's slots and one-load slots (device_tables.cuh, types.h).
// Tried at 06:08 UTC and not kept: misses of <= 8 bytes in their own kernel with 8 registers
// each (32 registers instead of the miss kernel's 90): 4.030 vs 4.052 ms, within noise.
// 07:29-07:34 UTC, the per-call memo (memo_owner): kernels 3.72 -> 2.83 ms (22.6 GB/s) with
// the tiled compaction (pretokenize.cu); cache hits + misses 2.03 -> 1.40 ms with misses
// only, warp pieces 0.85 -> 0.60 with long pieces too. Memo size: 64K slots 3.18 ms, 1M
// (default for 64 MB) 2.84, 4M 2.81.
#include <cooperative_groups.h>

#include <algorithm>

#include "common.cuh"
#include "kernels.cuh"
#include "per_word_device.cuh"

namespace gputok {
namespace cuda_detail {
namespace {

namespace cg = cooperative_groups;

constexpr int kShortThreads = 256;
constexpr int kWarpsPerBlock = 4;
// Parts held in shared memory per warp (13 bytes each). The longest piece of the 64 MB bench
// batch has 222 bytes; longer ones work in global memory. 256 keeps 12 blocks per SM.
constexpr int kWarpCap = 256;
constexpr int kRegPiece = 16;  // misses up to this long merge in registers (merge_short_regs)

// Appends `value` to list[counter++] with one atomic per warp (the lanes that get here).
__device__ __forceinline__ void append_warp_aggregated(uint32_t* counter, uint32_t* list,
                                                       uint32_t value) {
  cg::coalesced_group g = cg::coalesced_threads();
  uint32_t at = 0;
  if (g.thread_rank() == 0) at = atomicAdd(counter, g.size());
  list[g.shfl(at, 0) + g.thread_rank()] = value;
}

// The per-call memo of misses. Natural text repeats its rarer words: in 16 MB of the bench
// corpus, 874K pieces need the merge loop but only 108K of them are distinct. So the first
// thread to claim a slot for a piece's bytes owns it and merges it; a later equal piece
// ("follower") copies the owner's ids after the miss kernel. Equality is checked on the
// bytes (the tag only filters), and a piece that finds no slot in kMemoProbes probes merges
// by itself, so the memo's size and hash change speed only, never ids. One slot is one
// 64-bit word, tag << 32 | owner piece, claimed with one CAS: no reader sees a half entry.
constexpr int kMemoProbes = 8;
// Pieces up to this long take part: in those 16 MB, 72K pieces go to a warp, 44K distinct.
constexpr int kMemoMaxLong = 256;

// The owner of piece p's bytes: p itself when it claimed a slot or found none, else the
// earlier equal piece q that did.
__device__ __forceinline__ uint32_t memo_owner(const ChunkDev& c,
                                               const uint32_t* __restrict__ starts, uint32_t np,
                                               uint32_t p, uint32_t s, int len, uint64_t h) {
  const uint32_t tag = uint32_t(h >> 32) | 1u;  // never 0, the empty slot
  const unsigned long long mine = (uint64_t(tag) << 32) | p;
  uint32_t slot = uint32_t(h) & c.memo_mask;
  for (int k = 0; k < kMemoProbes; ++k) {
    unsigned long long cur = __ldcg(c.memo + slot);  // slots only go 0 -> final: a stale 0
    if (cur == 0) {                                  // just means the CAS below tells
      cur = atomicCAS(c.memo + slot, 0ull, mine);
      if (cur == 0) return p;
    }
    if (uint32_t(cur >> 32) == tag) {
      const uint32_t q = uint32_t(cur);
      const uint32_t qs = starts[q];
      const uint32_t qe = q + 1 < np ? starts[q + 1] : c.n;
      if (qe - qs == uint32_t(len)) {
        bool eq = true;
        for (int j = 0; j < len && eq; ++j) eq = c.text[qs + j] == c.text[s + j];
        if (eq) return q;
      }
    }
    slot = (slot + 1) & c.memo_mask;
  }
  return p;
}

// One thread per piece. split: pieces that are not one token go to the miss list (counter
// 3, stored in `aux`) for per_word_miss_kernel or to the long list for a warp; with the memo,
// a piece equal to an earlier one goes to a follower list instead, its owner's index parked
// in its own tok[start]: misses to counter 4 (the upper half of `aux`; misses and their
// followers are disjoint pieces of >= 2 bytes, together at most n / 2), long pieces of up to
// kMemoMaxLong bytes to counter 5 (in `unit_start`, free after pretokenization: n / 4
// entries, and long pieces have over 4 bytes). Without split this thread merges misses.
template <bool kSplit>
__global__ void per_word_short_kernel(VocabView v, PieceCacheView cache, ChunkDev c,
                                      uint32_t warp_min) {
  const uint32_t np = c.counters[0];
  const uint32_t* __restrict__ starts = c.piece_starts;
  int32_t* __restrict__ tok = c.tok;
  uint32_t* miss_list = reinterpret_cast<uint32_t*>(c.aux);
  uint32_t* follow_list = miss_list + (c.n + 1) / 2;
  uint32_t* long_follow_list = reinterpret_cast<uint32_t*>(c.unit_start);
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < np; p += gridDim.x * blockDim.x) {
    const uint32_t s = starts[p];
    const uint32_t e = p + 1 < np ? starts[p + 1] : c.n;
    const int len = int(e - s);
    if (len == 1) {
      tok[s] = v.byte_token[c.text[s]];
      continue;
    }
    // Pieces over kMemoMaxLong bytes are neither hashed nor remembered: one thread would
    // walk all of a 100 MB piece.
    const uint64_t h = len <= kMemoMaxLong ? piece_hash(c.text + s, len) : 0;
    if (len <= kShortPiece && cached_token(cache, c.text + s, len, h, tok + s)) continue;
    const bool to_warp = len > int(warp_min);
    if (!kSplit && !to_warp) {
      merge_short_loop(v, c.text + s, len, tok + s);
      continue;
    }
    const uint32_t owner =
        kSplit && c.memo && len <= kMemoMaxLong ? memo_owner(c, starts, np, p, s, len, h) : p;
    if (owner != p) {
      tok[s] = int32_t(owner);
      if (to_warp)
        append_warp_aggregated(&c.counters[5], long_follow_list, p);
      else
        append_warp_aggregated(&c.counters[4], follow_list, p);
    } else if (to_warp) {
      append_warp_aggregated(&c.counters[1], c.long_list, p);
    } else {
      append_warp_aggregated(&c.counters[3], miss_list, p);
    }
  }
}

// Followers copy their owner's ids (and -1s) once the owner's have been written: the short
// followers after the miss kernel (one thread each), the long ones after the warp kernel (a
// warp each).
template <bool kLong>
__global__ void per_word_follow_kernel(ChunkDev c) {
  const uint32_t np = c.counters[0], nf = c.counters[kLong ? 5 : 4];
  const uint32_t* __restrict__ starts = c.piece_starts;
  const uint32_t* list = kLong ? reinterpret_cast<const uint32_t*>(c.unit_start)
                               : reinterpret_cast<const uint32_t*>(c.aux) + (c.n + 1) / 2;
  const uint32_t lanes = kLong ? 32 : 1;
  const uint32_t lane = threadIdx.x % lanes;
  for (uint32_t q = (blockIdx.x * blockDim.x + threadIdx.x) / lanes; q < nf;
       q += gridDim.x * blockDim.x / lanes) {
    const uint32_t p = list[q];
    const uint32_t s = starts[p];
    const uint32_t e = p + 1 < np ? starts[p + 1] : c.n;
    const uint32_t os = starts[c.tok[s]];
    if (kLong) __syncwarp();  // every lane has read tok[s] before lane 0 overwrites it
    for (uint32_t j = lane; j < e - s; j += lanes) c.tok[s + j] = c.tok[os + j];
  }
}

// The merge loop for the pieces the short kernel listed: every thread of a warp has one,
// instead of one in four (the rest idle on cache hits) as in the unsplit kernel.
__global__ void per_word_miss_kernel(VocabView v, const uint8_t* __restrict__ text, uint32_t n,
                                     const uint32_t* __restrict__ starts,
                                     const uint32_t* __restrict__ counters,
                                     const uint32_t* __restrict__ miss_list,
                                     int32_t* __restrict__ tok) {
  const uint32_t np = counters[0], nm = counters[3];
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < nm; q += gridDim.x * blockDim.x) {
    const uint32_t p = miss_list[q];
    const uint32_t s = starts[p];
    const uint32_t e = p + 1 < np ? starts[p + 1] : n;
    const int len = int(e - s);
    merge_thread<kRegPiece>(v, text + s, len, tok + s);
  }
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    per_word_long_kernel(VocabView v, const uint8_t* __restrict__ text, uint32_t n,
                         const uint32_t* __restrict__ starts, const uint32_t* __restrict__ counters,
                         const uint32_t* __restrict__ long_list, int32_t* tok, int32_t* aux,
                         uint8_t* flags, bool multi) {
  __shared__ int32_t sA[kWarpsPerBlock][kWarpCap];
  __shared__ uint32_t sR[kWarpsPerBlock][kWarpCap];
  __shared__ int32_t sM[kWarpsPerBlock][kWarpCap];
  __shared__ uint8_t sF[kWarpsPerBlock][kWarpCap];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const uint32_t np = counters[0], nl = counters[1];
  for (uint32_t q = blockIdx.x * kWarpsPerBlock + warp; q < nl; q += gridDim.x * kWarpsPerBlock) {
    const uint32_t p = long_list[q];
    const uint32_t s = starts[p];
    const uint32_t e = p + 1 < np ? starts[p + 1] : n;
    const int len = int(e - s);
    merge_listed_piece(v, text, s, len, len <= kWarpCap,
                       WarpParts{sA[warp], sR[warp], sF[warp], sM[warp]}, tok, aux, flags, lane,
                       multi);
  }
}

}  // namespace

int per_word_long_blocks_per_sm() {
  int b = 0;
  GPUTOK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, per_word_long_kernel,
                                                            kWarpsPerBlock * 32, 0));
  return b > 0 ? b : 4;
}

int launch_merge_per_word(const ChunkDev& c, VocabView v, PieceCacheView cache, int n_sms,
                          const PerWordOptions& o, cudaStream_t stream, cudaEvent_t mid) {
  size_t est = (size_t(c.n) / 4 + kShortThreads - 1) / kShortThreads;
  const size_t cap = size_t(n_sms) * 16;
  unsigned grid = unsigned(est < 1 ? 1 : est > cap ? cap : est);
  uint32_t* miss_list = reinterpret_cast<uint32_t*>(c.aux);  // free until the long kernel
  int launches = 0;
  const uint32_t warp_min = o.warp_min_for(c.n);
  if (o.split) {
    if (c.memo)
      GPUTOK_CUDA(cudaMemsetAsync(c.memo, 0, (size_t(c.memo_mask) + 1) * sizeof(*c.memo), stream));
    per_word_short_kernel<true><<<grid, kShortThreads, 0, stream>>>(v, cache, c, warp_min);
    GPUTOK_LAUNCHED("per_word_short_kernel");
    per_word_miss_kernel<<<grid, kShortThreads, 0, stream>>>(v, c.text, c.n, c.piece_starts,
                                                             c.counters, miss_list, c.tok);
    GPUTOK_LAUNCHED("per_word_miss_kernel");
    launches += 2;
    if (c.memo) {
      per_word_follow_kernel<false><<<grid, kShortThreads, 0, stream>>>(c);
      GPUTOK_LAUNCHED("per_word_follow_kernel<false>");
      launches += 1;
    }
  } else {
    per_word_short_kernel<false><<<grid, kShortThreads, 0, stream>>>(v, cache, c, warp_min);
    GPUTOK_LAUNCHED("per_word_short_kernel");
    launches += 1;
  }
  if (mid) GPUTOK_CUDA(cudaEventRecord(mid, stream));
  // As many blocks as fit: the 4 per SM used before left the kernel at 23% achieved
  // occupancy (ncu), with ~120K warp pieces per 64 MB queued behind.
  const unsigned lgrid = unsigned(n_sms) * unsigned(std::max(o.long_blocks_per_sm, 1));
  per_word_long_kernel<<<lgrid, kWarpsPerBlock * 32, 0, stream>>>(
      v, c.text, c.n, c.piece_starts, c.counters, c.long_list, c.tok, c.aux, c.piece_flag,
      o.multi_rank);
  GPUTOK_LAUNCHED("per_word_long_kernel");
  launches += 1;
  if (o.split && c.memo) {
    per_word_follow_kernel<true><<<grid, kShortThreads, 0, stream>>>(c);
    GPUTOK_LAUNCHED("per_word_follow_kernel<true>");
    launches += 1;
  }
  return launches;
}

}  // namespace cuda_detail
}  // namespace gputok
