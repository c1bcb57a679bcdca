// The corpus tool's GPU page decoder: runs a Parquet decode's copies (parquet.h), the snappy
// ones on the device, the plain ones on the host. Plain C++: no CUDA types leak out, so the
// corpus module compiles the same way with or without nvcc (gpu_page_decoder_nocuda.cpp says
// "built without CUDA"). It owns its device memory, pinned buffers and streams; the
// tokenizer's GPU encoder shares nothing with it but the device.
//
// Two engines for the snappy streams, chosen at construction:
//   - kernels (default): gputok's own (cuda/parquet.cu; CPU twin parquet.cpp's
//     snappy_decompress, held to it byte for byte by the tests);
//   - nvcomp: NVIDIA nvCOMP's batched snappy (nvcompBatchedSnappyDecompressAsync), loaded at
//     run time from `nvcomp_library` (the libnvcomp.so.N of the nvidia-libnvcomp-cu12 wheel),
//     so that neither the build nor an install without it needs nvCOMP. docs/corpus.md has
//     the A/B of the two and the rule that picks the default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parquet.h"

namespace gputok {

struct PageDecoderOptions {
  int device_id = 0;
  // 0: no cap beyond the device's memory; else the cap of each slot's device buffer (up to
  // kDecodeSlots calls at once). Over it a call throws DeviceMemoryError (gpu_errors.h).
  size_t pool_limit_bytes = 0;
  // true: a call sleeps on a blocking-sync event while the device works instead of spinning
  // (corpus workers share the host's cores with Parquet reading and hashing).
  bool blocking_sync = false;
  // Host threads of the copies into and out of pinned memory: 0: up to 16; 1: the caller.
  int copy_threads = 0;
  // The kernels' ablations: bytes per walk segment (a power of two, 256 B-64 KiB; 0: the
  // default 512) and the fragment decode ("windowed", "global", "tagwise"; empty: windowed).
  uint32_t segment_bytes = 0;
  std::string decode;
  bool profile = false;  // each call's kernel times, on stderr
  // Non-empty: decode snappy with nvCOMP, loaded from this path (dlopen).
  std::string nvcomp_library;
};

struct PageDecoderCounters {
  uint64_t device_allocs = 0;  // cudaMalloc calls since construction
  uint64_t pinned_allocs = 0;  // cudaHostAlloc calls
  uint64_t launches = 0;       // kernel launches (nvCOMP's calls count one each)
  size_t device_bytes = 0;     // device memory held now
};

class GpuPageDecoder : public PageDecompressor {
 public:
  // Throws CudaError (gpu_errors.h) without a device, or where nvcomp_library cannot be loaded.
  explicit GpuPageDecoder(PageDecoderOptions options);
  ~GpuPageDecoder() override;
  GpuPageDecoder(const GpuPageDecoder&) = delete;
  GpuPageDecoder& operator=(const GpuPageDecoder&) = delete;

  // Runs `copies` of chunk[0, size) into out[0, out_size). Throws ParquetCorrupt for a
  // malformed stream or a copy outside the buffers. Thread-safe, and concurrent: up to 4
  // calls run at once, each on a stream and buffers of its own.
  void decompress(const uint8_t* chunk, size_t size, const std::vector<PageCopy>& copies,
                  uint8_t* out, size_t out_size) override;

  void set_pool_limit(size_t bytes);
  PageDecoderCounters counters() const;
  const PageDecoderOptions& options() const;
  const char* engine() const;  // "kernels" or "nvcomp"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputok
