#include "nvcomp_snappy.h"

#include <dlfcn.h>

#include <string>

#include "gpu_errors.h"

namespace gputok {

namespace {

// nvcompBatchedSnappyDecompressOpts_t: the backend (0: nvCOMP chooses; hardware engines exist
// on Blackwell only), sort_before_hw_decompress, and reserved bytes that must be zero.
struct DecompressOpts {
  int32_t backend = 0;
  int32_t sort_before_hw_decompress = 0;
  char reserved[56] = {};
};
static_assert(sizeof(DecompressOpts) == 64, "nvCOMP 6's decompress options are 64 bytes");

using GetTempFn = int (*)(size_t num_chunks, size_t max_uncompressed_chunk_bytes,
                          DecompressOpts opts, size_t* temp_bytes,
                          size_t max_total_uncompressed_bytes, void* stream);
using DecompressFn = int (*)(const void* const* in, const size_t* in_bytes, const size_t* out_cap,
                             size_t* out_bytes, size_t num_chunks, void* temp, size_t temp_bytes,
                             void* const* out, DecompressOpts opts, int32_t* statuses,
                             void* stream);

[[noreturn]] void fail(const std::string& what, int status) {
  throw CudaError("nvCOMP " + what + " failed: status " + std::to_string(status));
}

}  // namespace

NvcompSnappy::NvcompSnappy(const std::string& path) {
  // RTLD_LOCAL: its symbols (and its own static CUDA runtime) stay out of the process's scope.
  lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) throw CudaError("cannot load nvCOMP from " + path + ": " + dlerror());
  get_temp_ = dlsym(lib_, "nvcompBatchedSnappyDecompressGetTempSize");
  decompress_ = dlsym(lib_, "nvcompBatchedSnappyDecompressAsync");
  if (!get_temp_ || !decompress_) {
    dlclose(lib_);
    throw CudaError(path + " lacks nvCOMP 6's batched snappy decompression");
  }
}

// The library stays loaded: nvCOMP may still hold state for streams the process has not torn
// down, and unloading a library with its own CUDA runtime at exit has no benefit.
NvcompSnappy::~NvcompSnappy() = default;

size_t NvcompSnappy::temp_bytes(size_t n, size_t max_out, size_t total, void* stream) const {
  size_t bytes = 0;
  const int st =
      reinterpret_cast<GetTempFn>(get_temp_)(n, max_out, DecompressOpts{}, &bytes, total, stream);
  if (st != 0) fail("nvcompBatchedSnappyDecompressGetTempSize", st);
  return bytes;
}

void NvcompSnappy::decompress_async(const void* const* in, const size_t* in_bytes,
                                    const size_t* out_cap, size_t* out_bytes, size_t n, void* temp,
                                    size_t temp_bytes, void* const* out, int32_t* statuses,
                                    void* stream) const {
  const int st = reinterpret_cast<DecompressFn>(decompress_)(in, in_bytes, out_cap, out_bytes, n,
                                                             temp, temp_bytes, out,
                                                             DecompressOpts{}, statuses, stream);
  if (st != 0) fail("nvcompBatchedSnappyDecompressAsync", st);
}

}  // namespace gputok
