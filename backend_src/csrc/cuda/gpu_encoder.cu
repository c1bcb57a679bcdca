// GpuEncoder (gpu_encoder.h): host orchestration of the CUDA path.
//
// One call: the segments are cut into chunks of at most GpuTuning::chunk_bytes (a segment
// longer than that is split at is_safe_split positions, which keeps pieces, and therefore
// ids, unchanged: chunk_pipeline.h), and each chunk runs
//   pinned staging -> H2D -> [pretokenize, merge, compact] -> D2H count + ends -> D2H ids
//   -> stitch (copy out of pinned memory into the caller's output)
// on a lane of the call's slot (EncodeSlot: up to 4 calls at once; EncodeLane: up to
// GpuTuning::lanes chunks of one call in flight, each on its own stream, pinned buffers and
// part of the slot's device arena), so one chunk's host staging and stitching overlap the
// others' transfers and kernels. The pool limit shrinks the chunks until the lanes fit. A
// slot's buffers only grow (pool.cuh), so steady-state calls make no cudaMalloc/cudaHostAlloc.
// Kernel time is measured with CUDA events around the kernels of each chunk and summed.
//
// Large calls (H100, 2026-11-25, before lanes): one 64 MiB chunk at a time, and the output
// vector grown by the vector itself: a call just over one chunk moved the first chunk's ids
// (112 MB) on one thread into fresh pages before the second chunk's copy-out. The bench
// corpus ran at 2.5-2.7 GB/s as 64 MB and 0.92-1.02 GB/s as 85 MB (two chunks).
//
// Performance notes (H200, 2026-11-22 05:39-05:41 UTC, bench/gpu_ablation.py and
// bench/bench_gpu.py, 64 MB of the bench corpus, 9,797 docs, 28.1M tokens): kernels 4.05 ms
// (15.8 GB/s; 4.67 with the CPU's 4 MiB pair table), 2.84 ms (22.5 GB/s) at 07:34 UTC with
// the per-call miss memo and the tiled compaction; staging ~2.2 ms; H2D + kernels + D2H
// ~7.5 ms; copy-out into the caller's fresh buffer 10-12 ms (page faults of 112 MB of new
// memory, on 8 pool threads): 24-31 ms end to end. Small inputs: a 16K-token sequence (45 KB)
// 0.087-0.096 ms end to end (kernels 0.061-0.068) on the fused cooperative path; 76 KB 0.115 ms
// (0.145 with that path off). Pool threads instead of spawned ones: 2 MB 1.18 -> 0.81 ms.
// A chunk is one launch up to kSmallMaxBytes (small.cu) and up to GpuTuning::fused_max_bytes
// (fused_lean.cu, fused_cooperative.cu, which also write their counts and unit ends to mapped
// memory: one upload, one launch, one sync) or, for the lean kernel, up to its capacity
// (GpuTuning::lean_max_bytes), ~12 launches above; one host sync up to kDirectMaxBytes
// (encode_chunk.cu: ids written straight to mapped pinned memory), two above.
// Corpus workers (4 processes on one H200, 16 busy host cores, 4.5 MB calls, 2026-11-23
// 18:01 UTC, the profile switch), wall time per GB of text inside the lock: staging 0.29 s,
// H2D + kernels + D2H 0.34 s (kernels 0.08), copy-out of int32 ids 0.27 s. The uint16
// copy-out (GpuOutput::ids16) narrows in that pass, so the caller has no int32 array to pack:
// one GPU's corpus throughput 1.77-1.97 -> 2.05-2.21 GB/s
// (bench/results/2026-11-25-benchmarks-history.md). Encode slots (2026-11-24 19:14-19:22 UTC, H100,
// bench/bench_gpu_threads.py): one process, threads sharing one tokenizer, 4 MB calls: 1 slot (one
// call at a time, as before) 3.34 GB/s at 4 threads and 3.21 at 8; 4 slots 5.00 and 8.27; 256 KB
// calls at 8 threads 0.65 -> 1.96. A lone caller's latency is unchanged (one slot, no waiting).
// Corpus workers (4 processes per GPU) ran the same with 1 or 4 slots: their bound is elsewhere
// (bench/results/2026-11-25-benchmarks-history.md). Device memory: ~17 bytes per byte of text (+16
// for blockbpe*), per slot in use.
//
// This file: construction, tuning, setters and the call (its chunk plan, slot and lanes); one
// chunk on a lane is encode_chunk.cu, the slots and lanes encode_slot.cuh, the state both files
// share gpu_encoder_impl.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chunk_pipeline.h"
#include "common.cuh"
#include "gpu_encoder.h"
#include "gpu_encoder_impl.cuh"
#include "kernels.cuh"

namespace gputok {

using namespace cuda_detail;

namespace {

constexpr size_t kMaxChunk = size_t(1) << 31;  // 32-bit offsets and positions
// GpuTuning's defaults, measured:
// - pair_sparser 2: the device pair table has 4x the CPU table's slots (DeviceTables::build),
//   16 MiB at 10% load instead of 4 MiB at 41%. H200, 2026-11-22 05:37 UTC,
//   bench/gpu_ablation.py: kernels of a 76 KB sequence 0.090 -> 0.075 ms, of the 64 MB batch
//   4.70 -> 4.08 ms (2x slots: 0.075 / 4.19). Absent pairs end their probe sooner, and a warp
//   pass probes mostly absent pairs.
// - fused_max_bytes 128 KiB: per_word chunks above kSmallMaxBytes and up to this run as one
//   cooperative launch (fused_cooperative.cu) instead of the ~12-launch pipeline. H200,
//   2026-11-22 05:33-05:39 UTC, kernels fused vs not: 15 KB 0.062 vs 0.106 ms, 76 KB 0.070
//   vs 0.096, 150 KB 0.099 vs 0.101 (end to end 0.180 vs 0.165), 300 KB 0.201 vs 0.140, 1 MB
//   0.363 vs 0.233: above ~128 KB the multi-kernel pipeline's full occupancy wins. (That is
//   the nine-barrier kernel; the three-barrier lean kernel wins up to its capacity, 528 KiB:
//   GpuTuning::lean_max_bytes.)

}  // namespace

bool cuda_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) {
      // Without an NVIDIA driver the runtime reports "insufficient driver", which reads as if
      // an upgrade would help; say what is actually missing.
      int driver = 0;
      const bool no_driver = e == cudaErrorInsufficientDriver &&
                             cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0;
      *why = no_driver ? std::string("no CUDA device: no NVIDIA driver is installed")
                       : std::string("no CUDA device: ") + cudaGetErrorString(e);
    }
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device: cudaGetDeviceCount returned 0";
    return false;
  }
  return true;
}

// Tuning -> the encoder's switches (the constructor; values out of range are clamped).
void GpuEncoder::Impl::apply(const GpuTuning& t) {
  tuning = t;
  tuning.lanes = std::clamp<int>(t.lanes, 1, int(kMaxLanes));
  tuning.chunk_bytes = std::clamp<size_t>(t.chunk_bytes, size_t(4) << 10, kMaxChunk - 1);
  per_word.split = t.split_misses;
  per_word.multi_rank = t.multi_rank;
  per_word.warp_min = t.warp_min;
  per_word.warp_min_small = t.warp_min_small;
  per_word.long_blocks_per_sm = per_word_long_blocks_per_sm();
  n_encode_slots = std::clamp<size_t>(t.encode_slots, 1, kEncodeSlots);
  // One block per SM: grid barriers over 132 blocks cost less than over the ~4 per SM that
  // fit, and a mid-size input has no more work than that (76 KB: 0.105 -> 0.088 ms).
  coop_blocks = std::min(fused_cooperative_max_blocks(n_sms), n_sms);
  lean_blocks = t.fused_lean ? std::min(fused_lean_max_blocks(n_sms), n_sms) : 0;
  if (t.coop_blocks > 0) coop_blocks = std::min(coop_blocks, t.coop_blocks);
  if (t.coop_blocks > 0) lean_blocks = std::min(lean_blocks, t.coop_blocks);
}

GpuEncoder::GpuEncoder(std::shared_ptr<const Vocab> vocab, GpuOptions options, GpuTuning tuning) {
  wait_for_device_starts();  // a context being made by start_device: this thread would wait anyway
  std::string why;
  if (!cuda_available(&why)) throw CudaError(why);
  if (!vocab) throw CudaError("GpuEncoder needs a vocabulary");
  auto impl = std::make_unique<Impl>();
  impl->vocab = std::move(vocab);
  impl->opt = options;
  GPUTOK_CUDA(cudaSetDevice(options.device_id));
  GPUTOK_CUDA(
      cudaDeviceGetAttribute(&impl->n_sms, cudaDevAttrMultiProcessorCount, options.device_id));
  impl->apply(tuning);
  impl->tables.build(*impl->vocab, impl->counters.device_allocs,
                     std::clamp(tuning.pair_sparser, 0, 4), options.learned_cache_bytes);
  impl_ = std::move(impl);
}

GpuEncoder::~GpuEncoder() = default;

void GpuEncoder::set_gpu_pretokenize(bool on) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->opt.gpu_pretokenize = on;
}

void GpuEncoder::set_pool_limit(size_t bytes) {
  Impl& I = *impl_;
  {
    std::lock_guard<std::mutex> lock(I.mu);
    I.opt.pool_limit_bytes = bytes;
  }
  GPUTOK_CUDA(cudaSetDevice(I.opt.device_id));
  I.for_each_slot([&](StreamSlot& s) { s.trim(bytes); });
}

GpuCounters GpuEncoder::counters() const {
  Impl& I = *impl_;
  GpuCounters c;
  {
    std::lock_guard<std::mutex> lock(I.mu);
    c = I.counters;
  }
  c.device_bytes = 0;
  I.for_each_slot([&](StreamSlot& s) { s.add_to(c); });
  GPUTOK_CUDA(cudaSetDevice(I.opt.device_id));
  c.learned_bytes = I.tables.learned_used();
  return c;
}

