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
    const uint64_t k = c.keys[slot];
    if (k == 0) return -1;
    if (k == h) {
      const uint64_t val = c.vals[slot];
      if (int((val >> 24) & 0xFF) == len) {
        const uint8_t* t = c.blob + (val >> 32);
        bool eq = true;
        for (int j = 0; j < len && eq; ++j) eq = t[j] == p[j];
        if (eq) return int32_t(val & 0xFFFFFF);
      }
    }
    slot = (slot + 1) & c.mask;
  }
}

// tiktoken's loop, one thread per piece, parts in local memory.
__device__ __forceinline__ void merge_short(VocabView v, PieceCacheView cache,
                                            const uint8_t* __restrict__ p, int len,
                                            int32_t* __restrict__ out) {
  int32_t ids[kShortPiece];
  uint32_t rk[kShortPiece];
  uint64_t h = kPieceHashSeed;
  for (int j = 0; j < len; ++j) {
    const uint8_t b = p[j];
    ids[j] = v.byte_token[b];
    h = piece_hash_step(h, b);
  }
  if (len >= 2 && cache.keys) {
    const int32_t id = cache_find(cache, p, len, piece_hash_finish(h, uint32_t(len)));
    if (id >= 0) {
      out[0] = id;
      for (int j = 1; j < len; ++j) out[j] = -1;
      return;
    }
  }
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

// The pass algorithm over parts A[0, len) with pair ranks R and per-part "just merged"
// flags F, all owned by this warp. Returns the final number of parts (ids in A[0, m)).
__device__ inline int merge_warp(VocabView v, const uint8_t* __restrict__ p, int len, int32_t* A,
                                 uint32_t* R, uint8_t* F, int lane) {
  for (int j = lane; j < len; j += 32) A[j] = v.byte_token[p[j]];
  __syncwarp();
  for (int j = lane; j < len; j += 32)
    R[j] = j + 1 < len ? lookup_rank(v, A[j], A[j + 1]) : kNoRank;
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
    uint32_t prev_applied = 0;         // applied mask of the previous tile
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
          const bool lchosen =
              lane >= 2 ? (C >> (lane - 2)) & 1u : (prev_applied >> (lane == 1 ? 31 : 30)) & 1u;
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

}  // namespace cuda_detail
}  // namespace gputok
