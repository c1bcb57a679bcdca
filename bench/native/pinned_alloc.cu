// Pinned host memory: cudaHostAlloc against huge-page memory registered with the driver
// (cuda/pool.cuh's PinnedBuffer chooses the latter from 1 MiB), and cudaMalloc beside them.
// Not a test. ms per step, each size twice (the first pass pays the allocator's warm-up):
//   hostAlloc        cudaHostAlloc(mapped), its first write (memset) and cudaFreeHost
//   mmap+thp         mmap, madvise(MADV_HUGEPAGE), MADV_POPULATE_WRITE
//   register         cudaHostRegister(mapped) of that memory, its write, unregister + munmap
//
//   nvcc -O2 -arch=sm_90 -o /tmp/pinned_alloc bench/native/pinned_alloc.cu && /tmp/pinned_alloc
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

using clk = std::chrono::steady_clock;

static double ms_since(clk::time_point a) {
  return std::chrono::duration<double, std::milli>(clk::now() - a).count();
}

int main() {
  cudaFree(nullptr);
  for (size_t mb : {32, 128, 32, 128}) {
    const size_t n = mb << 20;
    auto a = clk::now();
    void* p = nullptr;
    cudaHostAlloc(&p, n, cudaHostAllocMapped);
    const double alloc = ms_since(a);
    a = clk::now();
    std::memset(p, 1, n);
    const double alloc_write = ms_since(a);
    a = clk::now();
    cudaFreeHost(p);
    const double alloc_free = ms_since(a);

    a = clk::now();
    void* q = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(q, n, MADV_HUGEPAGE);
    madvise(q, n, MADV_POPULATE_WRITE);
    const double map = ms_since(a);
    a = clk::now();
    const cudaError_t e = cudaHostRegister(q, n, cudaHostRegisterMapped);
    const double reg = ms_since(a);
    a = clk::now();
    std::memset(q, 1, n);
    const double reg_write = ms_since(a);
    a = clk::now();
    cudaHostUnregister(q);
    munmap(q, n);
    const double reg_free = ms_since(a);

    void* d = nullptr;
    a = clk::now();
    cudaMalloc(&d, n * 8);
    const double dev = ms_since(a);
    a = clk::now();
    cudaFree(d);
    const double dev_free = ms_since(a);
    std::printf(
        "%zu MiB: hostAlloc %.1f (first write %.1f, free %.1f) | mmap+thp %.1f + register %.1f "
        "[%s] (write %.1f, unregister+munmap %.1f) | cudaMalloc %zu MiB %.2f, free %.2f\n",
        mb, alloc, alloc_write, alloc_free, map, reg, cudaGetErrorString(e), reg_write, reg_free,
        mb * 8, dev, dev_free);
  }
  return 0;
}
