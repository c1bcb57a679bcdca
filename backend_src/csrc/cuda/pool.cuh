// Device and pinned buffers that grow by doubling and are reused across calls.
//
// The GPUTOK paper spent 70-80% of its CUDA API time in cudaMalloc. Here one device arena
// holds every per-call buffer (carved at 256-byte aligned offsets), and one pinned buffer
// each stages input and output; all three only ever grow, by at least doubling, so a
// steady stream of similar calls makes no allocation at all (GpuCounters counts them).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "common.cuh"
#include "huge_pages.h"

namespace gputok {
namespace cuda_detail {

class DeviceArena {
 public:
  ~DeviceArena() { release(); }
  // Makes at least `bytes` available. The caller has synchronized the stream (no kernel
  // may still use the old block). Throws DeviceMemoryError over the limit or on OOM.
  void ensure(size_t bytes, size_t limit, uint64_t& allocs) {
    if (bytes <= cap_) return;
    if (limit && bytes > limit)
      throw DeviceMemoryError("request needs " + std::to_string(bytes) +
                              " bytes of device memory; the pool limit is " +
                              std::to_string(limit));
    size_t want = cap_ * 2 > bytes ? cap_ * 2 : bytes;
    if (limit && want > limit) want = limit;
    release();
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, want);
    if (e != cudaSuccess && want > bytes) {  // doubling too greedy: try the exact size
      cudaGetLastError();
      want = bytes;
      e = cudaMalloc(&p, want);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw DeviceMemoryError("cudaMalloc of " + std::to_string(want) +
                              " bytes failed: " + cudaGetErrorString(e));
    }
    ++allocs;
    base_ = static_cast<char*>(p);
    cap_ = want;
  }
  void release() {
    if (base_) cudaFree(base_);
    base_ = nullptr;
    cap_ = 0;
  }
  char* base() const { return base_; }
  size_t capacity() const { return cap_; }

 private:
  char* base_ = nullptr;
  size_t cap_ = 0;
};

// Pinned host memory, mapped for kernels. From kHugeMinBytes up it is our own memory on
// transparent huge pages (huge_pages.h), faulted in, then registered with the driver; below,
// and wherever registering fails, cudaHostAlloc. Why: cudaHostAlloc pins 4 KiB pages one by
// one. H100 host, 2026-11-28 (bench/native/pinned_alloc.cu): 32 MiB 13-40 ms to allocate and
// 3.5-4.6 ms to free, against 5.2-7.2 and 0.8-0.9 ms registered on huge pages; 128 MiB 52-65 /
// 12-17 ms against 21-25 / 2.5-3.1. A GPU tokenizer's first 32 MB call (bench/bench_startup.py
// first-calls, 4 fresh processes each): 77-90 -> 49-56 ms; its second, 23-32 ms either way.
class PinnedBuffer {
 public:
  ~PinnedBuffer() { release(); }
  // Contents are NOT preserved when it grows.
  void ensure(size_t bytes, uint64_t& allocs) {
    if (bytes <= cap_) return;
    size_t want = cap_ * 2 > bytes ? cap_ * 2 : bytes;
    if (want < 4096) want = 4096;
    release();
    void* p = want >= kHugeMinBytes ? huge_registered(want) : nullptr;
    registered_ = p != nullptr;
    if (!p) {
      // Mapped: kernels may write results straight into it (gpu_encoder.cu's direct output).
      const cudaError_t e = cudaHostAlloc(&p, want, cudaHostAllocMapped);
      if (e != cudaSuccess) {
        cudaGetLastError();
        throw DeviceMemoryError("cudaHostAlloc of " + std::to_string(want) +
                                " bytes failed: " + cudaGetErrorString(e));
      }
    }
    ++allocs;
    base_ = static_cast<char*>(p);
    cap_ = want;
    void* d = nullptr;
    if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess) {
      cudaGetLastError();
      d = nullptr;
    }
    device_base_ = static_cast<char*>(d);
  }
  void release() {
    if (base_ && registered_) {
      cudaHostUnregister(base_);
      huge_free(base_, cap_);
    } else if (base_) {
      cudaFreeHost(base_);
    }
    base_ = nullptr;
    device_base_ = nullptr;
    cap_ = 0;
    registered_ = false;
  }
  char* base() const { return base_; }
  // The same memory as seen from kernels (nullptr if it cannot be mapped).
  char* device_base() const { return device_base_; }
  size_t capacity() const { return cap_; }

 private:
  // `bytes` of huge_alloc memory registered (pinned, mapped) with the driver; nullptr where
  // either step fails (no memory, a lock limit): the caller then tries cudaHostAlloc.
  static void* huge_registered(size_t bytes) {
    void* p = nullptr;
    try {
      p = huge_alloc(bytes);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    if (cudaHostRegister(p, bytes, cudaHostRegisterMapped) != cudaSuccess) {
      cudaGetLastError();
      huge_free(p, bytes);
      return nullptr;
    }
    return p;
  }

  char* base_ = nullptr;
  char* device_base_ = nullptr;
  size_t cap_ = 0;
  bool registered_ = false;
};

// Carves aligned sub-buffers out of one block (first pass with base == nullptr measures).
class Carver {
 public:
  explicit Carver(char* base) : base_(base) {}
  template <typename T>
  T* take(size_t count) {
    off_ = (off_ + 255) & ~size_t(255);
    T* p = base_ ? reinterpret_cast<T*>(base_ + off_) : nullptr;
    off_ += count * sizeof(T);
    return p;
  }
  size_t used() const { return off_; }

 private:
  char* base_;
  size_t off_ = 0;
};

}  // namespace cuda_detail
}  // namespace gputok
