// Device-side merge loops of per_word, shared by merge_per_word.cu and the fused
// small-input kernel (small.cu). merge_per_word.cu's header comment explains the pass
// algorithm and why it is exact.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels.cuh"
#include "types.h"

namespace gputok {
namespace cuda_detail {

constexpr unsigned kFull = 0xFFFFFFFFu;

// Whole-piece cache probe (kernels.cuh): the token id, or -1.
__device__ __forceinline__ int32_t cache_find(PieceCacheView c, const uint8_t* p, int len,
                                              uint64_t h) {
  uint32_t slot = uint32_t(h) & c.mask;
  for (;;) {
    const ulonglong2 kv = __ldg(reinterpret_cast<const ulonglong2*>(c.slots) + slot);
    if (kv.x == 0) return -1;
    if (kv.x == h && int((kv.y >> 24) & 0xFF) == len) {
      const uint32_t hi = uint32_t(kv.y >> 32);
      bool eq = true;
      if (len <= kCacheInlineBytes) {
        for (int j = 0; j < len && eq; ++j) eq = uint8_t(hi >> (8 * j)) == p[j];
      } else {
        const uint8_t* t = c.blob + hi;
        for (int j = 0; j < len && eq; ++j) eq = t[j] == p[j];
      }
      if (eq) return int32_t(kv.y & 0xFFFFFF);
    }
    slot = (slot + 1) & c.mask;
  }
}

__device__ __forceinline__ uint64_t piece_hash(const uint8_t* __restrict__ p, int len) {
  uint64_t h = kPieceHashSeed;
  for (int j = 0; j < len; ++j) h = piece_hash_step(h, p[j]);
  return piece_hash_finish(h, uint32_t(len));
}

// A cache hit for a piece of len >= 2 whose piece_hash is h: writes its ids (the token, then
// -1 over the rest of its range) and returns true.
__device__ __forceinline__ bool cached_token(PieceCacheView cache, const uint8_t* __restrict__ p,
                                             int len, uint64_t h, int32_t* __restrict__ out) {
  if (!cache.slots) return false;
  const int32_t id = cache_find(cache, p, len, h);
  if (id < 0) return false;
  out[0] = id;
  for (int j = 1; j < len; ++j) out[j] = -1;
  return true;
}

// The whole piece as one token: a cache hit (len >= 2) or a single byte. Writes the piece's
// ids and returns true; false when the merge loop is needed.
__device__ __forceinline__ bool piece_as_token(VocabView v, PieceCacheView cache,
                                               const uint8_t* __restrict__ p, int len,
                                               int32_t* __restrict__ out) {
  if (len == 1) {
    out[0] = v.byte_token[p[0]];
    return true;
  }
  if (!cache.slots) return false;
  return cached_token(cache, p, len, piece_hash(p, len), out);
}

// tiktoken's loop, one thread per piece (len <= kShortPiece), parts in local memory.
__device__ __forceinline__ int merge_short_loop(VocabView v, const uint8_t* __restrict__ p, int len,
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
  return m;
}

// The same loop for len <= N with the parts in registers: every index is a compile-time
// constant after unrolling (selects instead of indexed loads), so nothing goes to local
// memory. merge_short_loop's ids[32] + rk[32] are 256 bytes of local memory per thread,
// which at full occupancy spill from L1 to L2: ncu showed the miss kernel L2-bound (59% L2
// throughput, 3.1 ms of 6.1 ms kernels on the 64 MB batch).
// Each pair keeps the merged id from the same probe as its rank, so a merge needs one round
// trip to memory (the two new neighbour pairs, probed in parallel) instead of two.
template <int N>
__device__ __forceinline__ int merge_short_regs(VocabView v, const uint8_t* __restrict__ p, int len,
                                                int32_t* __restrict__ out) {
  int32_t ids[N], mg[N];
  uint32_t rk[N];
#pragma unroll
  for (int j = 0; j < N; ++j) ids[j] = j < len ? v.byte_token[p[j]] : 0;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const uint64_t val = j + 1 < len ? pair_lookup(v.pairs, ids[j], ids[j + 1]) : kEmptyKey;
    rk[j] = pair_rank(val);  // kEmptyKey's low half is kNoRank
    mg[j] = int32_t(pair_merged(val));
  }
  int m = len;  // invariant: rk[j] == kNoRank for j >= m - 1
  while (m > 1) {
    uint32_t best = kNoRank;
    int bj = 0;
#pragma unroll
    for (int j = 0; j < N - 1; ++j)
      if (rk[j] < best) {
        best = rk[j];
        bj = j;
      }
    if (best == kNoRank) break;
    int32_t M = 0, l = 0, r = 0;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (j == bj - 1) l = ids[j];
      if (j == bj) M = mg[j];
      if (j == bj + 2) r = ids[j];
    }
    --m;
    const uint64_t vl = bj > 0 ? pair_lookup(v.pairs, l, M) : kEmptyKey;
    const uint64_t vr = bj + 1 < m ? pair_lookup(v.pairs, M, r) : kEmptyKey;
#pragma unroll
    for (int j = 0; j < N; ++j) {  // ascending: [j + 1] still holds the old values here
      const int32_t next_id = j + 1 < N ? ids[j + 1] : 0;
      const int32_t next_mg = j + 1 < N ? mg[j + 1] : 0;
      const uint32_t next_rk = j + 1 < N ? rk[j + 1] : kNoRank;
      if (j == bj) {
        ids[j] = M;
        rk[j] = pair_rank(vr);
        mg[j] = int32_t(pair_merged(vr));
      } else if (j == bj - 1) {
        rk[j] = pair_rank(vl);
        mg[j] = int32_t(pair_merged(vl));
      } else if (j > bj) {
        ids[j] = next_id;
        rk[j] = next_rk;
        mg[j] = next_mg;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (j < len) out[j] = j < m ? ids[j] : -1;
  return m;
}

// tiktoken's loop for one piece in one thread (returns the number of ids): in registers up to N
// bytes, else with the parts in local memory (the miss kernel, the fused kernels).
template <int N>
__device__ __forceinline__ int merge_thread(VocabView v, const uint8_t* __restrict__ p, int len,
                                            int32_t* __restrict__ out) {
  // Compared unsigned, as the fused kernel's lengths are: a signed compare took that kernel
  // from 80 registers to 64 plus 160 bytes more stack.
  if (uint32_t(len) <= uint32_t(N))
    return merge_short_regs<N>(v, p, len, out);
  else
    return merge_short_loop(v, p, len, out);
}

__device__ __forceinline__ int32_t merged_id(VocabView v, int32_t a, int32_t b) {
  return int32_t(pair_merged(pair_lookup(v.pairs, a, b)));
}

// One warp's parts: ids A, pair ranks R (R[k]: pair (A[k], A[k+1])), per-part flags F, and
// optionally MG, the merged id of each pair from the same probe as its rank. With MG a pass
// needs two round trips to the pair table instead of four; without it (global-memory
// pieces over kWarpCap parts, the fused small kernel) merged ids are probed again.
struct WarpParts {
  int32_t* A;
  uint32_t* R;
  uint8_t* F;
  int32_t* MG;  // may be null
};

__device__ __forceinline__ int32_t pair_merged_at(VocabView v, const WarpParts& w, int k) {
  return w.MG ? w.MG[k] : merged_id(v, w.A[k], w.A[k + 1]);
}

__device__ __forceinline__ void probe_pair(VocabView v, const WarpParts& w, int j) {
  const uint64_t val = pair_lookup(v.pairs, w.A[j], w.A[j + 1]);
  w.R[j] = pair_rank(val);
  if (w.MG) w.MG[j] = int32_t(pair_merged(val));
}

// One single-rank pass over parts [0, m) (merge_per_word.cu's header: every non-overlapping
// occurrence of the lowest rank r, leftmost first, cut at the first merge that creates a
// lower-ranked pair). Writes F[q] = 1 for merged parts; returns how many parts it removed.
// Tiles in order; within a tile every lane reads before any lane writes, and writes only go to
// positions <= what was read.
__device__ inline int pass_single_rank(VocabView v, const WarpParts& w, int m, uint32_t r,
                                       int lane) {
  int32_t* A = w.A;
  uint32_t* R = w.R;
  const uint32_t below = (1u << lane) - 1u;
  bool cut_found = false;
  uint32_t prev_applied = 0;         // applied mask of the previous tile
  int32_t prev_a1 = 0, prev_a2 = 0;  // original A[base-1], A[base-2]
  int32_t prev_m1 = 0, prev_m2 = 0;  // their pairs' merged ids (with MG)
  int removed_before = 0;
  for (int base = 0; base < m; base += 32) {
    const int k = base + lane;
    const bool in = k < m;
    const int32_t a = in ? A[k] : 0;
    const uint32_t rk = in ? R[k] : kNoRank;
    const int32_t mk = (in && w.MG) ? w.MG[k] : 0;
    const int32_t a1 = k + 1 < m ? A[k + 1] : 0;
    const int32_t a2 = k + 2 < m ? A[k + 2] : 0;
    int32_t l1 = __shfl_up_sync(kFull, a, 1);
    int32_t l2 = __shfl_up_sync(kFull, a, 2);
    int32_t lm2 = __shfl_up_sync(kFull, mk, 2);  // merged id of pair k-2
    if (lane == 0) {
      l1 = prev_a1;
      l2 = prev_a2;
      lm2 = prev_m2;
    } else if (lane == 1) {
      l2 = prev_a1;
      lm2 = prev_m1;
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
      M = w.MG ? mk : merged_id(v, a, a1);
      if (k >= 1) {
        const bool lchosen =
            lane >= 2 ? (C >> (lane - 2)) & 1u : (prev_applied >> (lane == 1 ? 31 : 30)) & 1u;
        const int32_t L = lchosen ? (w.MG ? lm2 : merged_id(v, l2, l1)) : l1;
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
      if (w.MG) w.MG[q] = mk;
    }
    if (in && !removed) w.F[q] = applied ? 1 : 0;
    __syncwarp();
    removed_before += __popc(RM);
    prev_a1 = __shfl_sync(kFull, a, 31);
    prev_a2 = __shfl_sync(kFull, a, 30);
    prev_m1 = __shfl_sync(kFull, mk, 31);
    prev_m2 = __shfl_sync(kFull, mk, 30);
    prev_applied = applied_mask;
  }
  return removed_before;
}

// One multi-rank pass (merge_per_word.cu's header explains why it is exact): the merges
// tiktoken makes below a threshold T, all at once. Returns the number of parts removed, or
// -1 when no T above the lowest rank r is safe (the caller then runs pass_single_rank).
// Uses F as scratch (bit 0: parity of the descending run to the right; then 2 = chosen) and
// leaves F[q] = 1 for merged parts, 0 for the others.
__device__ inline int pass_multi_rank(VocabView v, const WarpParts& w, int m, uint32_t r,
                                      int lane) {
  int32_t* A = w.A;
  uint32_t* R = w.R;
  uint8_t* F = w.F;
  const int n = m - 1;  // pairs: R[k] is the rank of (A[k], A[k+1]) for k < n
  const uint32_t below = (1u << lane) - 1u;
  // Key of pair k is (R[k], k). Pair k is in the greedy set G (pairs taken in key order,
  // skipping those whose neighbour was taken) iff the strictly descending runs of keys from
  // k to the left and to the right both have even length. Right runs: tiles backwards.
  uint32_t carry = 0;  // parity of the right run of the next tile's lane 0
  for (int base = ((m - 1) >> 5) << 5; base >= 0; base -= 32) {
    const int k = base + lane;
    const bool bit = k + 1 < n && R[k + 1] < R[k];
    const uint32_t B = __ballot_sync(kFull, bit);
    const uint32_t z = ~B & (kFull << lane);  // zero bits at or above this lane
    const uint32_t par = z ? uint32_t(__ffs(z) - 1 - lane) & 1u : uint32_t(32 - lane + carry) & 1u;
    if (k < m) F[k] = uint8_t(par);
    carry = __shfl_sync(kFull, par, 0);
  }
  __syncwarp();
  carry = 0;  // parity of the left run of the previous tile's lane 31
  for (int base = 0; base < m; base += 32) {
    const int k = base + lane;
    const uint32_t rk = k < n ? R[k] : kNoRank;
    const bool bit = k >= 1 && k < n && R[k - 1] <= rk;
    const uint32_t B = __ballot_sync(kFull, bit);
    const uint32_t z = ~B & (lane == 31 ? kFull : ((2u << lane) - 1u));  // zero bits <= lane
    const uint32_t par =
        z ? uint32_t(lane - (31 - __clz(z))) & 1u : uint32_t(lane + 1 + carry) & 1u;
    if (k < m) F[k] = (rk != kNoRank && par == 0 && F[k] == 0) ? 2 : 0;
    carry = __shfl_sync(kFull, par, 31);
  }
  __syncwarp();
  // T: the lowest rank a chosen merge can create, whichever of its neighbours in G merged
  // first; a chosen pair at or above T is left for the next pass.
  uint32_t T = kNoRank;
  for (int k = lane; k < n; k += 32) {
    if (!F[k]) continue;
    const int32_t M = pair_merged_at(v, w, k);
    const bool left_g = k >= 2 && F[k - 2], right_g = k + 2 < n && F[k + 2];
    const int32_t ML = left_g ? pair_merged_at(v, w, k - 2) : 0;
    const int32_t MR = right_g ? pair_merged_at(v, w, k + 2) : 0;
    uint32_t q = kNoRank;
    if (k >= 1) q = min(q, lookup_rank(v, A[k - 1], M));
    if (left_g) q = min(q, lookup_rank(v, ML, M));
    if (k + 2 < m) q = min(q, lookup_rank(v, M, A[k + 2]));
    if (right_g) q = min(q, lookup_rank(v, M, MR));
    T = min(T, max(R[k], q));
  }
  T = __reduce_min_sync(kFull, T);
  if (T <= r) return -1;
  // Apply the chosen merges below T, compacting in place (same tile discipline as above).
  int removed_before = 0;
  uint32_t prev = 0;  // applied bit of the previous tile's lane 31
  for (int base = 0; base < m; base += 32) {
    const int k = base + lane;
    const bool in = k < m;
    const int32_t a = in ? A[k] : 0;
    const uint32_t rk = in ? R[k] : kNoRank;
    const int32_t mk = (in && w.MG) ? w.MG[k] : 0;
    const bool applied = in && F[k] && rk < T;
    const int32_t out = applied ? (w.MG ? mk : merged_id(v, a, A[k + 1])) : a;
    const uint32_t C = __ballot_sync(kFull, applied);
    const uint32_t RM = (C << 1) | prev;
    const bool removed = in && ((RM >> lane) & 1u);
    const int q = k - removed_before - __popc(RM & below);
    __syncwarp();
    if (in && !removed) {
      A[q] = out;
      R[q] = rk;
      if (w.MG) w.MG[q] = mk;
      F[q] = applied ? 1 : 0;
    }
    __syncwarp();
    removed_before += __popc(RM);
    prev = C >> 31;
  }
  return removed_before;
}

// BPE of one piece by one warp over parts w[0, len). Each round tries a multi-rank pass
// (unless `multi` is false: the ablation) and falls back to a single-rank pass. Returns the
// final number of parts (ids in w.A[0, m)).
__device__ inline int merge_warp(VocabView v, const uint8_t* __restrict__ p, int len,
                                 const WarpParts& w, int lane, bool multi = true) {
  for (int j = lane; j < len; j += 32) w.A[j] = v.byte_token[p[j]];
  __syncwarp();
  for (int j = lane; j < len; j += 32) {
    if (j + 1 < len)
      probe_pair(v, w, j);
    else
      w.R[j] = kNoRank;
  }
  __syncwarp();
  int m = len;
  for (;;) {
    uint32_t r = kNoRank;
    for (int j = lane; j + 1 < m; j += 32) r = min(r, w.R[j]);
    r = __reduce_min_sync(kFull, r);
    if (r == kNoRank) break;
    int removed = multi ? pass_multi_rank(v, w, m, r, lane) : -1;
    if (removed < 0) removed = pass_single_rank(v, w, m, r, lane);
    const int m2 = m - removed;
    // Re-probe the pairs that touch a merged part.
    for (int j = lane; j < m2; j += 32) {
      if (j + 1 >= m2)
        w.R[j] = kNoRank;
      else if (w.F[j] || w.F[j + 1])
        probe_pair(v, w, j);
    }
    __syncwarp();
    m = m2;
  }
  return m;
}

// One listed piece [s, s + len) on one warp: parts in `sh` (shared memory) when the caller
// has room for them, else in place in global memory (tok, aux and flags at s, the scratch
// every byte of a chunk has); then the piece's ids, and -1 over the rest of its range, go
// to tok. Returns the number of ids. Used by every warp-piece stage (per_word_long_kernel,
// the fused kernels).
__device__ __forceinline__ int merge_listed_piece(VocabView v, const uint8_t* __restrict__ text,
                                                  uint32_t s, int len, bool fits,
                                                  const WarpParts& sh, int32_t* tok, int32_t* aux,
                                                  uint8_t* flags, int lane, bool multi) {
  const WarpParts w =
      fits ? sh : WarpParts{tok + s, reinterpret_cast<uint32_t*>(aux) + s, flags + s, nullptr};
  const int m = merge_warp(v, text + s, len, w, lane, multi);
  for (int j = lane; j < len; j += 32) tok[s + j] = j < m ? w.A[j] : -1;
  __syncwarp();
  return m;
}

}  // namespace cuda_detail
}  // namespace gputok