int GpuEncoder::device_id() const { return impl_->opt.device_id; }
const GpuTuning& GpuEncoder::tuning() const { return impl_->tuning; }

float GpuEncoder::encode(const std::vector<std::string_view>& segments, Algorithm algorithm,
                         GpuOutput& out, std::vector<int64_t>& ends) {
  if (!out.ids32 == !out.ids16) throw CudaError("GpuEncoder::encode needs one output vector");
  Impl& I = *impl_;
  GpuOptions o;
  {
    std::lock_guard<std::mutex> lock(I.mu);
    o = I.opt;
  }
  GPUTOK_CUDA(cudaSetDevice(o.device_id));
  using clk = std::chrono::steady_clock;
  const auto t0 = clk::now();
  CallTimes t;
  size_t lanes = 1, lane_size = 0;
  const ChunkPlan plan = I.plan_call(segments, o, algorithm, lanes, lane_size);
  t.plan = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
  std::unique_lock<std::mutex> slot_lock;
  EncodeSlot& S = take_slot(I.encode_slots, I.n_encode_slots, 0,
                            I.encode_next.fetch_add(1, std::memory_order_relaxed), slot_lock);
  S.arena.ensure(lanes * lane_size, o.pool_limit_bytes, S.counters.device_allocs);
  for (size_t l = 0; l < lanes; ++l) S.lanes[l].open(o.blocking_sync);
  ThreadPool* pool = copy_pool_for(S.pool, o.copy_threads, plan.total_bytes);
  if (plan.chunks() > 1)
    reserve_output(pool, out, plan.total_bytes,
                   out.shift && !segments.empty() ? out.shift[segments.size() - 1] : 0,
                   I.tuning.huge_pages);
  float ms = 0.0f;
  ChunkStages st;
  st.submit = [&](size_t l, size_t k) {
    const size_t u0 = plan.first[k];
    I.submit_chunk(S, S.lanes[l], S.arena.base() + l * lane_size, o, segments,
                   plan.units.data() + u0, plan.first[k + 1] - u0, algorithm, t);
  };
  st.collect = [&](size_t l, size_t) {
    float chunk_ms = 0.0f;
    const ChunkIds r = I.collect_chunk(S, S.lanes[l], algorithm, chunk_ms, t);
    ms += chunk_ms;
    return r;
  };
  st.drain = [&] {
    for (size_t l = 0; l < lanes; ++l)
      if (S.lanes[l].stream) cudaStreamSynchronize(S.lanes[l].stream);
    cudaGetLastError();
  };
  const auto t_run = clk::now();
  run_chunks(plan, lanes, st, pool, out, ends, I.tuning.huge_pages);
  if (I.tuning.profile) {  // stitch: the rest of the run (copies out of pinned memory)
    const double run = std::chrono::duration<double, std::micro>(clk::now() - t_run).count();
    std::fprintf(stderr,
                 "[gputok gpu call] %zu bytes %zu chunks (largest %zu) %zu lanes: plan %.0f us, "
                 "submit %.0f (staging copy %.0f), wait %.0f, stitch %.0f; run %.0f us, "
                 "kernels %.0f\n",
                 plan.total_bytes, plan.chunks(), plan.max_chunk_bytes, lanes, t.plan, t.submit,
                 t.stage, t.wait, run - t.submit - t.wait, run, ms * 1e3);
  }
  return ms;
}

// The chunk size and lanes of a call: GpuTuning's, with the chunk halved (down to 1 MiB, or
// the tuning's own size if smaller) and then one lane dropped until the lanes fit under the
// pool limit. What still does not fit is refused by DeviceArena::ensure.
ChunkPlan GpuEncoder::Impl::plan_call(const std::vector<std::string_view>& segments,
                                      const GpuOptions& o, Algorithm algorithm, size_t& lanes,
                                      size_t& lane_size) const {
  size_t chunk = tuning.chunk_bytes;
  const size_t floor = std::min<size_t>(chunk, size_t(1) << 20);
  for (;;) {
    ChunkPlan plan = plan_chunks(segments, chunk);
    if (plan.max_chunk_bytes >= kMaxChunk)
      throw DeviceMemoryError("a single piece of " + std::to_string(plan.max_chunk_bytes) +
                              " bytes is over the GPU path's 2 GiB chunk limit");
    lanes = std::min<size_t>(size_t(tuning.lanes), std::max<size_t>(plan.chunks(), 1));
    lane_size = lane_bytes(uint32_t(plan.max_chunk_bytes), plan.max_chunk_units, algorithm,
                           o.gpu_pretokenize);
    const size_t limit = o.pool_limit_bytes;
    if (!limit || lanes * lane_size <= limit) return plan;
    if (chunk > floor) {
      chunk = std::max(floor, chunk / 2);
      continue;
    }
    if (lanes > 1 && lane_size <= limit) lanes = limit / lane_size;
    return plan;
  }
}
}  // namespace gputok
