// The GPU's own floor for one small call, for comparison with the GPU path's one-text latency
// (bench/bench_gpu_latency.py): what launching, uploading and waiting cost with no work at all.
// Not a test. Medians of --reps round trips, µs, each step as one host thread sees it:
//   launch+sync      an empty kernel, cudaStreamSynchronize (the default: spin)
//   h2d+launch+sync  16 KiB pinned -> device, then the empty kernel, then sync
//   blocking event   the same, waited on a cudaEventBlockingSync event (the corpus tool's mode)
//   coop 132 blocks  an empty cooperative launch of one block per SM, grid.sync() once
//   doorbell         a resident one-block kernel polling mapped memory: host writes a
//                    sequence number, the kernel answers it; no launch, no copy, no sync
//
//   nvcc -O2 -arch=sm_90 -o /tmp/launch_floor bench/native/launch_floor.cu && /tmp/launch_floor
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

namespace cg = cooperative_groups;

__global__ void empty_kernel(int* p) {
  if (p && threadIdx.x == 0 && blockIdx.x == 0) p[0] += 1;
}

__global__ void coop_kernel(int* p) {
  cg::grid_group g = cg::this_grid();
  if (threadIdx.x == 0) atomicAdd(p, 1);
  g.sync();
}

__global__ void doorbell_kernel(volatile unsigned* bell, volatile unsigned* answer, int rounds) {
  if (threadIdx.x != 0) return;
  for (unsigned want = 1; want <= unsigned(rounds); ++want) {
    while (*bell != want) {
    }
    __threadfence_system();
    *answer = want;
    __threadfence_system();
  }
}

using clk = std::chrono::steady_clock;

template <class F>
double median_us(int reps, F&& f) {
  std::vector<double> t(reps);
  for (int i = 0; i < reps; ++i) {
    const auto a = clk::now();
    f();
    t[i] = std::chrono::duration<double, std::micro>(clk::now() - a).count();
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[reps / 2];
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 2000;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* d = nullptr;
  CK(cudaMalloc(&d, 1 << 20));
  char* h = nullptr;
  CK(cudaHostAlloc(&h, 16 << 10, cudaHostAllocDefault));
  cudaEvent_t ev;
  CK(cudaEventCreateWithFlags(&ev, cudaEventBlockingSync | cudaEventDisableTiming));
  for (int i = 0; i < 50; ++i) empty_kernel<<<1, 32, 0, s>>>(d);
  CK(cudaStreamSynchronize(s));

  const double launch = median_us(reps, [&] {
    empty_kernel<<<1, 32, 0, s>>>(d);
    cudaStreamSynchronize(s);
  });
  const double big = median_us(reps, [&] {
    empty_kernel<<<1, 1024, 0, s>>>(d);
    cudaStreamSynchronize(s);
  });
  const double h2d = median_us(reps, [&] {
    cudaMemcpyAsync(d, h, 16 << 10, cudaMemcpyHostToDevice, s);
    empty_kernel<<<1, 32, 0, s>>>(d);
    cudaStreamSynchronize(s);
  });
  const double blocking = median_us(reps, [&] {
    cudaMemcpyAsync(d, h, 16 << 10, cudaMemcpyHostToDevice, s);
    empty_kernel<<<1, 32, 0, s>>>(d);
    cudaEventRecord(ev, s);
    cudaEventSynchronize(ev);
  });
  void* args[] = {&d};
  const double coop = median_us(reps, [&] {
    cudaLaunchCooperativeKernel(reinterpret_cast<void*>(coop_kernel), dim3(sms), dim3(256), args, 0,
                                s);
    cudaStreamSynchronize(s);
  });
  CK(cudaGetLastError());

  unsigned* bell = nullptr;
  CK(cudaHostAlloc(&bell, 256, cudaHostAllocMapped));
  bell[0] = 0;
  bell[32] = 0;
  unsigned* dbell = nullptr;
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dbell), bell, 0));
  const int rounds = reps + 10;
  doorbell_kernel<<<1, 32, 0, s>>>(dbell, dbell + 32, rounds);
  CK(cudaGetLastError());
  volatile unsigned* vb = bell;
  unsigned seq = 0;
  auto ring = [&] {
    ++seq;
    vb[0] = seq;
    while (vb[32] != seq) {
    }
  };
  for (int i = 0; i < 10; ++i) ring();
  const double door = median_us(reps, ring);
  CK(cudaStreamSynchronize(s));

  std::printf(
      "launch+sync %.2f us\n1024-thread launch+sync %.2f us\nh2d16K+launch+sync %.2f us\n"
      "blocking event %.2f us\ncoop %d blocks %.2f us\ndoorbell %.2f us\n",
      launch, big, h2d, blocking, sms, coop, door);
  return 0;
}
