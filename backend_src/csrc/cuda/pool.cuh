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
#include <string>

#include "common.cuh"

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

class PinnedBuffer {
 public:
  ~PinnedBuffer() { release(); }
  // Contents are NOT preserved when it grows.
  void ensure(size_t bytes, uint64_t& allocs) {
    if (bytes <= cap_) return;
    size_t want = cap_ * 2 > bytes ? cap_ * 2 : bytes;
    if (want < 4096) want = 4096;
    release();
    void* p = nullptr;
    // Mapped: kernels may write results straight into it (gpu_encoder.cu's direct output).
    const cudaError_t e = cudaHostAlloc(&p, want, cudaHostAllocMapped);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw DeviceMemoryError("cudaHostAlloc of " + std::to_string(want) +
                              " bytes failed: " + cudaGetErrorString(e));
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
    if (base_) cudaFreeHost(base_);
    base_ = nullptr;
    device_base_ = nullptr;
    cap_ = 0;
  }
  char* base() const { return base_; }
  // The same memory as seen from kernels (nullptr if it cannot be mapped).
  char* device_base() const { return device_base_; }
  size_t capacity() const { return cap_; }

 private:
  char* base_ = nullptr;
  char* device_base_ = nullptr;
  size_t cap_ = 0;
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
