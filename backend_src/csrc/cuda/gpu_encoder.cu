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
// A chunk is one launch up to kSmallMaxBytes (small.cu) and up to kFusedMaxBytes
// (fused_cooperative.cu, which also writes its counts and unit ends to mapped memory: one
// upload, one launch, one sync), ~12 launches above; one host sync up to kDirectMaxBytes (ids
// written straight to mapped pinned memory), two above.
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
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chunk_pipeline.h"
#include "common.cuh"
#include "device_tables.cuh"
#include "encoder.h"
#include "gpu_encoder.h"
#include "kernels.cuh"
#include "pool.cuh"
#include "pretokenize.h"

namespace gputok {

using namespace cuda_detail;

namespace {

constexpr size_t kMaxChunk = size_t(1) << 31;  // 32-bit offsets and positions
// Chunks up to this size write their ids straight into mapped pinned memory (the scatter
// kernel's stores cross PCIe), so one host sync ends the call instead of two: the token
// count no longer has to come back before the ids can be copied.
constexpr uint32_t kDirectMaxBytes = uint32_t(4) << 20;
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
//   0.363 vs 0.233: above ~128 KB the multi-kernel pipeline's full occupancy wins.

// Slots of the per-call miss memo (merge_per_word.cu) for a chunk of n bytes: one per 64
// bytes (the bench corpus has ~1 distinct miss per 150 bytes), a power of two, 8 KB-32 MB.
// The memo is zeroed per call, so it is kept to what the chunk can fill.
uint32_t memo_slots_for(uint32_t n, int64_t forced) {
  uint64_t want = forced >= 0 ? uint64_t(forced) : std::clamp<uint64_t>(n / 64, 1024, 1u << 22);
  if (want == 0) return 0;
  want = std::min<uint64_t>(want, 1u << 30);
  uint32_t slots = 1;
  while (slots < want) slots <<= 1;
  return slots;
}

// memcpy spread over the encoder's pool when it is large (staging a big batch). Threads are
// persistent: spawning 8 std::threads per call cost ~0.1 ms, as much as a 2 MB copy.
void parallel_copy(ThreadPool* pool, const std::vector<std::pair<const char*, size_t>>& src,
                   char* dst) {
  size_t total = 0;
  for (auto& s : src) total += s.second;
  const size_t nt = copy_threads_for(pool, total);
  if (nt <= 1) {
    for (auto& s : src) {
      std::memcpy(dst, s.first, s.second);
      dst += s.second;
    }
    return;
  }
  // Split the byte range [0, total) evenly; each slice copies its part of every source.
  pool->parallel_for(nt, nt, [&](size_t t) {
    const size_t lo = total * t / nt, hi = total * (t + 1) / nt;
    size_t off = 0;
    for (auto& s : src) {
      const size_t a = std::max(lo, off), b = std::min(hi, off + s.second);
      if (a < b) std::memcpy(dst + a, s.first + (a - off), b - a);
      off += s.second;
      if (off >= hi) break;
    }
  });
}

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

// The pool for a host copy of `bytes` (made on first need), or null where one thread does:
// under 1 MB, or with copy_threads 1.
ThreadPool* copy_pool_for(std::unique_ptr<ThreadPool>& pool, int copy_threads, size_t bytes) {
  if (bytes < (size_t(1) << 20) || copy_threads == 1) return nullptr;
  if (!pool) {
    const unsigned hw = std::thread::hardware_concurrency();
    const unsigned want = copy_threads > 0 ? unsigned(copy_threads) : 16u;
    pool = std::make_unique<ThreadPool>(std::min<unsigned>(hw ? hw : 1, want));
  }
  return pool.get();
}

// Waits for everything queued on `stream`: spinning (cudaStreamSynchronize under the default
// schedule) or, given a blocking-sync event (GpuOptions::blocking_sync), asleep on it.
void wait_for(cudaStream_t stream, cudaEvent_t ev_sync) {
  if (!ev_sync) {
    GPUTOK_CUDA(cudaStreamSynchronize(stream));
    return;
  }
  GPUTOK_CUDA(cudaEventRecord(ev_sync, stream));
  GPUTOK_CUDA(cudaEventSynchronize(ev_sync));
}

// A stream with buffers of its own, held by one call at a time (mu): kEncodeSlots of them, so
// concurrent calls stage, copy out and run their kernels at once instead of in turn, and their
// kernels overlap on the GPU (one call rarely fills it: a corpus batch's ~4 MB).
// Each slot's buffers only grow (pool.cuh), up to GpuOptions::pool_limit_bytes each.
struct StreamSlot {
  std::mutex mu;
  cudaStream_t stream = nullptr;  // made on the slot's first use
  cudaEvent_t ev_sync = nullptr;  // blocking-sync wait (GpuOptions::blocking_sync)
  DeviceArena arena;
  PinnedBuffer pin_in, pin_out;
  GpuCounters counters;
  std::unique_ptr<ThreadPool> pool;  // host copies; a ThreadPool runs one job at a time

