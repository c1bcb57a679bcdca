// The learned cache: pieces that per_word's fused kernels had to merge (not one token, 3-255
// bytes), with their ids, kept on the device for every later call of the encoder, as the CPU
// path's pretoken cache is kept across calls (piece_cache.h). A piece found here costs one
// probe and a byte compare instead of its merge loop: the merge loop's dependent pair-table
// round trips (a warp piece's passes) are the critical path of a short text.
//
// Exactness: an entry is written only from ids the merge loop produced for exactly these
// bytes, and a hit compares every byte of the piece (the 64-bit hash only picks the slot), so a
// hit returns what the merge loop would. Nothing is ever overwritten or freed, so an entry a
// reader sees is complete:
//   writer: blob bytes and ids (a warp's lanes each fence theirs), a slot claimed by CAS 0 ->
//           kLearnBusy, its value word, then the key published with a release store;
//   reader: the key with ld.acquire, then the value and the entry through L2 (__ldcg: another
//           SM's L1 may hold a stale line of a slot or of the blob).
// A busy or foreign slot is probed past; a piece the reader cannot find is merged, so a race
// costs time, never ids. Memory is bounded by the buffer given (GpuOptions::learned_cache_bytes):
// when its blob is spent, or a key finds no free slot in kLearnProbes, the piece is not kept.
//
// Which pieces learn: a warp's piece (longer than warp_min_small: its passes are the critical
// path) is looked up by the warp, all lanes comparing; a one-thread merge is looked up by its
// thread from GpuTuning::learn_thread_min_small (3) bytes in the small kernel, whose thread
// merges go up to 32 bytes, and from learn_thread_min (9) in the lean kernel, that is never:
// a lean merge of up to 8 bytes costs about what a lookup and an insert cost, and learning
// those made texts not seen before slower.
// Measured (H200, 2026-11-28 22:49-23:07 UTC, bench/bench_gpu_latency.py via
// scripts/gpu_latency.sh, bench/results/2026-11-28-learned-cache-h200.md): one text repeated,
// end to end, 4K tokens 67.7 -> 55.0 us, 16K 80.7 -> 60.0 (kernel 58 -> 36-37, its warp stage
// 26 -> 7.5); texts met once each, 16K 90.5 -> 83.7. Loads go 64 bytes at a time: compared one
// word at a time, each load waited for, a 100-byte piece took ~25 round trips (the piece stage
// 14 -> 25 us). A thread looking up a warp's piece before listing it (GpuTuning::learn_early)
// moved the time from the warp stage to the piece stage: no gain, not the default.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels.cuh"
#include "per_word_device.cuh"

