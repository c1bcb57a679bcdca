// The GPU path's exceptions, apart from the encoder: the CUDA helpers (cuda/common.cuh,
// cuda/pool.cuh) throw them, for the tokenizer's encoder and for any other GPU object built
// on those helpers (the corpus tool's page decoder), without including gpu_encoder.h.
#pragma once

#include <stdexcept>

namespace gputok {

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

}  // namespace gputok
