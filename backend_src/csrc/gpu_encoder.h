// The GPU encoder's host interface. Plain C++: no CUDA types leak out, so the encoder and
// the bindings compile the same way with or without nvcc. With CUDA, cuda/gpu_encoder.cu
// implements it; without, gpu_encoder_nocuda.cpp reports "built without CUDA".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpu_errors.h"
#include "vocab.h"

namespace gputok {

// An allocator whose resize() leaves new elements uninitialized. Output id buffers are
// hundreds of MB for large batches; zero-filling them first cost 55 ms of the 73 ms
// end-to-end time of a 64 MB batch on the H200 host (one thread touching fresh pages).
// With this the writers (copy threads, memcpy from pinned staging) fault the pages instead.
template <typename T>
struct UninitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <typename U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-init: no zeroing for int32_t
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using IdVector = std::vector<int32_t, UninitAllocator<int32_t>>;
using U16Vector = std::vector<uint16_t, UninitAllocator<uint16_t>>;
using ByteVector = std::vector<uint8_t, UninitAllocator<uint8_t>>;

// Where GpuEncoder::encode puts the ids: as int32 (`ids32`), or narrowed to uint16 while they
// are copied out of the pinned buffer (`ids16`, the corpus shard format), with segment k's ids
// written `shift[k]` places further on, leaving room for separators that the caller writes.
// Narrowing in the copy-out saves a pass over the int32 ids and their memory (corpus workers:
// the host pack stage, ~0.4 CPU s per GB of text on the H200 host, 2026-11-23).
struct GpuOutput {
  IdVector* ids32 = nullptr;
  U16Vector* ids16 = nullptr;
  const int64_t* shift = nullptr;  // ids16: one per segment, non-decreasing; null: none
  int64_t tokens = 0;              // ids written so far (shifts not counted)
  int64_t first_bad = -1;          // ids16: token index of the first id outside [0, 65535]
  int32_t bad_value = 0;           // ... and that id
};

// How the merge loop runs on the device (`algorithm=` in Python).
enum class Algorithm {
  kPerWord,            // default: many pieces in parallel, warp-cooperative long pieces
  kBlockBpe,           // the paper's baseline: one block per chunk, global argmin per pass
  kBlockBpeOptimized,  // the paper's optimized kernel: thread-coarsened compaction
};

// True when this build has CUDA and at least one device is visible; otherwise false and,
// when `why` is given, the reason ("built without CUDA", "no CUDA device: ...").
bool cuda_available(std::string* why = nullptr);

// Starts making device `device_id`'s CUDA context on a thread of its own (once per device and
// process; nothing in a forked child or a build without CUDA) and returns at once: a caller
// that parses a vocabulary meanwhile finds the context made. Errors are left for GpuEncoder
// to meet and report. GpuEncoder's constructor waits for every such start.
void start_device(int device_id);
void wait_for_device_starts();

struct GpuCounters {
  uint64_t device_allocs = 0;  // cudaMalloc calls made by the pool since construction
  uint64_t pinned_allocs = 0;  // cudaHostAlloc calls
  uint64_t launches = 0;       // kernel launches since construction
  size_t device_bytes = 0;     // bytes held by the pool now
  size_t learned_bytes = 0;    // bytes of pieces the learned cache holds (GpuOptions)
};

struct GpuOptions {
  int device_id = 0;
  // 0 = no cap beyond the device's memory; else the cap of each of encode()'s slots' pools
  // (up to 4 calls at once)
  size_t pool_limit_bytes = 0;
  bool gpu_pretokenize = true;  // false: pieces found on the CPU, merges on the GPU
  // true: a call waits for the device on a blocking-sync event (the thread sleeps) instead of
  // cudaStreamSynchronize's spin. The spin answers a few microseconds sooner, which matters
  // for one short text; the sleep frees the core, which matters when several processes share
  // a GPU and each would otherwise spin through the others' kernels too (corpus workers:
  // 2026-11-23, H200 host, bench/results/2026-11-25-benchmarks-history.md).
  bool blocking_sync = false;
  // Host threads that copy a large batch into and out of pinned memory (staging, copy-out);
  // 0: min(hardware threads, 16), of which copies under 16 MB use at most 8; 1: the calling
  // thread alone. On a host whose cores are all busy (corpus workers, 4 per GPU) 1 and 8
  // measured the same within run-to-run noise (2.15 vs 2.05-2.21 GB/s, H200 host,
  // 2026-11-23); a lone 1 GB call ran at 4.1-4.8 GB/s with 8 and 5.0-5.8 with 16 (H100 host,
  // 2026-11-25).
  int copy_threads = 0;
  // Device memory for the learned cache (cuda/learned_cache.cuh): pieces that the fused
  // kernels' chunks (GpuTuning::fused_max_bytes, lean_max_bytes) had to merge, with their
  // ids, kept for later calls; a full cache keeps what it has. 0: none (every such piece is
  // merged every time). Results never depend on it. Measured: the notes in learned_cache.cuh.
  size_t learned_cache_bytes = size_t(64) << 20;
};

// The GPU path's tuning and ablation switches, in one place: benchmarks and ablation scripts
// set them explicitly (bench/gpu_ablation.py); the defaults are the measured best. Nothing is
// read from the environment. Values out of range are clamped where they are used.
struct GpuTuning {
  bool profile = false;       // each chunk's stage times (and each call's), on stderr
  bool piece_cache = true;    // false: no whole-piece cache (every piece runs the merge loop)
  bool split_misses = true;   // false: cache hits and the merge loop in one kernel
  bool multi_rank = true;     // false: long pieces without the multi-rank pass
  bool graph = false;         // experiment: a multi-kernel chunk's launches as one CUDA graph
  bool direct_output = true;  // false: ids always copied back after a sync
  int warp_min = 16;          // pieces longer than this go to a warp (large chunks)
  int warp_min_small = 8;     // ... in chunks of at most 1 MiB
  int64_t memo_slots = -1;    // slots of the per-chunk miss memo; 0: none; -1: by chunk size
  uint32_t fused_max_bytes = uint32_t(128) << 10;  // one cooperative launch up to this; 0: never
  int coop_blocks = 0;           // cap on the fused kernel's blocks; 0: one per SM
  bool fused_lean = true;        // false: the fused kernel with nine grid barriers instead of three
  bool lean_take_early = false;  // lean: warps take listed pieces before the second barrier
  int pair_sparser = 2;          // device pair table: 2^this times the CPU table's slots (0-4)
  // The lean kernel also takes chunks above fused_max_bytes, up to this or its capacity
  // (kLeanSpan, 4 KiB, per resident block: 528 KiB on a 132-SM H100 or H200), whichever is
  // less; 0: only up to fused_max_bytes. Its one launch replaces the ~12-launch pipeline's
  // launches and second sync. H200, 2026-11-29, two calls of bench_gpu_latency.py, one text
  // warm: 64K tokens (146 KB) 160-179 -> 114-126 us, 131K 215-237 -> 179-191, 197K (439 KB)
  // 294-328 -> 252-307; seen once 289-332 -> 229-240 at 64K; 16K and 32K unchanged. Batches
  // of documents (bench_envelope.py): 150 KB 0.88 -> 1.18 GB/s, 300 KB 1.24 -> 1.43.
  uint32_t lean_max_bytes = UINT32_MAX;
  // Misses merged by one thread use the learned cache (GpuOptions::learned_cache_bytes) from
  // this many bytes; 0: never (warp pieces always do). 9: in chunks over 4 KB (the lean
  // kernel), none of whose one-thread merges is over warp_min_small (8) bytes: such a merge
  // costs about what a lookup and an insert cost (learned_cache.cuh's notes).
  int learn_thread_min = 9;
  // ... in chunks of at most 4 KB (the small kernel, whose one-thread merges go up to 32
  // bytes): from 3 bytes, 64-1K tokens took 42-54 us against 51-64 with 9, and texts seen once
  // 60-86 against 68-89 (H200, 2026-11-28, bench/results/2026-11-28-learned-cache-h200.md §3).
  int learn_thread_min_small = 3;
  // true: the thread that finds a warp's piece looks it up in the learned cache first (a hit
  // needs no warp); false: the warp does.
  bool learn_early = false;
  // true: CUDA events time the lean kernel too (every other path is timed by events anyway);
  // false: it writes its own start and end into mapped memory (coop_device.cuh's host_stamp).
  bool kernel_events = false;
  size_t encode_slots = 4;  // calls that run at once (1-8)
  // Large calls: chunks of at most chunk_bytes of text, `lanes` of them in flight (staging,
  // upload, kernels, download and copy-out of different chunks overlap); 1 lane: one chunk
  // at a time. The pool limit shrinks the chunks so that every lane fits under it. H100,
  // 2026-11-25, 16 copy threads, huge pages, GB/s at 64 MB / 256 MB / 1 GB of docs: 8 MiB x 2
  // lanes 4.8 / 3.6 / 3.8, 16 MiB x 2 5.5 / 4.6 / 5.8, 32 MiB x 2 5.5 / 5.4 / 6.3; one 64 MiB
  // chunk at a time 2.8 / 2.3 / 2.8. Device memory: ~17 bytes per byte of a chunk, per lane.
  size_t chunk_bytes = size_t(32) << 20;
  int lanes = 2;
  // Outputs of 32 MB or more are advised to use transparent huge pages before their first
  // write (chunk_pipeline.h): fewer page faults while ids are copied out. Same run, 16 MiB
  // chunks: 5.1 / 4.6 / 5.8 GB/s with, 4.2 / 3.5 / 4.1 without.
  bool huge_pages = true;
};

class GpuEncoder {
 public:
  GpuEncoder(std::shared_ptr<const Vocab> vocab, GpuOptions options, GpuTuning tuning = {});
  ~GpuEncoder();
  GpuEncoder(const GpuEncoder&) = delete;
  GpuEncoder& operator=(const GpuEncoder&) = delete;

  // Tokenizes ordinary text (valid UTF-8; special tokens already split out by the caller).
  // Appends every segment's ids to `out`, and after each segment pushes out.tokens (the ids
  // so far, shifts not counted) to `ends`. Returns the device time of the kernels, from CUDA
  // events, in milliseconds. Thread-safe, and concurrent: up to 4 calls run at once, each on a
  // stream, pinned buffers and device pool of its own (a slot; the tables are shared), so one
  // call's staging and copy-out overlap others' kernels, and their kernels overlap each other.
  // A fifth call waits for a slot. One caller at a time only ever uses the first slot.
  float encode(const std::vector<std::string_view>& segments, Algorithm algorithm, GpuOutput& out,
               std::vector<int64_t>& ends);

  void set_gpu_pretokenize(bool on);
  void set_pool_limit(size_t bytes);
  GpuCounters counters() const;
  int device_id() const;
  const GpuTuning& tuning() const;  // as constructed (read-only afterwards)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputok
