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

#include "parquet.h"
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

// Thrown when the device cannot hold a request (pool cap or real exhaustion). The encoder
// stays usable afterwards. Bindings map it to gputok.DeviceMemoryError (a MemoryError).
class DeviceMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown for CUDA being unavailable or any other CUDA failure (RuntimeError in Python).
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// True when this build has CUDA and at least one device is visible; otherwise false and,
// when `why` is given, the reason ("built without CUDA", "no CUDA device: ...").
bool cuda_available(std::string* why = nullptr);

struct GpuCounters {
  uint64_t device_allocs = 0;  // cudaMalloc calls made by the pool since construction
  uint64_t pinned_allocs = 0;  // cudaHostAlloc calls
  uint64_t launches = 0;       // kernel launches since construction
  size_t device_bytes = 0;     // bytes held by the pool now
};

struct GpuOptions {
  int device_id = 0;
  // 0 = no cap beyond the device's memory; else the cap of each pool: each of encode()'s slots
  // and each of decompress_pages' slots (up to 4 calls of each at once)
  size_t pool_limit_bytes = 0;
  bool gpu_pretokenize = true;  // false: pieces found on the CPU, merges on the GPU
  // true: a call waits for the device on a blocking-sync event (the thread sleeps) instead of
  // cudaStreamSynchronize's spin. The spin answers a few microseconds sooner, which matters
  // for one short text; the sleep frees the core, which matters when several processes share
  // a GPU and each would otherwise spin through the others' kernels too (corpus workers:
  // 2026-11-23, H200 host, docs/benchmarks.md).
  bool blocking_sync = false;
  // Host threads that copy a large batch into and out of pinned memory (staging, copy-out);
  // 0: min(hardware threads, 8); 1: the calling thread alone. On a host whose cores are all
  // busy (corpus workers, 4 per GPU) 1 and 8 measured the same within run-to-run noise
  // (2.15 vs 2.05-2.21 GB/s, H200 host, 2026-11-23); GPUTOK_GPU_COPY_THREADS overrides it.
  int copy_threads = 0;
};

class GpuEncoder {
 public:
  GpuEncoder(std::shared_ptr<const Vocab> vocab, GpuOptions options);
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

  // Parquet pages (parquet.h): runs `copies` of chunk[0, size) into out[0, out_size), the
  // snappy ones on the device (one warp per 64 KiB fragment, cuda/parquet.cu), the plain ones
  // on the host. Throws ParquetCorrupt for a malformed stream. Thread-safe, and concurrent:
  // up to 4 calls run at once, each on a stream and buffers of its own, beside encode().
  void decompress_pages(const uint8_t* chunk, size_t size, const std::vector<PageCopy>& copies,
                        uint8_t* out, size_t out_size);

  void set_gpu_pretokenize(bool on);
  void set_pool_limit(size_t bytes);
  GpuCounters counters() const;
  int device_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputok
