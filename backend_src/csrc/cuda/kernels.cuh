// gputok CUDA path: the device-side stages and the buffers they share for one chunk of text.
//
// Pipeline of one chunk (all on the encoder's stream, no host sync in between):
//   pretokenize.cu   mark unit (segment) starts, flag GPT-2 piece starts per byte, select
//                    the flagged offsets into a piece list (cub::DeviceSelect)
//   merge_*.cu       BPE inside each piece; every piece writes its ids at the front of its
//                    own byte range of `tok` and -1 over the rest, so order is positional
//   pretokenize.cu   compact: ids per tile of `tok`, a scan over the tiles, then each tile
//                    scatters its ids and the ends of the units that end in it
// The piece list and `tok` are indexed by byte offset, so no stage needs to know how many
// tokens another produced: that is what keeps the launches free of host round trips.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "types.h"

namespace gputok {
namespace cuda_detail {

// Device pointers for one chunk; all carved out of the encoder's pool (gpu_encoder.cu).
struct ChunkDev {
  const uint8_t* text = nullptr;  // n bytes (+16 zero padding)
  uint32_t n = 0;
  const uint32_t* unit_off = nullptr;  // n_units + 1 offsets; unit_off[n_units] == n
  uint32_t n_units = 0;
  uint8_t* unit_start = nullptr;     // n + 1 flags: 1 where a unit starts, and at n
  uint8_t* piece_flag = nullptr;     // n flags: 1 where a GPT-2 piece starts
  uint32_t* piece_starts = nullptr;  // up to n + 1 offsets (selected piece starts)
  // [0] pieces, [1] long pieces, [2] total tokens, [3] misses, [4] memo followers
  uint32_t* counters = nullptr;
  uint32_t* long_list = nullptr;  // piece indices handled cooperatively
  uint32_t long_cap = 0;
  int32_t* tok = nullptr;            // n: ids at the front of each piece's range, -1 elsewhere
  int32_t* aux = nullptr;            // n + 1: merge scratch, then the scan of token flags
  int32_t* scratch = nullptr;        // n: extra merge scratch (blockbpe algorithms)
  uint8_t* bytes_scratch = nullptr;  // n: per-element flags for long pieces
  int32_t* ids_out = nullptr;        // n: the compacted ids (aliases piece_starts)
  uint32_t* unit_ends = nullptr;     // n_units: tokens before each unit's end
  uint32_t* block_sums = nullptr;    // 2 * kMaxCoopBlocks: per-block counts (fused_cooperative.cu)
  uint32_t* tile_sums = nullptr;     // compact_tile_sums(n): ids per tile of tok, then their scan
  // Per-call memo of the pieces sent to the merge loop (merge_per_word.cu): memo_mask + 1
  // slots of (tag << 32 | piece), zeroed per call; null: every miss is merged by itself.
  unsigned long long* memo = nullptr;
  uint32_t memo_mask = 0;
  uint64_t* phase_ns = nullptr;  // kCoopStamps stage timestamps of the fused kernel, or null
  // mapped pinned [0..16) counts (from kHostStampAt: the lean kernel's clock), [16..) unit
  // ends, or null
  uint32_t* host_head = nullptr;
  void* cub_temp = nullptr;
  size_t cub_bytes = 0;
};

constexpr int kHostStampAt = 8;  // host_head[8, 12): start and end ns (coop_device.cuh)

// The learned cache (learned_cache.cuh): pieces the kernels merged, with their ids, kept on
// the device for every later call of the encoder (slots only go empty -> busy -> final; a
// full cache stops learning). Writable, unlike the token cache below; null slots: none.
struct LearnedCacheView {
  unsigned long long* slots = nullptr;  // 2 * (mask + 1) words: key (0 empty), value
  uint8_t* blob = nullptr;              // entries: bytes, then ids, each padded to 16
  unsigned long long* used = nullptr;   // blob bytes handed out (past blob_bytes: full)
  unsigned long long blob_bytes = 0;
  uint32_t mask = 0;
  int thread_min = 1 << 30;  // one-thread merges learn from this length (GpuTuning)
  bool early = false;        // a thread looks up a warp's piece before listing it (GpuTuning)
};

// Whole-piece cache: tiktoken first asks "is the whole piece a token?". Here that is a
// memo of BPE itself: the table holds exactly the tokens t (2..kShortPiece bytes) for
// which BPE of t's bytes yields [t] (checked on the host with merge_piece_reference when
// the table is built), so a hit returns what the merge loop would return, for ANY
// vocabulary. It turns the common case (an English word is one token) into one probe.
// A slot is 16 bytes, read with one load: [2s] the piece_hash of the token bytes (0: empty),
// [2s + 1] the value: bytes << 32 | length << 24 | id, where bytes is the token itself
// (little-endian) for tokens of up to 4 bytes and its offset in `blob` for longer ones. So a
// hit on a short token costs one dependent load instead of three (key, value, bytes).
struct PieceCacheView {
  const uint64_t* slots;  // 2 * (mask + 1) words
  const uint8_t* blob;    // bytes of the tokens over 4 bytes
  uint32_t mask;
  LearnedCacheView learned;  // per_word's fused kernels (small.cu, fused_lean.cu) use it
};
constexpr int kCacheInlineBytes = 4;

__host__ __device__ __forceinline__ uint64_t piece_hash_step(uint64_t h, uint8_t b) {
  return (h ^ b) * 0x100000001b3ULL;
}
constexpr uint64_t kPieceHashSeed = 0xcbf29ce484222325ULL;
__host__ __device__ __forceinline__ uint64_t piece_hash_finish(uint64_t h, uint32_t len) {
  h ^= uint64_t(len) * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return h ? h : 1;
}

// Every launcher enqueues on `stream`, checks cudaGetLastError after each launch, and
// returns the number of kernels it launched (GpuCounters::launches).
size_t cub_temp_bytes(uint32_t n);
int launch_pretokenize(const ChunkDev& c, UnicodeTableView uni, cudaStream_t stream);
int launch_flags_from_pieces(const ChunkDev& c, uint32_t n_pieces, cudaStream_t stream);
// `mid`, when not null, is recorded between the short-piece and long-piece kernels.
// Pieces of more than kShortPiece bytes always go to a warp each (merge_per_word.cu).
constexpr int kShortPiece = 32;
// Misses (pieces that are not one token) longer than warp_min bytes go to a warp too: one
// thread's O(len^2) loop over up to 32 bytes is the latency tail of mid-size inputs.
constexpr int kWarpMinFloor = 4;  // sizes long_list: at most n / (kWarpMinFloor + 1) entries
struct PerWordOptions {
  bool split = true;       // cache hits and the merge loop in two kernels (GpuTuning::split_misses)
  bool multi_rank = true;  // multi-rank passes for warp pieces (GpuTuning::multi_rank)
  int warp_min = 16;       // GpuTuning::warp_min; 32 = only pieces over kShortPiece
  // Chunks of at most small_bytes use warp_min_small: a small input cannot fill the GPU
  // with one-thread pieces, so its slowest thread is the latency; a big one is throughput.
  int warp_min_small = 8;  // GpuTuning::warp_min_small
  uint32_t small_bytes = uint32_t(1) << 20;
  int long_blocks_per_sm = 4;  // set from per_word_long_blocks_per_sm() by the encoder
  // The warp threshold in force for a chunk of n bytes.
  uint32_t warp_min_for(uint32_t n) const {
    const int wm = n <= small_bytes ? warp_min_small : warp_min;
    return uint32_t(wm < kWarpMinFloor ? kWarpMinFloor : wm > kShortPiece ? kShortPiece : wm);
  }
};
// How many blocks of the long-piece kernel fit on one SM (its shared memory bounds it).
int per_word_long_blocks_per_sm();
int launch_merge_per_word(const ChunkDev& c, VocabView v, PieceCacheView cache, int n_sms,
                          const PerWordOptions& o, cudaStream_t stream, cudaEvent_t mid = nullptr);
int launch_merge_blockbpe(const ChunkDev& c, VocabView v, bool optimized, int n_sms,
                          cudaStream_t stream);
// uint32 entries of ChunkDev::tile_sums for a chunk of n bytes.
size_t compact_tile_sums(uint32_t n);
int launch_compact(const ChunkDev& c, cudaStream_t stream);
// per_word with GPU pretokenization for chunks of at most kSmallMaxBytes: everything in one
// launch of one block (small.cu).
constexpr uint32_t kSmallMaxBytes = 4096;
int launch_fused_small(const ChunkDev& c, UnicodeTableView uni, VocabView v, PieceCacheView cache,
                       cudaStream_t stream);

// per_word with GPU pretokenization for mid-size chunks (above kSmallMaxBytes, up to the
// encoder's fused limit): everything in one cooperative launch of up to max_blocks
// co-resident blocks that meet at grid barriers (fused_cooperative.cu).
constexpr int kMaxCoopBlocks = 4096;
// Timestamps of the fused cooperative kernel (profile only): start, then after each stage.
constexpr int kCoopStamps = 10;
// Blocks of the fused cooperative kernel that fit on the device at once (capped at
// kMaxCoopBlocks); 0 when the device cannot launch cooperative kernels.
int fused_cooperative_max_blocks(int n_sms);
int launch_fused_cooperative(const ChunkDev& c, UnicodeTableView uni, VocabView v,
                             PieceCacheView cache, uint32_t warp_min, bool multi, int max_blocks,
                             cudaStream_t stream);
// The same work with three grid barriers instead of nine (fused_lean.cu): at most kLeanSpan
// bytes per block, so a chunk of n bytes needs n / kLeanSpan blocks (rounded up) at least.
// Its long_list holds (start, length) pairs: 2 * long_cap entries.
constexpr uint32_t kLeanSpan = 4096;
int fused_lean_max_blocks(int n_sms);
int launch_fused_lean(const ChunkDev& c, UnicodeTableView uni, VocabView v, PieceCacheView cache,
                      uint32_t warp_min, bool multi, bool take_early, int max_blocks,
                      cudaStream_t stream);

// Shared by the merge kernels.
__device__ __forceinline__ uint32_t lookup_rank(VocabView v, uint32_t a, uint32_t b) {
  return pair_rank(pair_lookup(v.pairs, a, b));
}

// First index in sorted starts[0, count) with starts[i] >= x (count if none).
__device__ __forceinline__ uint32_t lower_bound_u32(const uint32_t* starts, uint32_t count,
                                                    uint32_t x) {
  uint32_t lo = 0, hi = count;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) >> 1;
    if (starts[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace cuda_detail
}  // namespace gputok
