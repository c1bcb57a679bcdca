// gputok CUDA path: error checking shared by every .cu file.
//
// Every CUDA call goes through GPUTOK_CUDA; every launch is followed by GPUTOK_LAUNCHED
// (cudaGetLastError). Out-of-memory becomes DeviceMemoryError (the encoder stays usable:
// the sticky error is cleared and nothing half-allocated is kept); everything else becomes
// CudaError (gpu_errors.h).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "gpu_errors.h"

namespace gputok {
namespace cuda_detail {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* what, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  std::string msg = std::string(what) + " failed: " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ") at " + file + ":" + std::to_string(line);
  if (e == cudaErrorMemoryAllocation) throw DeviceMemoryError("CUDA out of memory: " + msg);
  throw CudaError(msg);
}

}  // namespace cuda_detail
}  // namespace gputok

#define GPUTOK_CUDA(call)                                                      \
  do {                                                                         \
    cudaError_t gputok_e_ = (call);                                            \
    if (gputok_e_ != cudaSuccess)                                              \
      ::gputok::cuda_detail::throw_cuda(gputok_e_, #call, __FILE__, __LINE__); \
  } while (0)

#define GPUTOK_LAUNCHED(name)                                                 \
  do {                                                                        \
    cudaError_t gputok_e_ = cudaGetLastError();                               \
    if (gputok_e_ != cudaSuccess)                                             \
      ::gputok::cuda_detail::throw_cuda(gputok_e_, name, __FILE__, __LINE__); \
  } while (0)
