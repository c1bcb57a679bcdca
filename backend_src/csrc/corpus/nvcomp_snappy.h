// NVIDIA nvCOMP's batched snappy decompression, loaded at run time (dlopen) from the
// libnvcomp.so of the nvidia-libnvcomp-cu12 wheel, for GpuPageDecoder's "nvcomp" engine.
// Loaded rather than linked so that the corpus module builds and imports where nvCOMP is not
// installed (its library is 48 MB). The declarations below are nvCOMP 6's C API
// (include/nvcomp/snappy.h of that wheel); a library without these symbols is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gputok {

class NvcompSnappy {
 public:
  // Throws CudaError (gpu_errors.h) where the library or one of its symbols is missing.
  explicit NvcompSnappy(const std::string& path);
  ~NvcompSnappy();
  NvcompSnappy(const NvcompSnappy&) = delete;
  NvcompSnappy& operator=(const NvcompSnappy&) = delete;

  // Device scratch for n streams of at most max_out bytes each, total bytes in all.
  size_t temp_bytes(size_t n, size_t max_out, size_t total, void* stream) const;
  // Queues the decode of n raw snappy streams (with their length varint) on `stream`: all
  // arrays are device memory of n entries. statuses[k] is 0 where stream k decoded.
  void decompress_async(const void* const* in, const size_t* in_bytes, const size_t* out_cap,
                        size_t* out_bytes, size_t n, void* temp, size_t temp_bytes,
                        void* const* out, int32_t* statuses, void* stream) const;

 private:
  void* lib_ = nullptr;
  void* get_temp_ = nullptr;
  void* decompress_ = nullptr;
};

}  // namespace gputok