  // Makes the stream (and the blocking-sync event) on first use; the caller holds mu and has
  // set the device. Without the event, wait() spins on the stream instead.
  void open(bool blocking_sync) {
    if (!stream) GPUTOK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    if (blocking_sync && !ev_sync)
      GPUTOK_CUDA(
          cudaEventCreateWithFlags(&ev_sync, cudaEventBlockingSync | cudaEventDisableTiming));
  }
  void wait() { wait_for(stream, ev_sync); }
  // Frees the device buffer when it is over `limit` (set_pool_limit); the caller holds mu.
  void trim(size_t limit) {
    if (!limit || arena.capacity() <= limit) return;
    if (stream) GPUTOK_CUDA(cudaStreamSynchronize(stream));
    arena.release();
  }
  void add_to(GpuCounters& c) const {
    c.device_allocs += counters.device_allocs;
    c.pinned_allocs += counters.pinned_allocs;
    c.launches += counters.launches;
    c.device_bytes += arena.capacity();
  }
  ~StreamSlot() {
    if (stream) cudaStreamSynchronize(stream);
    arena.release();
    pin_in.release();
    pin_out.release();
    if (ev_sync) cudaEventDestroy(ev_sync);
    if (stream) cudaStreamDestroy(stream);
  }
};

// A slot of slots[0, n), locked: the first free one from `first` on; when all are busy, waits
// for slots[wait_on % n].
template <typename Slot>
Slot& take_slot(Slot* slots, size_t n, size_t first, size_t wait_on,
                std::unique_lock<std::mutex>& lock) {
  for (size_t k = 0; k < n; ++k) {
    Slot& s = slots[(first + k) % n];
    std::unique_lock<std::mutex> l(s.mu, std::try_to_lock);
    if (l.owns_lock()) {
      lock = std::move(l);
      return s;
    }
  }
  Slot& s = slots[wait_on % n];
  lock = std::unique_lock<std::mutex>(s.mu);
  return s;
}

// Tokenizing: up to 4 calls at once (GpuTuning::encode_slots: 1-8; 1 is the encoder before
// slots, one call at a time). Calls take the lowest free slot, so one caller at a time uses
// (and allocates) slot 0 only. Measured: the performance notes at the top.
constexpr size_t kEncodeSlots = 8;  // slots made (lazily: a slot costs nothing unused)
constexpr size_t kMaxLanes = 4;     // chunks of one call in flight (GpuTuning::lanes)

// One chunk in flight: a stream, events and pinned buffers of its own, and a part of its
// slot's device arena. What submit_chunk leaves for collect_chunk is kept here too.
struct EncodeLane {
  cudaStream_t stream = nullptr;
  cudaEvent_t ev_sync = nullptr;  // blocking-sync wait (GpuOptions::blocking_sync)
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  cudaEvent_t ev_pre = nullptr, ev_merge = nullptr, ev_mid = nullptr;  // GpuTuning::profile
  cudaGraphExec_t graph_exec = nullptr;                                // GpuTuning::graph
  PinnedBuffer pin_in, pin_out;
  std::vector<Piece> pieces;  // CPU pretokenization scratch
  std::vector<uint32_t> unit_off, unit_ends;
  std::vector<std::pair<const char*, size_t>> src;
  // The chunk in flight.
  cuda_detail::ChunkDev c;
  size_t n_units = 0, head = 0;
  uint32_t n_pieces_host = 0;
  bool empty = true, small = false, fused = false, lean = false, direct = false;
  bool direct_head = false;
  bool graph = false;
  double t_stage_us = 0, t_launch_us = 0, t_submit_us = 0;  // GpuTuning::profile

