// blockbpe and blockbpe_optimized: the GPUTOK paper's kernels, kept as baselines, made exact.
//
// One CUDA block per chunk of about kChunkBytes bytes. Chunks are cut at piece starts (a
// chunk owns the pieces whose start lies in [k*C, (k+1)*C)), and a pair is mergeable only
// when its right part does not start a piece (bit 31 of a part), so merges never cross a
// piece boundary: that is what makes these kernels exact where the paper's were not.
// Each pass finds the global minimum rank of the chunk and its leftmost position with a
// block-wide argmin, merges that one pair and compacts. Merging the chunk's global minimum
// applies, inside each piece, exactly tiktoken's sequence (the chunk minimum, when it lies
// in piece P, is P's minimum and its leftmost occurrence).
//  * blockbpe: re-probes every pair each pass; compaction by CUB BlockScan while the chunk
//    fits shared memory, strided double-buffered copies in global memory beyond.
//  * blockbpe_optimized: caches each pair's rank next to its part (one 64-bit word), each
//    thread owns a contiguous run of parts (thread coarsening) for the argmin and the
//    double-buffered compaction, and only the two pairs around a merge are re-probed.
// Both cost one block-wide pass per merge (O(merges x parts / threads) per chunk), which
// is why per_word replaces them; a long piece (no piece start for a whole chunk) makes a
// long chunk and gets very slow here: these are baselines, not the default.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common.cuh"
#include "kernels.cuh"