namespace gputok {
namespace cuda_detail {

constexpr int kLearnMinLen = 3;    // a 2-byte miss is one pair probe: nothing to save
constexpr int kLearnMaxLen = 255;  // the value word keeps the length and id count in 8 bits each
constexpr int kLearnProbes = 8;
using u64 = unsigned long long;  // what CUDA's 64-bit atomics take
constexpr u64 kLearnBusy = ~0ull;

__device__ __forceinline__ u64 learn_key(uint64_t h) {
  return h == kLearnBusy ? h - 1 : h;  // piece_hash is never 0; busy is reserved too
}

__device__ __forceinline__ u64 load_acquire(const u64* p) {
  u64 v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Orders every earlier write of this thread (the entry, the slot's value) before the key.
__device__ __forceinline__ void store_release(u64* p, u64 v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Bytes [j, j + 4) of p as a little-endian word, zero past len.
__device__ __forceinline__ uint32_t text_word(const uint8_t* __restrict__ p, int j, int len) {
  uint32_t w = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k)
    if (j + k < len) w |= uint32_t(p[j + k]) << (8 * k);
  return w;
}

// The slot key of a piece: the token cache's piece_hash up to kShortPiece bytes (a thread has it
// already), a word at a time above (a warp's lane 0 hashes up to 255 bytes on its own).
__device__ __forceinline__ uint64_t learned_hash(const uint8_t* __restrict__ p, int len) {
  if (len <= kShortPiece) return piece_hash(p, len);
  uint64_t h = kPieceHashSeed;
  for (int j = 0; j < len; j += 4) h = (h ^ text_word(p, j, len)) * 0x100000001b3ULL;
  return piece_hash_finish(h, uint32_t(len));
}

// An entry: the piece's bytes, then its ids, each padded to 16 bytes (vector loads).
__device__ __forceinline__ int learned_text_bytes(int len) { return (len + 15) & ~15; }
__device__ __forceinline__ u64 learned_entry_bytes(int len, int m) {
  return u64(learned_text_bytes(len)) + u64((4 * m + 15) & ~15);
}

// The value word of the slot holding piece (p, len, h), or 0. A slot whose bytes differ (a
// hash collision) is probed past here, by the caller comparing them.
__device__ __forceinline__ u64 learned_slot(const LearnedCacheView& lc, int len, uint64_t h,
                                            uint32_t& slot, int& k) {
  const u64 key = learn_key(h);
  for (; k < kLearnProbes; ++k, slot = (slot + 1) & lc.mask) {
    const u64 cur = load_acquire(lc.slots + 2 * size_t(slot));
    if (cur == 0) return 0;
    if (cur != key) continue;
    const u64 val = __ldcg(lc.slots + 2 * size_t(slot) + 1);
    if (int((val >> 8) & 0xFF) == len) return val;
  }
  return 0;
}

// One thread: the piece's ids from the learned cache into out (then -1 over the rest of its
// len) and their count; -1 when it is not there. Loads go 4 vectors (64 bytes) at a time
// before any is used: one at a time, each waited for, a 100-byte piece took ~25 round trips.
static __device__ __noinline__ int learned_find(const LearnedCacheView& lc,
                                                const uint8_t* __restrict__ p, int len, uint64_t h,
                                                int32_t* __restrict__ out) {
  if (!lc.slots || len < kLearnMinLen || len > kLearnMaxLen) return -1;
  uint32_t slot = uint32_t(h) & lc.mask;
  for (int k = 0; k < kLearnProbes; ++k, slot = (slot + 1) & lc.mask) {
    const u64 val = learned_slot(lc, len, h, slot, k);
    if (!val) return -1;
    const uint8_t* e = lc.blob + (val >> 16);
    uint32_t diff = 0;
    for (int j0 = 0; j0 < len; j0 += 64) {
      uint4 w[4];
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (j0 + 16 * q < len) w[q] = __ldcg(reinterpret_cast<const uint4*>(e + j0 + 16 * q));
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int j = j0 + 16 * q;
        if (j < len)
          diff |= (w[q].x ^ text_word(p, j, len)) | (w[q].y ^ text_word(p, j + 4, len)) |
                  (w[q].z ^ text_word(p, j + 8, len)) | (w[q].w ^ text_word(p, j + 12, len));
      }
    }
    if (diff) continue;  // a foreign piece of the same hash and length
    const int m = int(val & 0xFF);
    const int4* ids = reinterpret_cast<const int4*>(e + learned_text_bytes(len));
    for (int j0 = 0; j0 < m; j0 += 16) {
      int4 v[4];
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (j0 + 4 * q < m) v[q] = __ldcg(ids + j0 / 4 + q);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int j = j0 + 4 * q;
        if (j < m) out[j] = v[q].x;
        if (j + 1 < m) out[j + 1] = v[q].y;
        if (j + 2 < m) out[j + 2] = v[q].z;
        if (j + 3 < m) out[j + 3] = v[q].w;
      }
    }
    for (int j = m; j < len; ++j) out[j] = -1;
    return m;
  }
  return -1;
}

// One warp (every lane calls it; h from lane 0 is used): the same as learned_find, the bytes
// compared and the ids copied by all lanes at once.
__device__ inline int learned_find_warp(const LearnedCacheView& lc, const uint8_t* __restrict__ p,
                                        int len, uint64_t h, int32_t* __restrict__ out, int lane) {
  if (!lc.slots || len < kLearnMinLen || len > kLearnMaxLen) return -1;
  uint32_t slot = uint32_t(h) & lc.mask;
  for (int k = 0; k < kLearnProbes; ++k, slot = (slot + 1) & lc.mask) {
    u64 val = lane == 0 ? learned_slot(lc, len, h, slot, k) : 0;
    val = __shfl_sync(0xFFFFFFFFu, val, 0);
    k = __shfl_sync(0xFFFFFFFFu, k, 0);
    slot = __shfl_sync(0xFFFFFFFFu, slot, 0);
    if (!val) return -1;
    const uint8_t* e = lc.blob + (val >> 16);
    uint32_t diff = 0;
    for (int j = 4 * lane; j < len; j += 128)
      diff |= __ldcg(reinterpret_cast<const unsigned int*>(e + j)) ^ text_word(p, j, len);
    if (__any_sync(0xFFFFFFFFu, diff != 0)) continue;
    const int m = int(val & 0xFF);
    const int32_t* ids = reinterpret_cast<const int32_t*>(e + learned_text_bytes(len));
    for (int j = lane; j < len; j += 32) out[j] = j < m ? __ldcg(ids + j) : -1;
    __syncwarp();
    return m;
  }
  return -1;
}

// Publishes the entry written at blob offset `at` under the piece's hash: claims a free slot
// (CAS 0 -> kLearnBusy), writes its value, then releases the key. No free slot in
// kLearnProbes, or the key there already: the entry stays unreachable (its room is spent).
__device__ __forceinline__ void learned_publish(const LearnedCacheView& lc, uint64_t h, u64 at,
                                                int len, int m) {
  const u64 key = learn_key(h);
  uint32_t slot = uint32_t(h) & lc.mask;
  for (int k = 0; k < kLearnProbes; ++k, slot = (slot + 1) & lc.mask) {
    u64* ks = lc.slots + 2 * size_t(slot);
    const u64 cur = atomicCAS(ks, 0ull, kLearnBusy);
    if (cur == key) return;  // kept already (or a piece of the same hash: left to merge)
    if (cur != 0) continue;
    ks[1] = (at << 16) | (u64(len) << 8) | u64(m);
    store_release(ks, key);
    return;
  }
}

// Keeps the m ids at `ids` (what the merge loop wrote for p) for later calls, if there is room.
static __device__ __noinline__ void learned_insert(const LearnedCacheView& lc,
                                                   const uint8_t* __restrict__ p, int len,
                                                   uint64_t h, const int32_t* ids, int m) {
  if (!lc.slots || len < kLearnMinLen || len > kLearnMaxLen || m < 1 || m > len) return;
  if (__ldcg(lc.used) >= lc.blob_bytes) return;  // full: no atomic once it is
  const u64 need = learned_entry_bytes(len, m);
  const u64 at = atomicAdd(lc.used, need);
  if (at + need > lc.blob_bytes) return;
  uint8_t* e = lc.blob + at;  // a multiple of 16: every need is
  // Up to the padded length: learned_find compares 16 bytes at a time, zeros past len.
  for (int j = 0; j < learned_text_bytes(len); j += 4)
    *reinterpret_cast<uint32_t*>(e + j) = text_word(p, j, len);
  int32_t* dst = reinterpret_cast<int32_t*>(e + learned_text_bytes(len));
  for (int j = 0; j < m; ++j) dst[j] = ids[j];
  learned_publish(lc, h, at, len, m);
}

// learned_insert by a warp (every lane calls it, after merge_listed_piece's __syncwarp): lane
// 0 takes the room, all lanes write the entry, lane 0 publishes it.
__device__ inline void learned_insert_warp(const LearnedCacheView& lc,
                                           const uint8_t* __restrict__ p, int len, uint64_t h,
                                           const int32_t* ids, int m, int lane) {
  if (!lc.slots || len < kLearnMinLen || len > kLearnMaxLen || m < 1 || m > len) return;
  const u64 need = learned_entry_bytes(len, m);
  u64 at = kLearnBusy;
  if (lane == 0 && __ldcg(lc.used) < lc.blob_bytes) {
    at = atomicAdd(lc.used, need);
    if (at + need > lc.blob_bytes) at = kLearnBusy;
  }
  at = __shfl_sync(0xFFFFFFFFu, at, 0);
  if (at == kLearnBusy) return;
  uint8_t* e = lc.blob + at;
  for (int j = 4 * lane; j < learned_text_bytes(len); j += 128)
    *reinterpret_cast<uint32_t*>(e + j) = text_word(p, j, len);
  int32_t* dst = reinterpret_cast<int32_t*>(e + learned_text_bytes(len));
  for (int j = lane; j < m; j += 32) dst[j] = ids[j];
  __threadfence();  // every lane's part of the entry before lane 0 publishes it
  __syncwarp();
  if (lane == 0) learned_publish(lc, h, at, len, m);
}

// One thread's piece: a single byte, a token (the token cache, up to kShortPiece bytes), a
// learned piece (from lc.thread_min bytes up to merge_max; above it too with lc.early), or,
// when it is at most merge_max bytes, merged here (and learned from lc.thread_min bytes).
// Writes its ids at out and returns their count; -1 leaves the piece for a warp (nothing
// written).
template <int N>
__device__ __forceinline__ int piece_ids_thread(VocabView v, const PieceCacheView& cache,
                                                const uint8_t* __restrict__ p, int len,
                                                int merge_max, int32_t* __restrict__ out) {
  if (len == 1) {
    out[0] = v.byte_token[p[0]];
    return 1;
  }
  const LearnedCacheView& lc = cache.learned;
  const bool learnable = lc.slots && len >= kLearnMinLen && len <= kLearnMaxLen;
  const bool over = len > merge_max;
  if (over && len > kShortPiece && !(learnable && lc.early)) return -1;
  if (!cache.slots) return over ? -1 : merge_thread<N>(v, p, len, out);
  const uint64_t h = learned_hash(p, len);  // piece_hash up to kShortPiece bytes
  if (len <= kShortPiece && cached_token(cache, p, len, h, out)) return 1;
  const bool learn = learnable && (over ? lc.early : len >= lc.thread_min);
  const int found = learn ? learned_find(lc, p, len, h, out) : -1;
  if (found >= 0 || over) return found;
  const int m = merge_thread<N>(v, p, len, out);
  if (learn) learned_insert(lc, p, len, h, out, m);
  return m;
}

// One warp's listed piece [s, s + len) of text: its ids into tok from the learned cache, or
// merged (merge_listed_piece's arguments) and learned. Returns the number of ids.
__device__ __forceinline__ int warp_piece_ids(VocabView v, const PieceCacheView& cache,
                                              const uint8_t* __restrict__ text, uint32_t s, int len,
                                              bool fits, const WarpParts& sh, int32_t* tok,
                                              int32_t* aux, uint8_t* flags, int lane, bool multi) {
  const bool learn = cache.learned.slots && len >= kLearnMinLen && len <= kLearnMaxLen;
  uint64_t h = 0;
  if (learn) {
    h = lane == 0 ? learned_hash(text + s, len) : 0;
    h = __shfl_sync(0xFFFFFFFFu, h, 0);
    const int found = learned_find_warp(cache.learned, text + s, len, h, tok + s, lane);
    if (found >= 0) return found;
  }
  const int m = merge_listed_piece(v, text, s, len, fits, sh, tok, aux, flags, lane, multi);
  if (learn) learned_insert_warp(cache.learned, text + s, len, h, tok + s, m, lane);
  return m;
}

}  // namespace cuda_detail
}  // namespace gputok
