// GpuEncoder (gpu_encoder.h): host orchestration of the CUDA path.
//
// One call: the segments are cut into units (a segment longer than kChunkTarget is split at
// is_safe_split positions, which keeps pieces, and therefore ids, unchanged), units are
// grouped into chunks of about kChunkTarget bytes, and each chunk runs
//   pinned staging -> H2D -> [pretokenize, merge, compact] -> D2H count + ends -> D2H ids
// on the stream of the call's slot (EncodeSlot: up to 4 calls at once). A slot's buffers are
// one device arena and two pinned buffers that only grow (pool.cuh), so steady-state calls
// make no cudaMalloc/cudaHostAlloc.
// Kernel time is measured with CUDA events around the kernels of each chunk and summed.
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
// 18:01 UTC, GPUTOK_GPU_PROFILE=1), wall time per GB of text inside the lock: staging 0.29 s,
// H2D + kernels + D2H 0.34 s (kernels 0.08), copy-out of int32 ids 0.27 s. The uint16
// copy-out (GpuOutput::ids16) narrows in that pass, so the caller has no int32 array to pack:
// one GPU's corpus throughput 1.77-1.97 -> 2.05-2.21 GB/s (docs/benchmarks.md).
// Encode slots (2026-11-24 19:14-19:22 UTC, H100, bench/bench_gpu_threads.py): one process,
// threads sharing one tokenizer, 4 MB calls: 1 slot (one call at a time, as before) 3.34 GB/s
// at 4 threads and 3.21 at 8; 4 slots 5.00 and 8.27; 256 KB calls at 8 threads 0.65 -> 1.96.
// A lone caller's latency is unchanged (one slot, no waiting). Corpus workers (4 processes per
// GPU) ran the same with 1 or 4 slots: their bound is elsewhere (docs/benchmarks.md).
// Device memory: ~17 bytes per byte of text (+16 for blockbpe*), per slot in use.
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

#include "common.cuh"
#include "device_tables.cuh"
#include "encoder.h"
#include "gpu_encoder.h"
#include "kernels.cuh"
#include "pack.h"
#include "pool.cuh"
#include "pretokenize.h"

