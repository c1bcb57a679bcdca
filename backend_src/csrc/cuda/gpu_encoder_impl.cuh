// GpuEncoder::Impl (gpu_encoder.h), shared by the encoder's two CUDA sources: gpu_encoder.cu
// (construction, tuning, setters and the call: chunk plan, slot, lanes) and encode_chunk.cu (one
// chunk on a lane: device layout, staging, kernels, the copies back). Private to them.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "chunk_pipeline.h"
#include "device_tables.cuh"
#include "encode_slot.cuh"
#include "gpu_encoder.h"
#include "kernels.cuh"
#include "pool.cuh"
#include "vocab.h"

namespace gputok {

using cuda_detail::Carver;
using cuda_detail::DeviceTables;
using cuda_detail::PerWordOptions;

struct GpuEncoder::Impl {
  // Guards `opt` (its setters) and `counters`; calls copy the options they need under it and
  // then hold a slot, not this.
  mutable std::mutex mu;
  std::shared_ptr<const Vocab> vocab;
  GpuOptions opt;
  GpuTuning tuning;  // as constructed; never changed afterwards
  int n_sms = 0;
  PerWordOptions per_word;  // from GpuTuning (kernels.cuh)
  int coop_blocks = 0;      // resident blocks of the fused kernel; 0: no fused path
  int lean_blocks = 0;      // ... of the lean fused kernel (fused_lean.cu); 0: none
  DeviceTables tables;      // read-only once built: shared by every slot's kernels
  GpuCounters counters;     // the tables' allocations
  EncodeSlot encode_slots[kEncodeSlots];
  size_t n_encode_slots = 4;
  std::atomic<uint32_t> encode_next{0};  // which busy slot a call waits for

  ~Impl() {
    cudaSetDevice(opt.device_id);
    tables.release();
  }

  // fn(slot) for every slot, each under its lock in turn.
  template <typename Fn>
  void for_each_slot(Fn&& fn) {
    for (EncodeSlot& s : encode_slots) {
      std::lock_guard<std::mutex> lock(s.mu);
      fn(s);
    }
  }

  void apply(const GpuTuning& t);
  // Which kernels a chunk of n bytes takes, and its device buffers carved from `cv`.
  void lay_out(Carver& cv, EncodeLane& L, uint32_t n, size_t n_units, Algorithm algorithm,
               bool gpu_pretok) const;
  size_t lane_bytes(uint32_t n, size_t n_units, Algorithm algorithm, bool gpu_pretok) const;
  // The chunk size and lanes of a call under the pool limit, and its plan.
  ChunkPlan plan_call(const std::vector<std::string_view>& segments, const GpuOptions& o,
                      Algorithm algorithm, size_t& lanes, size_t& lane_size) const;
  void submit_chunk(EncodeSlot& S, EncodeLane& L, char* dev, const GpuOptions& o,
                    const std::vector<std::string_view>& segments, const ChunkUnit* units,
                    size_t n_units, Algorithm algorithm, CallTimes& t);
  void stage_chunk(EncodeSlot& S, EncodeLane& L, const GpuOptions& o, bool gpu_pretok,
                   CallTimes& t);
  void enqueue_kernels(EncodeSlot& S, EncodeLane& L, Algorithm algorithm, bool gpu_pretok);
  ChunkIds collect_chunk(EncodeSlot& S, EncodeLane& L, Algorithm algorithm, float& ms,
                         CallTimes& t);
  void print_chunk(EncodeLane& L, uint32_t total, float ms, Algorithm algorithm, double wait_us);
};

}  // namespace gputok