namespace gputok {
namespace cuda_detail {
namespace {

constexpr int kThreads = 256;
constexpr uint32_t kChunkBytes = 2048;
constexpr int kItems = 16;                     // blockbpe: parts per thread in shared
constexpr int kSharedCap = kThreads * kItems;  // 4096 parts
constexpr int kOptCap = 2560;                  // blockbpe_optimized: 64-bit parts
constexpr uint32_t kFlag = 0x80000000u;
constexpr uint32_t kIdMask = 0x7FFFFFFFu;

struct MinOp {
  __device__ __forceinline__ uint64_t operator()(uint64_t a, uint64_t b) const {
    return a < b ? a : b;
  }
};

struct ChunkRange {
  uint32_t s, len;
  uint32_t si;  // index of the chunk's first piece
  bool empty;
};

__device__ __forceinline__ ChunkRange chunk_range(const uint32_t* starts, uint32_t np, uint32_t n,
                                                  uint32_t k) {
  const uint64_t lo = uint64_t(k) * kChunkBytes, hi = lo + kChunkBytes;
  const uint32_t si = lower_bound_u32(starts, np, uint32_t(lo));
  const uint32_t ei = hi >= n ? np : lower_bound_u32(starts, np, uint32_t(hi));
  ChunkRange r;
  r.empty = si >= ei;
  r.si = si;
  r.s = r.empty ? 0 : starts[si];
  r.len = r.empty ? 0 : ((ei < np ? starts[ei] : n) - r.s);
  return r;
}

struct MaxOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a > b ? a : b; }
};

// Writes the chunk's final parts back to byte positions: the tokens of each piece go to
// the front of that piece's own byte range (-1 elsewhere). The compaction afterwards is by
// position, so unit (segment) ends, which are byte offsets, count exactly their own tokens.
// A part starts a piece when its flag bit is set; its piece is the chunk's (ordinal)-th.
template <typename Scan, typename Word, typename Get>
__device__ void write_final(const Word* cur, int m, const ChunkRange& cr,
                            const uint32_t* __restrict__ starts, int32_t* tok,
                            typename Scan::TempStorage& tmp, Get get) {
  for (int j = threadIdx.x; j < int(cr.len); j += kThreads) tok[cr.s + j] = -1;
  __syncthreads();
  int seen = 0, last_start = 0;
  for (int base = 0; base < m; base += kThreads) {
    const int j = base + threadIdx.x;
    const uint32_t e = j < m ? get(cur[j]) : 0u;
    const int f = (j < m && (e & kFlag)) ? 1 : 0;
    int count, count_all, last, last_all;
    Scan(tmp).InclusiveSum(f, count, count_all);
    __syncthreads();
    Scan(tmp).InclusiveScan(f ? j : -1, last, MaxOp(), last_all);
    __syncthreads();
    if (j < m) {
      const int ord = seen + count - 1;
      const int ls = last > last_start ? last : last_start;
      tok[starts[cr.si + ord] + uint32_t(j - ls)] = int32_t(e & kIdMask);
    }
    seen += count_all;
    if (last_all > last_start) last_start = last_all;
  }
  __syncthreads();
}

__device__ __forceinline__ uint32_t pair_rank_of(VocabView v, uint32_t left, uint32_t right) {
  if (right & kFlag) return kNoRank;  // right part starts a piece: never merge across
  return lookup_rank(v, left & kIdMask, right & kIdMask);
}

__global__ void __launch_bounds__(kThreads)
    blockbpe_kernel(VocabView v, const uint8_t* __restrict__ text, uint32_t n,
                    const uint8_t* __restrict__ piece_flag, const uint32_t* __restrict__ starts,
                    const uint32_t* __restrict__ counters, int32_t* tok, int32_t* aux,
                    int32_t* scratch) {
  using Reduce = cub::BlockReduce<uint64_t, kThreads>;
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ uint32_t buf[2][kSharedCap];
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } tmp;
  __shared__ uint64_t best_sh;
  const uint32_t np = counters[0];
  const uint32_t n_chunks = (n + kChunkBytes - 1) / kChunkBytes;
  for (uint32_t k = blockIdx.x; k < n_chunks; k += gridDim.x) {
    const ChunkRange cr = chunk_range(starts, np, n, k);
    if (cr.empty) continue;
    const int len = int(cr.len);
    const bool shared = len <= kSharedCap;
    uint32_t* cur = shared ? buf[0] : reinterpret_cast<uint32_t*>(aux) + cr.s;
    uint32_t* nxt = shared ? buf[1] : reinterpret_cast<uint32_t*>(scratch) + cr.s;
    for (int j = threadIdx.x; j < len; j += kThreads)
      cur[j] = uint32_t(v.byte_token[text[cr.s + j]]) | (piece_flag[cr.s + j] ? kFlag : 0u);
    __syncthreads();
    int m = len;
    for (;;) {
      uint64_t best = ~uint64_t(0);
      for (int j = threadIdx.x; j + 1 < m; j += kThreads) {
        const uint64_t key = (uint64_t(pair_rank_of(v, cur[j], cur[j + 1])) << 32) | uint32_t(j);
        best = key < best ? key : best;
      }
      best = Reduce(tmp.reduce).Reduce(best, MinOp());
      if (threadIdx.x == 0) best_sh = best;
      __syncthreads();
      best = best_sh;
      if (uint32_t(best >> 32) == kNoRank) break;
      const int jb = int(uint32_t(best));
      if (m <= kSharedCap && shared) {
        // Short: blocked arrangement, BlockScan of keep flags gives each part its slot.
        uint32_t items[kItems];
        int keep[kItems], pos[kItems];
        for (int i = 0; i < kItems; ++i) {
          const int j = threadIdx.x * kItems + i;
          items[i] = j < m ? cur[j] : 0;
          keep[i] = (j < m && j != jb + 1) ? 1 : 0;
        }
        Scan(tmp.scan).ExclusiveSum(keep, pos);
        for (int i = 0; i < kItems; ++i) {
          const int j = threadIdx.x * kItems + i;
          if (!keep[i]) continue;
          uint32_t e = items[i];
          if (j == jb)
            e = (e & kFlag) | pair_merged(pair_lookup(v.pairs, e & kIdMask, cur[jb + 1] & kIdMask));
          nxt[pos[i]] = e;
        }
      } else {
        // Long: strided double-buffered copy, one part removed.
        for (int j = threadIdx.x; j < m; j += kThreads) {
          if (j == jb + 1) continue;
          uint32_t e = cur[j];
          if (j == jb)
            e = (e & kFlag) | pair_merged(pair_lookup(v.pairs, e & kIdMask, cur[jb + 1] & kIdMask));
          nxt[j > jb ? j - 1 : j] = e;
        }
      }
      __syncthreads();
      uint32_t* t = cur;
      cur = nxt;
      nxt = t;
      --m;
    }
    write_final<Scan>(cur, m, cr, starts, tok, tmp.scan, [](uint32_t w) { return w; });
  }
}

// Part word of blockbpe_optimized: high 32 bits id | piece-start flag, low 32 bits the rank
// of the pair (this part, next part).
__device__ __forceinline__ uint64_t pack(uint32_t e, uint32_t rank) {
  return (uint64_t(e) << 32) | rank;
}

__global__ void __launch_bounds__(kThreads)
    blockbpe_optimized_kernel(VocabView v, const uint8_t* __restrict__ text, uint32_t n,
                              const uint8_t* __restrict__ piece_flag,
                              const uint32_t* __restrict__ starts,
                              const uint32_t* __restrict__ counters, int32_t* tok,
                              uint64_t* scratch) {
  using Reduce = cub::BlockReduce<uint64_t, kThreads>;
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ uint64_t buf[2][kOptCap];
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } tmp;
  __shared__ uint64_t best_sh;
  const uint32_t np = counters[0];
  const uint32_t n_chunks = (n + kChunkBytes - 1) / kChunkBytes;
  for (uint32_t k = blockIdx.x; k < n_chunks; k += gridDim.x) {
    const ChunkRange cr = chunk_range(starts, np, n, k);
    if (cr.empty) continue;
    const int len = int(cr.len);
    const bool shared = len <= kOptCap;
    uint64_t* cur = shared ? buf[0] : scratch + cr.s;
    uint64_t* nxt = shared ? buf[1] : scratch + n + cr.s;
    for (int j = threadIdx.x; j < len; j += kThreads) {
      const uint32_t e =
          uint32_t(v.byte_token[text[cr.s + j]]) | (piece_flag[cr.s + j] ? kFlag : 0u);
      uint32_t r = kNoRank;
      if (j + 1 < len) {
        const uint32_t e1 =
            uint32_t(v.byte_token[text[cr.s + j + 1]]) | (piece_flag[cr.s + j + 1] ? kFlag : 0u);
        r = pair_rank_of(v, e, e1);
      }
      cur[j] = pack(e, r);
    }
    __syncthreads();
    int m = len;
    for (;;) {
      // Thread coarsening: thread t owns parts [t*per, (t+1)*per).
      const int per = (m + kThreads - 1) / kThreads;
      const int lo = threadIdx.x * per, hi = min(m, lo + per);
      uint64_t best = ~uint64_t(0);
      for (int j = lo; j < hi; ++j) {
        const uint64_t key = (uint64_t(uint32_t(cur[j])) << 32) | uint32_t(j);
        best = key < best ? key : best;
      }
      best = Reduce(tmp.reduce).Reduce(best, MinOp());
      if (threadIdx.x == 0) best_sh = best;
      __syncthreads();
      best = best_sh;
      if (uint32_t(best >> 32) == kNoRank) break;
      const int jb = int(uint32_t(best));
      for (int j = lo; j < hi; ++j)
        if (j != jb + 1) nxt[j > jb ? j - 1 : j] = cur[j];
      __syncthreads();
      if (threadIdx.x == 0) {
        const uint32_t el = uint32_t(cur[jb] >> 32);
        const uint32_t merged =
            (el & kFlag) |
            pair_merged(pair_lookup(v.pairs, el & kIdMask, uint32_t(cur[jb + 1] >> 32) & kIdMask));
        const int m2 = m - 1;
        const uint32_t rr =
            jb + 1 < m2 ? pair_rank_of(v, merged, uint32_t(nxt[jb + 1] >> 32)) : kNoRank;
        nxt[jb] = pack(merged, rr);
        if (jb > 0) {
          const uint32_t pe = uint32_t(nxt[jb - 1] >> 32);
          nxt[jb - 1] = pack(pe, pair_rank_of(v, pe, merged));
        }
      }
      __syncthreads();
      uint64_t* t = cur;
      cur = nxt;
      nxt = t;
      --m;
    }
    write_final<Scan>(cur, m, cr, starts, tok, tmp.scan,
                      [](uint64_t w) { return uint32_t(w >> 32); });
  }
}

}  // namespace

int launch_merge_blockbpe(const ChunkDev& c, VocabView v, bool optimized, int n_sms,
                          cudaStream_t stream) {
  const uint32_t n_chunks = (c.n + kChunkBytes - 1) / kChunkBytes;
  const uint32_t cap = uint32_t(n_sms) * 8;
  const unsigned grid = n_chunks < 1 ? 1 : (n_chunks > cap ? cap : n_chunks);
  if (optimized) {
    blockbpe_optimized_kernel<<<grid, kThreads, 0, stream>>>(
        v, c.text, c.n, c.piece_flag, c.piece_starts, c.counters, c.tok,
        reinterpret_cast<uint64_t*>(c.scratch));
    GPUTOK_LAUNCHED("blockbpe_optimized_kernel");
  } else {
    blockbpe_kernel<<<grid, kThreads, 0, stream>>>(v, c.text, c.n, c.piece_flag, c.piece_starts,
                                                   c.counters, c.tok, c.aux, c.scratch);
    GPUTOK_LAUNCHED("blockbpe_kernel");
  }
  return 1;
}

}  // namespace cuda_detail
}  // namespace gputok