namespace gputok {

using namespace cuda_detail;

namespace {

constexpr size_t kChunkTarget = size_t(64) << 20;  // bytes of text per chunk
constexpr size_t kMaxChunk = size_t(1) << 31;      // 32-bit offsets and positions
// Chunks up to this size write their ids straight into mapped pinned memory (the scatter
// kernel's stores cross PCIe), so one host sync ends the call instead of two: the token
// count no longer has to come back before the ids can be copied.
constexpr uint32_t kDirectMaxBytes = uint32_t(4) << 20;
// per_word chunks above kSmallMaxBytes and up to this size run as one cooperative launch
// (fused_cooperative.cu) instead of the ~12-launch pipeline; GPUTOK_GPU_FUSED_MAX overrides
// it (0 turns the fused path off).
// The device pair table has 2^kPairTableSparser times the CPU table's slots
// (DeviceTables::build); GPUTOK_GPU_PAIR_SPARSER overrides it. 4x: 16 MiB at 10% load
// instead of 4 MiB at 41%. Measured (H200, 2026-11-22 05:37 UTC, bench/gpu_ablation.py):
// kernels of a 76 KB sequence 0.090 -> 0.075 ms, of the 64 MB batch 4.70 -> 4.08 ms (2x
// slots: 0.075 / 4.19). Absent pairs end their probe sooner, and a warp pass probes mostly
// absent pairs.
constexpr int kPairTableSparser = 2;
// Measured (H200, 2026-11-22 05:33-05:39 UTC, bench/gpu_ablation.py, kernels fused vs not):
// 15 KB 0.062 vs 0.106 ms, 76 KB 0.070 vs 0.096, 150 KB 0.099 vs 0.101 (end to end 0.180 vs
// 0.165), 300 KB 0.201 vs 0.140, 1 MB 0.363 vs 0.233: above ~128 KB the multi-kernel
// pipeline's full occupancy wins.
constexpr uint32_t kFusedMaxBytes = uint32_t(128) << 10;

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

struct Unit {
  size_t seg;
  size_t begin, end;  // byte range inside the segment
  bool last;          // closes its segment
};

// memcpy spread over the encoder's pool when it is large (staging a big batch). Threads are
// persistent: spawning 8 std::threads per call cost ~0.1 ms, as much as a 2 MB copy.
void parallel_copy(ThreadPool* pool, const std::vector<std::pair<const char*, size_t>>& src,
                   char* dst) {
  size_t total = 0;
  for (auto& s : src) total += s.second;
  const size_t nt = pool ? std::min<size_t>(pool->size(), (total >> 18) + 1) : 1;
  if (total < (size_t(1) << 20) || nt <= 1) {
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

// fn(lo, hi) over [0, count) in slices on the pool when the range is large.
template <typename Fn>
void parallel_slices(ThreadPool* pool, size_t count, Fn&& fn) {
  const size_t nt = pool ? std::min<size_t>(pool->size(), (count >> 16) + 1) : 1;
  if (count < (size_t(1) << 18) || nt <= 1) {
    fn(size_t(0), count);
    return;
  }
  pool->parallel_for(nt, nt, [&](size_t t) { fn(count * t / nt, count * (t + 1) / nt); });
}

// Copies a chunk's `total` ids out of pinned memory into `out` (see GpuOutput): int32 as they
// are, or narrowed to uint16 with each unit's ids moved by its segment's shift.
void copy_out(ThreadPool* pool, const int32_t* src, uint32_t total, const Unit* units,
              const uint32_t* unit_ends, size_t n_units, GpuOutput& out) {
  const int64_t base = out.tokens;
  if (out.ids32) {
    IdVector& ids = *out.ids32;
    ids.resize(size_t(base) + total);
    int32_t* dst = ids.data() + base;
    parallel_slices(pool, total, [&](size_t lo, size_t hi) {
      std::memcpy(dst + lo, src + lo, (hi - lo) * sizeof(int32_t));
    });
    return;
  }
  U16Vector& ids = *out.ids16;
  auto shift_of = [&](size_t u) { return out.shift ? out.shift[units[u].seg] : int64_t(0); };
  if (n_units)
    ids.resize(std::max<size_t>(ids.size(), size_t(base + total + shift_of(n_units - 1))));
  uint16_t* dst = ids.data() + base;
  std::mutex bad_mu;
  parallel_slices(pool, total, [&](size_t lo, size_t hi) {
    // The units overlapping [lo, hi): unit u's ids are [unit_ends[u - 1], unit_ends[u]).
    size_t u = size_t(std::upper_bound(unit_ends, unit_ends + n_units, uint32_t(lo)) - unit_ends);
    for (size_t a = lo; a < hi && u < n_units; ++u) {
      const size_t b = std::min<size_t>(hi, unit_ends[u]);
      if (b <= a) continue;
      const int64_t bad = narrow_uint16(src + a, b - a, dst + a + shift_of(u));
      if (bad >= 0) {
        std::lock_guard<std::mutex> lock(bad_mu);
        const int64_t at = base + int64_t(a) + bad;
        if (out.first_bad < 0 || at < out.first_bad) {
          out.first_bad = at;
          out.bad_value = src[a + size_t(bad)];
        }
      }
      a = b;
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
    const unsigned want = copy_threads > 0 ? unsigned(copy_threads) : 8u;
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

// A stream with buffers of its own, held by one call at a time (mu). The encoder has two sets:
// kEncodeSlots for tokenizing and kSnappySlots for Parquet decoding, so concurrent calls stage,
// copy out and run their kernels at once instead of in turn, and their kernels overlap on the
// GPU (one call rarely fills it: a corpus batch's ~4 MB, a decode's ~300 one-warp blocks).
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

// Parquet decoding: a decode waits neither for a tokenizer call nor for another decode.
constexpr size_t kSnappySlots = 4;
struct SnappySlot : StreamSlot {
  cudaEvent_t marks[7] = {};  // GPUTOK_GPU_PROFILE=1: the kernels' times
  ~SnappySlot() {
    if (stream) cudaStreamSynchronize(stream);
    for (cudaEvent_t e : marks)
      if (e) cudaEventDestroy(e);
  }
};

// Tokenizing: up to 4 calls at once (GPUTOK_GPU_ENCODE_SLOTS: 1-8; 1 is the
// encoder before slots, one call at a time). Calls take the lowest free slot, so one caller
// at a time uses (and allocates) slot 0 only. Measured: the performance notes at the top.
constexpr size_t kEncodeSlots = 8;         // slots made (lazily: a slot costs nothing unused)
constexpr size_t kDefaultEncodeSlots = 4;  // slots used unless GPUTOK_GPU_ENCODE_SLOTS says
struct EncodeSlot : StreamSlot {
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  cudaEvent_t ev_pre = nullptr, ev_merge = nullptr, ev_mid = nullptr;  // GPUTOK_GPU_PROFILE=1
  cudaGraphExec_t graph_exec = nullptr;                                // GPUTOK_GPU_GRAPH=1
  std::vector<Piece> pieces;  // CPU pretokenization scratch

  // The stream and the events, each made once (a failed creation is tried again next call).
  void open_events(bool blocking_sync) {
    open(blocking_sync);
    for (cudaEvent_t* e : {&ev0, &ev1, &ev_pre, &ev_merge, &ev_mid})
      if (!*e) GPUTOK_CUDA(cudaEventCreate(e));
  }
  ~EncodeSlot() {
    if (stream) cudaStreamSynchronize(stream);
    for (cudaEvent_t e : {ev0, ev1, ev_pre, ev_merge, ev_mid})
      if (e) cudaEventDestroy(e);
    if (graph_exec) cudaGraphExecDestroy(graph_exec);
  }
};

struct GpuEncoder::Impl {
  // Guards `opt` (its setters) and `counters`; calls copy the options they need under it and
  // then hold a slot, not this.
  mutable std::mutex mu;
  std::shared_ptr<const Vocab> vocab;
  GpuOptions opt;
  int n_sms = 0;
  bool profile = false;
  SnappyOptions snappy;       // GPUTOK_SNAPPY_SEGMENT, GPUTOK_SNAPPY_DECODE (ablations)
  bool use_cache = true;      // GPUTOK_GPU_NO_CACHE=1 turns the whole-piece cache off (ablation)
  PerWordOptions per_word;    // ablation switches from the environment (kernels.cuh)
  bool direct_output = true;  // GPUTOK_GPU_NO_DIRECT=1: always copy ids back after a sync
  uint32_t fused_max = kFusedMaxBytes;  // GPUTOK_GPU_FUSED_MAX
  int64_t memo_slots = -1;              // GPUTOK_GPU_MEMO_SLOTS (0: no memo); -1: memo_slots_for
  int coop_blocks = 0;                  // resident blocks of the fused kernel; 0: no fused path
  // GPUTOK_GPU_GRAPH=1 (experiment): the kernels of a multi-kernel chunk are captured into
  // a CUDA graph and launched as one; the executable graph is updated in place per call.
  bool use_graph = false;
  DeviceTables tables;   // read-only once built: shared by every slot's kernels
  GpuCounters counters;  // the tables' allocations
  EncodeSlot encode_slots[kEncodeSlots];
  size_t n_encode_slots = kDefaultEncodeSlots;  // GPUTOK_GPU_ENCODE_SLOTS
  std::atomic<uint32_t> encode_next{0};         // which busy slot a call waits for
  SnappySlot snappy_slots[kSnappySlots];
  std::atomic<uint32_t> snappy_next{0};
  std::atomic<size_t> snappy_pool_limit{0};  // the pool limit, read by decodes without `mu`

  ~Impl() {
    cudaSetDevice(opt.device_id);
    tables.release();
  }

  // fn(slot) for every slot, encode and decode, each under its lock in turn.
  template <typename Fn>
  void for_each_slot(Fn&& fn) {
    for (EncodeSlot& s : encode_slots) {
      std::lock_guard<std::mutex> lock(s.mu);
      fn(s);
    }
    for (SnappySlot& s : snappy_slots) {
      std::lock_guard<std::mutex> lock(s.mu);
      fn(s);
    }
  }

  float run_chunk(EncodeSlot& S, const GpuOptions& o, const std::vector<std::string_view>& segments,
                  const Unit* units, size_t n_units, Algorithm algorithm, GpuOutput& out,
                  std::vector<int64_t>& ends);
};

GpuEncoder::GpuEncoder(std::shared_ptr<const Vocab> vocab, GpuOptions options) {
  std::string why;
  if (!cuda_available(&why)) throw CudaError(why);
  if (!vocab) throw CudaError("GpuEncoder needs a vocabulary");
  auto impl = std::make_unique<Impl>();
  impl->vocab = std::move(vocab);
  impl->opt = options;
  impl->snappy_pool_limit.store(options.pool_limit_bytes);
  GPUTOK_CUDA(cudaSetDevice(options.device_id));
  GPUTOK_CUDA(
      cudaDeviceGetAttribute(&impl->n_sms, cudaDevAttrMultiProcessorCount, options.device_id));
  if (const char* ct = std::getenv("GPUTOK_GPU_COPY_THREADS"); ct && *ct)  // ablation
    impl->opt.copy_threads = std::max(0, std::atoi(ct));
  const char* prof = std::getenv("GPUTOK_GPU_PROFILE");
  impl->profile = prof && *prof && *prof != '0';
  const char* nocache = std::getenv("GPUTOK_GPU_NO_CACHE");
  impl->use_cache = !(nocache && *nocache && *nocache != '0');
  const char* nosplit = std::getenv("GPUTOK_GPU_NO_SPLIT");
  impl->per_word.split = !(nosplit && *nosplit && *nosplit != '0');
  const char* single = std::getenv("GPUTOK_GPU_SINGLE_RANK");
  impl->per_word.multi_rank = !(single && *single && *single != '0');
  const char* graph = std::getenv("GPUTOK_GPU_GRAPH");
  impl->use_graph = graph && *graph && *graph != '0';
  impl->per_word.long_blocks_per_sm = per_word_long_blocks_per_sm();
  const char* nodirect = std::getenv("GPUTOK_GPU_NO_DIRECT");
  impl->direct_output = !(nodirect && *nodirect && *nodirect != '0');
  if (const char* wm = std::getenv("GPUTOK_GPU_WARP_MIN"); wm && *wm)
    impl->per_word.warp_min = std::atoi(wm);
  if (const char* wm = std::getenv("GPUTOK_GPU_WARP_MIN_SMALL"); wm && *wm)
    impl->per_word.warp_min_small = std::atoi(wm);
  if (const char* ms = std::getenv("GPUTOK_GPU_MEMO_SLOTS"); ms && *ms)
    impl->memo_slots = std::max<int64_t>(0, std::atoll(ms));
  if (const char* sg = std::getenv("GPUTOK_SNAPPY_SEGMENT"); sg && *sg) {
    // bytes per walk segment, a power of two from 256 to 64 KiB (others round down)
    const unsigned long v = std::strtoul(sg, nullptr, 10);
    uint32_t shift = 8;
    while (shift < 16 && (1ul << (shift + 1)) <= v) ++shift;
    impl->snappy.seg_shift = shift;
  }
  if (const char* sd = std::getenv("GPUTOK_SNAPPY_DECODE"); sd && *sd)
    for (int d = 0; d < 3; ++d)  // an unknown name keeps the default
      if (std::strcmp(sd, kSnappyDecodeNames[d]) == 0) impl->snappy.decode = SnappyDecode(d);
  if (const char* es = std::getenv("GPUTOK_GPU_ENCODE_SLOTS"); es && *es)  // ablation
    impl->n_encode_slots = std::clamp<size_t>(std::strtoul(es, nullptr, 10), 1, kEncodeSlots);
  if (const char* fm = std::getenv("GPUTOK_GPU_FUSED_MAX"); fm && *fm)
    impl->fused_max = uint32_t(std::strtoul(fm, nullptr, 10));
  // One block per SM: grid barriers over 132 blocks cost less than over the ~4 per SM that
  // fit, and a mid-size input has no more work than that (76 KB: 0.105 -> 0.088 ms).
  impl->coop_blocks = std::min(fused_cooperative_max_blocks(impl->n_sms), impl->n_sms);
  if (const char* cb = std::getenv("GPUTOK_GPU_COOP_BLOCKS"); cb && *cb)  // experiment: cap
    impl->coop_blocks = std::min(impl->coop_blocks, std::max(1, std::atoi(cb)));
  int sparser = kPairTableSparser;
  if (const char* sp = std::getenv("GPUTOK_GPU_PAIR_SPARSER"); sp && *sp)
    sparser = std::clamp(std::atoi(sp), 0, 4);
  impl->tables.build(*impl->vocab, impl->counters.device_allocs, sparser);
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
    I.snappy_pool_limit.store(bytes);
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
  // Units: segments, long ones split at safe positions.
  std::vector<Unit> units;
  units.reserve(segments.size());
  for (size_t s = 0; s < segments.size(); ++s) {
    const auto* t = reinterpret_cast<const uint8_t*>(segments[s].data());
    const size_t len = segments[s].size();
    size_t pos = 0;
    while (len - pos > kChunkTarget) {
      size_t cut = 0;
      for (size_t i = pos + kChunkTarget; i > pos; --i)
        if (is_safe_split(t, i)) {
          cut = i;
          break;
        }
      if (!cut)
        for (size_t i = pos + kChunkTarget + 1; i < len; ++i)
          if (is_safe_split(t, i)) {
            cut = i;
            break;
          }
      if (!cut) break;
      units.push_back(Unit{s, pos, cut, false});
      pos = cut;
    }
    units.push_back(Unit{s, pos, len, true});
  }
  std::unique_lock<std::mutex> slot_lock;
  EncodeSlot& S = take_slot(I.encode_slots, I.n_encode_slots, 0,
                            I.encode_next.fetch_add(1, std::memory_order_relaxed), slot_lock);
  S.open_events(o.blocking_sync);
  float ms = 0.0f;
  size_t i = 0;
  while (i < units.size()) {
    size_t j = i, bytes = 0;
    while (j < units.size()) {
      const size_t ul = units[j].end - units[j].begin;
      if (j > i && bytes + ul > kChunkTarget) break;
      bytes += ul;
      ++j;
    }
    if (bytes >= kMaxChunk)
      throw DeviceMemoryError("a single piece of " + std::to_string(bytes) +
                              " bytes is over the GPU path's 2 GiB chunk limit");
    ms += I.run_chunk(S, o, segments, units.data() + i, j - i, algorithm, out, ends);
    i = j;
  }
  return ms;
}

void GpuEncoder::decompress_pages(const uint8_t* chunk, size_t size,
                                  const std::vector<PageCopy>& copies, uint8_t* out,
                                  size_t out_size) {
  // Host side: check the copies' ranges, do the plain ones, and list the snappy streams.
  std::vector<SnappyJob> jobs;
  uint32_t n_frags = 0, n_segs = 0, max_segs = 0;
  const uint32_t seg_shift = impl_->snappy.seg_shift;
  for (const PageCopy& c : copies) {
    if (c.src < 0 || c.src_size < 0 || c.src + c.src_size > int64_t(size) || c.dst < 0 ||
        c.dst_size < 0 || c.dst + c.dst_size > int64_t(out_size))
      throw ParquetCorrupt("corrupt Parquet page: a page lies outside its chunk");
    if (!c.snappy) {
      if (c.src_size != c.dst_size) throw ParquetCorrupt("corrupt Parquet page: sizes differ");
      std::memcpy(out + c.dst, chunk + c.src, size_t(c.src_size));
      continue;
    }
    uint32_t length = 0, hdr = 0;
    if (!snappy_length(chunk + c.src, size_t(c.src_size), length, hdr) ||
        int64_t(length) != c.dst_size)
      throw ParquetCorrupt("corrupt Parquet page: bad snappy length");
    if (size > 0xFFFFFFF0ull) throw ParquetUnsupported("a column chunk over 4 GiB");
    if (length == 0) continue;
    jobs.push_back(SnappyJob{uint64_t(c.src), uint64_t(c.dst), uint32_t(c.src_size), hdr, length,
                             n_frags, n_segs});
    n_frags += (length + kSnappyFragment - 1) / kSnappyFragment;
    const uint64_t seg_bytes = uint64_t(1) << seg_shift;
    const uint32_t segs = uint32_t((uint64_t(c.src_size) - hdr + seg_bytes - 1) >> seg_shift);
    n_segs += segs;
    max_segs = std::max(max_segs, segs);
  }
  if (jobs.empty()) return;
  Impl& I = *impl_;
  std::unique_lock<std::mutex> lock;
  const uint32_t first = I.snappy_next.fetch_add(1, std::memory_order_relaxed);
  SnappySlot& S = take_slot(I.snappy_slots, kSnappySlots, first, first, lock);
  GPUTOK_CUDA(cudaSetDevice(I.opt.device_id));
  S.open(I.opt.blocking_sync);
  const uint32_t n_jobs = uint32_t(jobs.size());
  const uint32_t levels = snappy_jump_levels(max_segs);
  const size_t level_n = size_t(levels + 1) * n_segs;
  // Device: [chunk | jobs | scratch | out]; pinned in: chunk, jobs; pinned out: out, status.
  const uint8_t* d_src = nullptr;
  SnappyJob* d_jobs = nullptr;
  uint8_t* d_out = nullptr;
  SnappyScratch sc;
  auto carve = [&](char* base) {
    Carver c(base);
    d_src = c.take<uint8_t>(size);
    d_jobs = c.take<SnappyJob>(n_jobs);
    sc.cum = c.take<uint32_t>(size);
    sc.seg_exit = c.take<uint32_t>(n_segs);
    sc.seg_total = c.take<uint32_t>(n_segs);
    sc.frag_q = c.take<uint32_t>(n_frags);
    sc.frag_op = c.take<uint32_t>(n_frags);
    sc.frag_ip = c.take<uint32_t>(n_frags);
    sc.status = c.take<int32_t>(n_jobs);
    sc.jump = c.take<uint32_t>(level_n);
    sc.weight = c.take<uint32_t>(level_n);
    sc.valid = c.take<uint8_t>(level_n);
    sc.on = c.take<uint8_t>(n_segs);
    d_out = c.take<uint8_t>(out_size);
    return c.used();
  };
  S.arena.ensure(carve(nullptr), I.snappy_pool_limit.load(), S.counters.device_allocs);
  carve(S.arena.base());
  const size_t jobs_bytes = n_jobs * sizeof(SnappyJob);
  S.pin_in.ensure(size + jobs_bytes, S.counters.pinned_allocs);
  S.pin_out.ensure(out_size + n_jobs * sizeof(int32_t), S.counters.pinned_allocs);
  char* pin = S.pin_in.base();
  parallel_copy(copy_pool_for(S.pool, I.opt.copy_threads, size),
                {{reinterpret_cast<const char*>(chunk), size}}, pin);
  std::memcpy(pin + size, jobs.data(), jobs_bytes);
  GPUTOK_CUDA(
      cudaMemcpyAsync(const_cast<uint8_t*>(d_src), pin, size, cudaMemcpyHostToDevice, S.stream));
  GPUTOK_CUDA(cudaMemcpyAsync(d_jobs, pin + size, jobs_bytes, cudaMemcpyHostToDevice, S.stream));
  GPUTOK_CUDA(cudaMemsetAsync(sc.cum, 0xFF, size * sizeof(uint32_t), S.stream));
  GPUTOK_CUDA(cudaMemsetAsync(sc.on, 0, n_segs, S.stream));
  cudaEvent_t* marks = nullptr;
  if (I.profile) {  // GPUTOK_GPU_PROFILE=1: each kernel's time, on stderr
    if (!S.marks[0])
      for (auto& e : S.marks) GPUTOK_CUDA(cudaEventCreate(&e));
    marks = S.marks;
  }
  const auto t_in = std::chrono::steady_clock::now();
  S.counters.launches += launch_snappy_fragments(d_src, d_out, d_jobs, n_jobs, n_segs, n_frags,
                                                 levels, sc, I.snappy, S.stream, marks);
  S.counters.launches +=
      launch_snappy_sequential(d_src, d_out, d_jobs, n_jobs, sc.status, S.stream);
  // Only the snappy jobs' ranges come back: the plain copies are already in `out`.
  char* pout = S.pin_out.base();
  for (const SnappyJob& j : jobs)
    GPUTOK_CUDA(
        cudaMemcpyAsync(pout + j.dst, d_out + j.dst, j.out_len, cudaMemcpyDeviceToHost, S.stream));
  int32_t* status = reinterpret_cast<int32_t*>(pout + out_size);
  GPUTOK_CUDA(cudaMemcpyAsync(status, sc.status, n_jobs * sizeof(int32_t), cudaMemcpyDeviceToHost,
                              S.stream));
  S.wait();
  const auto t_sync = std::chrono::steady_clock::now();
  if (marks) {
    float k[6];
    for (int i = 0; i < 6; ++i) GPUTOK_CUDA(cudaEventElapsedTime(&k[i], marks[i], marks[i + 1]));
    std::fprintf(stderr,
                 "[gputok snappy] %zu -> %zu bytes, %u jobs %u segments of %u B %u fragments: "
                 "segments %.0f us, extend %.0f, jump %.0f, serial chain %.0f, starts %.0f, "
                 "decode (%s) %.0f; launch to sync %.0f us\n",
                 size, out_size, n_jobs, n_segs, 1u << seg_shift, n_frags,
                 kSnappyDecodeNames[int(I.snappy.decode)], k[0] * 1e3, k[1] * 1e3, k[2] * 1e3,
                 k[3] * 1e3, k[4] * 1e3, k[5] * 1e3,
                 std::chrono::duration<double, std::micro>(t_sync - t_in).count());
  }
  for (uint32_t j = 0; j < n_jobs; ++j)
    if (status[j] != kSnappyFragmented)
      throw ParquetCorrupt("corrupt Parquet page: bad snappy stream");
  size_t total = 0;
  for (const SnappyJob& j : jobs) total += j.out_len;
  ThreadPool* tp = copy_pool_for(S.pool, I.opt.copy_threads, total);
  if (tp && jobs.size() > 1) {
    tp->parallel_for(jobs.size(), tp->size(), [&](size_t k) {
      std::memcpy(out + jobs[k].dst, pout + jobs[k].dst, jobs[k].out_len);
    });
  } else {
    for (const SnappyJob& j : jobs) std::memcpy(out + j.dst, pout + j.dst, j.out_len);
  }
}

float GpuEncoder::Impl::run_chunk(EncodeSlot& S, const GpuOptions& o,
                                  const std::vector<std::string_view>& segments, const Unit* units,
                                  size_t n_units, Algorithm algorithm, GpuOutput& out,
                                  std::vector<int64_t>& ends) {
  using clk = std::chrono::steady_clock;
  const auto t_start = clk::now();
  size_t n64 = 0;
  for (size_t u = 0; u < n_units; ++u) n64 += units[u].end - units[u].begin;
  const uint32_t n = uint32_t(n64);
  const int64_t base = out.tokens;
  if (n == 0) {
    for (size_t u = 0; u < n_units; ++u)
      if (units[u].last) ends.push_back(base);
    return 0.0f;
  }
  const bool gpu_pretok = o.gpu_pretokenize;
  // CPU pretokenization (option): pieces found here, merged there.
  std::vector<std::pair<const char*, size_t>> src;
  src.reserve(n_units);
  std::vector<uint32_t> unit_off(n_units + 1);
  {
    uint32_t off = 0;
    for (size_t u = 0; u < n_units; ++u) {
      unit_off[u] = off;
      const auto& U = units[u];
      src.emplace_back(segments[U.seg].data() + U.begin, U.end - U.begin);
      off += uint32_t(U.end - U.begin);
    }
    unit_off[n_units] = off;
  }
  uint32_t n_pieces_host = 0;
  if (!gpu_pretok) {
    S.pieces.clear();
    const UnicodeTableView uni = unicode_table();
    for (size_t u = 0; u < n_units; ++u)
      pretokenize(uni, reinterpret_cast<const uint8_t*>(src[u].first), src[u].second, S.pieces,
                  unit_off[u]);
    n_pieces_host = uint32_t(S.pieces.size());
  }

  // Device layout for this chunk. The text (+ at least 16 zero bytes) and the unit offsets
  // are one block, so one copy uploads both.
  const size_t in_text = (size_t(n) + 16 + 15) & ~size_t(15);
  const bool blockbpe = algorithm != Algorithm::kPerWord;  // needs 16 bytes/byte scratch
  const size_t cub_bytes = cub_temp_bytes(n);
  const bool small = algorithm == Algorithm::kPerWord && gpu_pretok && n <= kSmallMaxBytes;
  const bool fused =
      algorithm == Algorithm::kPerWord && gpu_pretok && !small && n <= fused_max && coop_blocks > 0;
  const uint32_t memo_n = algorithm == Algorithm::kPerWord && per_word.split && !small && !fused
                              ? memo_slots_for(n, memo_slots)
                              : 0;
  auto layout = [&](Carver& cv, ChunkDev& c) {
    c.text = cv.take<uint8_t>(in_text + (n_units + 1) * 4);
    c.unit_off = reinterpret_cast<const uint32_t*>(c.text + in_text);
    c.unit_start = cv.take<uint8_t>(n + 16);
    c.piece_flag = cv.take<uint8_t>(n + 16);
    c.piece_starts = cv.take<uint32_t>(size_t(n) + 1);
    c.counters = cv.take<uint32_t>(16);
    c.long_cap = n / (kWarpMinFloor + 1) + 1;
    c.long_list = cv.take<uint32_t>(c.long_cap);
    c.tok = cv.take<int32_t>(size_t(n) + 1);
    c.aux = cv.take<int32_t>(size_t(n) + 1);
    c.scratch = blockbpe ? cv.take<int32_t>(size_t(n) * 4) : nullptr;
    c.unit_ends = cv.take<uint32_t>(n_units);
    c.block_sums = cv.take<uint32_t>(2 * size_t(kMaxCoopBlocks));
    c.tile_sums = cv.take<uint32_t>(compact_tile_sums(n));
    c.memo = memo_n ? cv.take<unsigned long long>(memo_n) : nullptr;
    c.memo_mask = memo_n ? memo_n - 1 : 0;
    c.phase_ns = profile ? cv.take<uint64_t>(kCoopStamps) : nullptr;
    c.cub_temp = cv.take<char>(cub_bytes);
    c.cub_bytes = cub_bytes;
    c.ids_out = reinterpret_cast<int32_t*>(c.piece_starts);
    c.n = n;
    c.n_units = uint32_t(n_units);
  };
  ChunkDev c;
  {
    Carver measure(nullptr);
    layout(measure, c);
    S.arena.ensure(measure.used(), o.pool_limit_bytes, S.counters.device_allocs);
  }
  Carver cv(S.arena.base());
  layout(cv, c);

  // Stage input: text (+16 zero bytes), unit offsets, CPU pieces.
  const size_t in_bytes = in_text + (n_units + 1) * 4 + 4 + size_t(n_pieces_host) * 4;
  S.pin_in.ensure(in_bytes, S.counters.pinned_allocs);
  char* hin = S.pin_in.base();
  const auto t_prep = clk::now();
  parallel_copy(copy_pool_for(S.pool, o.copy_threads, n), src, hin);
  const auto t_staged = clk::now();
  std::memset(hin + n, 0, in_text - n);
  std::memcpy(hin + in_text, unit_off.data(), (n_units + 1) * 4);
  GPUTOK_CUDA(cudaMemcpyAsync(const_cast<uint8_t*>(c.text), hin, in_text + (n_units + 1) * 4,
                              cudaMemcpyHostToDevice, S.stream));
  if (!fused)  // the fused kernel zeroes its counters itself
    GPUTOK_CUDA(cudaMemsetAsync(c.counters, 0, 16 * sizeof(uint32_t), S.stream));
  if (!gpu_pretok) {
    uint32_t* hp = reinterpret_cast<uint32_t*>(hin + in_text + (n_units + 1) * 4);
    hp[0] = n_pieces_host;
    for (uint32_t p = 0; p < n_pieces_host; ++p) hp[1 + p] = S.pieces[p].start;
    GPUTOK_CUDA(cudaMemcpyAsync(c.counters, hp, 4, cudaMemcpyHostToDevice, S.stream));
    GPUTOK_CUDA(cudaMemcpyAsync(c.piece_starts, hp + 1, size_t(n_pieces_host) * 4,
                                cudaMemcpyHostToDevice, S.stream));
  }

  const size_t head = 64 + ((n_units * 4 + 63) & ~size_t(63));
  S.pin_out.ensure(head + (small || n <= kDirectMaxBytes ? size_t(n) * 4 : 0),
                   S.counters.pinned_allocs);
  const bool direct = !small && n <= kDirectMaxBytes && S.pin_out.device_base() && direct_output;
  if (direct) c.ids_out = reinterpret_cast<int32_t*>(S.pin_out.device_base() + head);
  // The fused kernel also writes the counts and unit ends there: no copies back at all.
  const bool direct_head = direct && fused;
  if (direct_head) c.host_head = reinterpret_cast<uint32_t*>(S.pin_out.device_base());

  const bool graph = use_graph && !small && !fused;
  // Inside a capture an event record is only a dependency unless marked external; the
  // per-stage profile events are left out of graphs.
  const bool prof = profile && !graph;
  auto record = [&](cudaEvent_t e) {
    GPUTOK_CUDA(graph ? cudaEventRecordWithFlags(e, S.stream, cudaEventRecordExternal)
                      : cudaEventRecord(e, S.stream));
  };
  auto enqueue = [&] {
    record(S.ev0);
    int launches = 0;
    const VocabView v = tables.vocab();
    const PieceCacheView cache = use_cache ? tables.cache() : PieceCacheView{};
    // Small and mid-size chunks: the whole per_word pipeline in one launch.
    if (small || fused) {
      launches +=
          small ? launch_fused_small(c, tables.unicode(), v, cache, S.stream)
                : launch_fused_cooperative(c, tables.unicode(), v, cache, per_word.warp_min_for(n),
                                           per_word.multi_rank, coop_blocks, S.stream);
      if (prof) {
        GPUTOK_CUDA(cudaEventRecord(S.ev_pre, S.stream));
        GPUTOK_CUDA(cudaEventRecord(S.ev_mid, S.stream));
        GPUTOK_CUDA(cudaEventRecord(S.ev_merge, S.stream));
      }
    } else {
      if (gpu_pretok)
        launches += launch_pretokenize(c, tables.unicode(), S.stream);
      else
        launches += launch_flags_from_pieces(c, n_pieces_host, S.stream);
      if (prof) GPUTOK_CUDA(cudaEventRecord(S.ev_pre, S.stream));
      switch (algorithm) {
        case Algorithm::kPerWord:
          launches += launch_merge_per_word(c, v, cache, n_sms, per_word, S.stream,
                                            prof ? S.ev_mid : nullptr);
          break;
        case Algorithm::kBlockBpe:
          launches += launch_merge_blockbpe(c, v, false, n_sms, S.stream);
          break;
        case Algorithm::kBlockBpeOptimized:
          launches += launch_merge_blockbpe(c, v, true, n_sms, S.stream);
          break;
      }
      if (prof) GPUTOK_CUDA(cudaEventRecord(S.ev_merge, S.stream));
      launches += launch_compact(c, S.stream);
    }
    record(S.ev1);
    S.counters.launches += uint64_t(launches);
  };
  if (!graph) {
    enqueue();
  } else {
    GPUTOK_CUDA(cudaStreamBeginCapture(S.stream, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t g = nullptr;
    try {
      enqueue();
    } catch (...) {
      cudaStreamEndCapture(S.stream, &g);
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      throw;
    }
    GPUTOK_CUDA(cudaStreamEndCapture(S.stream, &g));
    if (S.graph_exec) {
      cudaGraphExecUpdateResultInfo info;
      if (cudaGraphExecUpdate(S.graph_exec, g, &info) != cudaSuccess) {
        cudaGetLastError();
        cudaGraphExecDestroy(S.graph_exec);
        S.graph_exec = nullptr;
      }
    }
    const cudaError_t e = S.graph_exec ? cudaSuccess : cudaGraphInstantiate(&S.graph_exec, g, 0);
    cudaGraphDestroy(g);
    GPUTOK_CUDA(e);
    GPUTOK_CUDA(cudaGraphLaunch(S.graph_exec, S.stream));
  }

  // Output: counters and unit ends first (the token count sizes the ids copy). A small
  // chunk copies ids for the worst case (n tokens, <= 16 KB) in the same round trip; a direct
  // chunk's scatter kernel has already written them into the slot's pin_out.
  if (!direct_head) {
    GPUTOK_CUDA(cudaMemcpyAsync(S.pin_out.base(), c.counters, 16 * sizeof(uint32_t),
                                cudaMemcpyDeviceToHost, S.stream));
    GPUTOK_CUDA(cudaMemcpyAsync(S.pin_out.base() + 64, c.unit_ends, n_units * 4,
                                cudaMemcpyDeviceToHost, S.stream));
  }
  if (small)
    GPUTOK_CUDA(cudaMemcpyAsync(S.pin_out.base() + head, c.ids_out, size_t(n) * 4,
                                cudaMemcpyDeviceToHost, S.stream));
  S.wait();
  const uint32_t total = reinterpret_cast<const uint32_t*>(S.pin_out.base())[2];
  std::vector<uint32_t> unit_ends(n_units);
  std::memcpy(unit_ends.data(), S.pin_out.base() + 64, n_units * 4);
  if (total > n) throw CudaError("GPU encoder produced more tokens than bytes");
  size_t ids_at = head;
  if (!small && !direct && total) {
    ids_at = 0;
    S.pin_out.ensure(size_t(total) * 4, S.counters.pinned_allocs);
    GPUTOK_CUDA(cudaMemcpyAsync(S.pin_out.base(), c.ids_out, size_t(total) * 4,
                                cudaMemcpyDeviceToHost, S.stream));
    S.wait();
  }
  const auto t_synced = clk::now();
  float ms = 0.0f;
  GPUTOK_CUDA(cudaEventElapsedTime(&ms, S.ev0, S.ev1));
  copy_out(copy_pool_for(S.pool, o.copy_threads, size_t(total) * 4),
           reinterpret_cast<const int32_t*>(S.pin_out.base() + ids_at), total, units,
           unit_ends.data(), n_units, out);
  out.tokens += total;
  if (profile && !graph) {
    std::string stages;  // the fused kernel's own split, from its timestamps
    if (fused) {
      uint64_t t[kCoopStamps];
      GPUTOK_CUDA(cudaMemcpy(t, c.phase_ns, sizeof t, cudaMemcpyDeviceToHost));
      static const char* names[kCoopStamps - 1] = {"zero",  "units", "flags", "starts", "pieces",
                                                   "warps", "count", "ids",   "ends"};
      stages = " [fused:";
      for (int k = 1; k < kCoopStamps; ++k)
        stages += " " + std::string(names[k - 1]) + " " +
                  std::to_string(double(t[k] - t[k - 1]) / 1e3).substr(0, 5);
      stages += " us]";
    }
    float pre = 0, merge = 0, shortm = 0;
    GPUTOK_CUDA(cudaEventElapsedTime(&pre, S.ev0, S.ev_pre));
    GPUTOK_CUDA(cudaEventElapsedTime(&merge, S.ev_pre, S.ev_merge));
    if (algorithm == Algorithm::kPerWord)
      GPUTOK_CUDA(cudaEventElapsedTime(&shortm, S.ev_pre, S.ev_mid));
    auto us = [](clk::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
    std::fprintf(stderr,
                 "[gputok gpu] %u bytes %zu units %u tokens: prep %.0f us, staging %.0f us, "
                 "h2d+kernels+d2h %.0f us (kernels %.0f us: pretok %.0f, merge %.0f [short %.0f], "
                 "compact %.0f)%s, copy-out %.0f us, algorithm %d\n",
                 n, n_units, total, us(t_prep - t_start), us(t_staged - t_prep),
                 us(t_synced - t_staged), ms * 1e3, pre * 1e3, merge * 1e3, shortm * 1e3,
                 (ms - pre - merge) * 1e3, stages.c_str(), us(clk::now() - t_synced),
                 int(algorithm));
  }
  for (size_t u = 0; u < n_units; ++u)
    if (units[u].last) ends.push_back(base + int64_t(unit_ends[u]));
  return ms;
}

}  // namespace gputok