  void open(bool blocking_sync) {
    if (!stream) GPUTOK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    if (blocking_sync && !ev_sync)
      GPUTOK_CUDA(
          cudaEventCreateWithFlags(&ev_sync, cudaEventBlockingSync | cudaEventDisableTiming));
    for (cudaEvent_t* e : {&ev0, &ev1, &ev_pre, &ev_merge, &ev_mid})
      if (!*e) GPUTOK_CUDA(cudaEventCreate(e));
  }
  void wait() { wait_for(stream, ev_sync); }
  ~EncodeLane() {
    if (stream) cudaStreamSynchronize(stream);
    for (cudaEvent_t e : {ev0, ev1, ev_pre, ev_merge, ev_mid, ev_sync})
      if (e) cudaEventDestroy(e);
    if (graph_exec) cudaGraphExecDestroy(graph_exec);
    pin_in.release();
    pin_out.release();
    if (stream) cudaStreamDestroy(stream);
  }
};

// A slot's lanes share its arena (one block, a part per lane) and its copy threads.
struct EncodeSlot : StreamSlot {
  EncodeLane lanes[kMaxLanes];
  ~EncodeSlot() {
    for (EncodeLane& l : lanes)
      if (l.stream) cudaStreamSynchronize(l.stream);
  }
};

// Host-side times of one call (GpuTuning::profile), microseconds.
struct CallTimes {
  double plan = 0, stage = 0, submit = 0, wait = 0;
};

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
                     std::clamp(tuning.pair_sparser, 0, 4));
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

void GpuEncoder::Impl::lay_out(Carver& cv, EncodeLane& L, uint32_t n, size_t n_units,
                               Algorithm algorithm, bool gpu_pretok) const {
  // The text (+ at least 16 zero bytes) and the unit offsets are one block, so one copy
  // uploads both.
  const size_t in_text = (size_t(n) + 16 + 15) & ~size_t(15);
  const bool per_word_alg = algorithm == Algorithm::kPerWord;
  L.small = per_word_alg && gpu_pretok && n <= kSmallMaxBytes;
  L.fused =
      per_word_alg && gpu_pretok && !L.small && n <= tuning.fused_max_bytes && coop_blocks > 0;
  // The lean kernel takes at most kLeanSpan bytes per block.
  L.lean = L.fused && lean_blocks > 0 && uint64_t(n) <= uint64_t(lean_blocks) * kLeanSpan;
  const uint32_t memo_n = per_word_alg && per_word.split && !L.small && !L.fused
                              ? memo_slots_for(n, tuning.memo_slots)
                              : 0;
  const size_t cub_bytes = cub_temp_bytes(n);
  ChunkDev& c = L.c;
  c = ChunkDev{};
  c.text = cv.take<uint8_t>(in_text + (n_units + 1) * 4);
  c.unit_off = reinterpret_cast<const uint32_t*>(c.text + in_text);
  c.unit_start = cv.take<uint8_t>(n + 16);
  c.piece_flag = cv.take<uint8_t>(n + 16);
  c.piece_starts = cv.take<uint32_t>(size_t(n) + 1);
  c.counters = cv.take<uint32_t>(16);
  c.long_cap = n / (kWarpMinFloor + 1) + 1;
  c.long_list = cv.take<uint32_t>(L.lean ? 2 * size_t(c.long_cap) : c.long_cap);
  c.tok = cv.take<int32_t>(size_t(n) + 1);
  c.aux = cv.take<int32_t>(size_t(n) + 1);
  c.scratch = per_word_alg ? nullptr : cv.take<int32_t>(size_t(n) * 4);  // blockbpe: 16 B/B
  c.unit_ends = cv.take<uint32_t>(n_units);
  c.block_sums = cv.take<uint32_t>(2 * size_t(kMaxCoopBlocks));
  c.tile_sums = cv.take<uint32_t>(compact_tile_sums(n));
  c.memo = memo_n ? cv.take<unsigned long long>(memo_n) : nullptr;
  c.memo_mask = memo_n ? memo_n - 1 : 0;
  c.phase_ns = tuning.profile ? cv.take<uint64_t>(kCoopStamps) : nullptr;
  c.cub_temp = cv.take<char>(cub_bytes);
  c.cub_bytes = cub_bytes;
  c.ids_out = reinterpret_cast<int32_t*>(c.piece_starts);
  c.n = n;
  c.n_units = uint32_t(n_units);
}

size_t GpuEncoder::Impl::lane_bytes(uint32_t n, size_t n_units, Algorithm algorithm,
                                    bool gpu_pretok) const {
  EncodeLane probe;
  Carver measure(nullptr);
  lay_out(measure, probe, n, n_units, algorithm, gpu_pretok);
  return (measure.used() + 255) & ~size_t(255);
}

// Host staging of a chunk: the text (+16 zero bytes), unit offsets and, with CPU
// pretokenization, the pieces, into the lane's pinned buffer; then the uploads.
void GpuEncoder::Impl::stage_chunk(EncodeSlot& S, EncodeLane& L, const GpuOptions& o,
                                   bool gpu_pretok, CallTimes& t) {
  using clk = std::chrono::steady_clock;
  const ChunkDev& c = L.c;
  const uint32_t n = c.n;
  const size_t nu = L.n_units;
  uint32_t n_pieces_host = 0;
  if (!gpu_pretok) {  // pieces found here, merged there
    L.pieces.clear();
    const UnicodeTableView uni = unicode_table();
    for (size_t u = 0; u < nu; ++u)
      pretokenize(uni, reinterpret_cast<const uint8_t*>(L.src[u].first), L.src[u].second, L.pieces,
                  L.unit_off[u]);
    n_pieces_host = uint32_t(L.pieces.size());
  }
  L.n_pieces_host = n_pieces_host;
  const size_t in_text = (size_t(n) + 16 + 15) & ~size_t(15);
  const size_t in_bytes = in_text + (nu + 1) * 4 + 4 + size_t(n_pieces_host) * 4;
  L.pin_in.ensure(in_bytes, S.counters.pinned_allocs);
  char* hin = L.pin_in.base();
  const auto t_copy = clk::now();
  parallel_copy(copy_pool_for(S.pool, o.copy_threads, n), L.src, hin);
  t.stage += std::chrono::duration<double, std::micro>(clk::now() - t_copy).count();
  std::memset(hin + n, 0, in_text - n);
  std::memcpy(hin + in_text, L.unit_off.data(), (nu + 1) * 4);
  GPUTOK_CUDA(cudaMemcpyAsync(const_cast<uint8_t*>(c.text), hin, in_text + (nu + 1) * 4,
                              cudaMemcpyHostToDevice, L.stream));
  if (!L.fused)  // the fused kernel zeroes its counters itself
    GPUTOK_CUDA(cudaMemsetAsync(c.counters, 0, 16 * sizeof(uint32_t), L.stream));
  if (!gpu_pretok) {
    uint32_t* hp = reinterpret_cast<uint32_t*>(hin + in_text + (nu + 1) * 4);
    hp[0] = n_pieces_host;
    for (uint32_t p = 0; p < n_pieces_host; ++p) hp[1 + p] = L.pieces[p].start;
    GPUTOK_CUDA(cudaMemcpyAsync(c.counters, hp, 4, cudaMemcpyHostToDevice, L.stream));
    GPUTOK_CUDA(cudaMemcpyAsync(c.piece_starts, hp + 1, size_t(n_pieces_host) * 4,
                                cudaMemcpyHostToDevice, L.stream));
  }
}

// Stages and launches one chunk on lane L, whose device buffers start at `dev`, and queues
// the copies back of its counts (and of a small chunk's ids). Nothing here waits for the GPU.
void GpuEncoder::Impl::submit_chunk(EncodeSlot& S, EncodeLane& L, char* dev, const GpuOptions& o,
                                    const std::vector<std::string_view>& segments,
                                    const ChunkUnit* units, size_t n_units, Algorithm algorithm,
                                    CallTimes& t) {
  using clk = std::chrono::steady_clock;
  const auto t0 = clk::now();
  L.src.clear();
  L.unit_off.assign(n_units + 1, 0);
  uint32_t off = 0;
  for (size_t u = 0; u < n_units; ++u) {
    L.unit_off[u] = off;
    L.src.emplace_back(segments[units[u].seg].data() + units[u].begin,
                       units[u].end - units[u].begin);
    off += uint32_t(units[u].end - units[u].begin);
  }
  L.unit_off[n_units] = off;
  L.n_units = n_units;
  L.empty = off == 0;
  if (L.empty) return;
  const bool gpu_pretok = o.gpu_pretokenize;
  Carver cv(dev);
  lay_out(cv, L, off, n_units, algorithm, gpu_pretok);
  const auto t_stage = clk::now();
  stage_chunk(S, L, o, gpu_pretok, t);
  const auto t_staged = clk::now();
  L.t_stage_us = std::chrono::duration<double, std::micro>(t_staged - t_stage).count();
  const uint32_t n = off;
  L.head = 64 + ((n_units * 4 + 63) & ~size_t(63));
  L.pin_out.ensure(L.head + (L.small || n <= kDirectMaxBytes ? size_t(n) * 4 : 0),
                   S.counters.pinned_allocs);
  L.direct = !L.small && n <= kDirectMaxBytes && L.pin_out.device_base() && tuning.direct_output;
  if (L.direct) L.c.ids_out = reinterpret_cast<int32_t*>(L.pin_out.device_base() + L.head);
  // The fused kernel also writes the counts and unit ends there: no copies back at all.
  L.direct_head = L.direct && L.fused;
  if (L.direct_head) L.c.host_head = reinterpret_cast<uint32_t*>(L.pin_out.device_base());
  const auto t_enqueue = clk::now();
  enqueue_kernels(S, L, algorithm, gpu_pretok);
  L.t_launch_us = std::chrono::duration<double, std::micro>(clk::now() - t_enqueue).count();
  // Counters and unit ends first (the token count sizes the ids copy). A small chunk copies
  // ids for the worst case (n tokens, <= 4 KB) in the same round trip; a direct chunk's
  // scatter kernel has already written them into the lane's pin_out.
  if (!L.direct_head) {
    GPUTOK_CUDA(cudaMemcpyAsync(L.pin_out.base(), L.c.counters, 16 * sizeof(uint32_t),
                                cudaMemcpyDeviceToHost, L.stream));
    GPUTOK_CUDA(cudaMemcpyAsync(L.pin_out.base() + 64, L.c.unit_ends, n_units * 4,
                                cudaMemcpyDeviceToHost, L.stream));
  }
  if (L.small)
    GPUTOK_CUDA(cudaMemcpyAsync(L.pin_out.base() + L.head, L.c.ids_out, size_t(n) * 4,
                                cudaMemcpyDeviceToHost, L.stream));
  L.t_submit_us = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
  t.submit += L.t_submit_us;
}

void GpuEncoder::Impl::enqueue_kernels(EncodeSlot& S, EncodeLane& L, Algorithm algorithm,
                                       bool gpu_pretok) {
  const ChunkDev& c = L.c;
  L.graph = tuning.graph && !L.small && !L.fused;
  // Inside a capture an event record is only a dependency unless marked external; the
  // per-stage profile events are left out of graphs.
  const bool prof = tuning.profile && !L.graph;
  const bool graph = L.graph;
  auto record = [&](cudaEvent_t e) {
    GPUTOK_CUDA(graph ? cudaEventRecordWithFlags(e, L.stream, cudaEventRecordExternal)
                      : cudaEventRecord(e, L.stream));
  };
  auto enqueue = [&] {
    record(L.ev0);
    int launches = 0;
    const VocabView v = tables.vocab();
    const PieceCacheView cache = tuning.piece_cache ? tables.cache() : PieceCacheView{};
    if (L.small || L.fused) {  // the whole per_word pipeline in one launch
      const uint32_t wm = per_word.warp_min_for(c.n);
      const UnicodeTableView uni = tables.unicode();
      launches += L.small  ? launch_fused_small(c, uni, v, cache, L.stream)
                  : L.lean ? launch_fused_lean(c, uni, v, cache, wm, per_word.multi_rank,
                                               tuning.lean_take_early, lean_blocks, L.stream)
                           : launch_fused_cooperative(c, uni, v, cache, wm, per_word.multi_rank,
                                                      coop_blocks, L.stream);
      if (prof)
        for (cudaEvent_t e : {L.ev_pre, L.ev_mid, L.ev_merge})
          GPUTOK_CUDA(cudaEventRecord(e, L.stream));
    } else {
      launches += gpu_pretok ? launch_pretokenize(c, tables.unicode(), L.stream)
                             : launch_flags_from_pieces(c, L.n_pieces_host, L.stream);
      if (prof) GPUTOK_CUDA(cudaEventRecord(L.ev_pre, L.stream));
      if (algorithm == Algorithm::kPerWord)
        launches += launch_merge_per_word(c, v, cache, n_sms, per_word, L.stream,
                                          prof ? L.ev_mid : nullptr);
      else
        launches += launch_merge_blockbpe(c, v, algorithm == Algorithm::kBlockBpeOptimized, n_sms,
                                          L.stream);
      if (prof) GPUTOK_CUDA(cudaEventRecord(L.ev_merge, L.stream));
      launches += launch_compact(c, L.stream);
    }
    record(L.ev1);
    S.counters.launches += uint64_t(launches);
  };
  if (!graph) {
    enqueue();
    return;
  }
  GPUTOK_CUDA(cudaStreamBeginCapture(L.stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t g = nullptr;
  try {
    enqueue();
  } catch (...) {
    cudaStreamEndCapture(L.stream, &g);
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
    throw;
  }
  GPUTOK_CUDA(cudaStreamEndCapture(L.stream, &g));
  if (L.graph_exec) {
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(L.graph_exec, g, &info) != cudaSuccess) {
      cudaGetLastError();
      cudaGraphExecDestroy(L.graph_exec);
      L.graph_exec = nullptr;
    }
  }
  const cudaError_t e = L.graph_exec ? cudaSuccess : cudaGraphInstantiate(&L.graph_exec, g, 0);
  cudaGraphDestroy(g);
  GPUTOK_CUDA(e);
  GPUTOK_CUDA(cudaGraphLaunch(L.graph_exec, L.stream));
}

// Waits for lane L's chunk and brings its ids into the lane's pinned buffer: one sync for a
// small or direct chunk, two otherwise (the count sizes the ids copy).
ChunkIds GpuEncoder::Impl::collect_chunk(EncodeSlot& S, EncodeLane& L, Algorithm algorithm,
                                         float& ms, CallTimes& t) {
  L.unit_ends.assign(L.n_units, 0);
  if (L.empty) return ChunkIds{nullptr, 0, L.unit_ends.data()};
  using clk = std::chrono::steady_clock;
  const auto t0 = clk::now();
  L.wait();
  const uint32_t total = reinterpret_cast<const uint32_t*>(L.pin_out.base())[2];
  std::memcpy(L.unit_ends.data(), L.pin_out.base() + 64, L.n_units * 4);
  if (total > L.c.n) throw CudaError("GPU encoder produced more tokens than bytes");
  size_t ids_at = L.head;
  if (!L.small && !L.direct && total) {
    ids_at = 0;
    L.pin_out.ensure(size_t(total) * 4, S.counters.pinned_allocs);
    GPUTOK_CUDA(cudaMemcpyAsync(L.pin_out.base(), L.c.ids_out, size_t(total) * 4,
                                cudaMemcpyDeviceToHost, L.stream));
    L.wait();
  }
  const double wait_us = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
  t.wait += wait_us;
  GPUTOK_CUDA(cudaEventElapsedTime(&ms, L.ev0, L.ev1));
  if (tuning.profile && !L.graph) print_chunk(L, total, ms, algorithm, wait_us);
  return ChunkIds{reinterpret_cast<const int32_t*>(L.pin_out.base() + ids_at), total,
                  L.unit_ends.data()};
}

// GpuTuning::profile: one line per chunk on stderr (kernel times from the lane's events).
void GpuEncoder::Impl::print_chunk(EncodeLane& L, uint32_t total, float ms, Algorithm algorithm,
                                   double wait_us) {
  std::string stages;  // the fused kernel's own split, from its timestamps
  if (L.fused) {
    uint64_t ts[kCoopStamps];
    GPUTOK_CUDA(cudaMemcpy(ts, L.c.phase_ns, sizeof ts, cudaMemcpyDeviceToHost));
    static const char* names[kCoopStamps - 1] = {"zero",  "units", "flags", "starts", "pieces",
                                                 "warps", "count", "ids",   "ends"};
    static const char* lean_names[4] = {"starts", "pieces", "warps", "ids"};
    const int stamps = L.lean ? 5 : kCoopStamps;
    stages = L.lean ? " [lean:" : " [fused:";
    for (int k = 1; k < stamps; ++k)
      stages += " " + std::string(L.lean ? lean_names[k - 1] : names[k - 1]) + " " +
                std::to_string(double(ts[k] - ts[k - 1]) / 1e3).substr(0, 5);
    stages += " us]";
  }
  float pre = 0, merge = 0, shortm = 0;
  GPUTOK_CUDA(cudaEventElapsedTime(&pre, L.ev0, L.ev_pre));
  GPUTOK_CUDA(cudaEventElapsedTime(&merge, L.ev_pre, L.ev_merge));
  if (algorithm == Algorithm::kPerWord)
    GPUTOK_CUDA(cudaEventElapsedTime(&shortm, L.ev_pre, L.ev_mid));
  std::fprintf(stderr,
               "[gputok gpu] %u bytes %zu units %u tokens: submit %.0f us (staging %.1f, "
               "launch %.1f), wait %.0f us (kernels %.0f us: pretok %.0f, merge %.0f [short "
               "%.0f], compact %.0f)%s, algorithm %d\n",
               L.c.n, L.n_units, total, L.t_submit_us, L.t_stage_us, L.t_launch_us, wait_us,
               ms * 1e3, pre * 1e3, merge * 1e3, shortm * 1e3, (ms - pre - merge) * 1e3,
               stages.c_str(), int(algorithm));
}
}  // namespace gputok
