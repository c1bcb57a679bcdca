// GpuPageDecoder (gpu_page_decoder.h): host side of the corpus tool's GPU page decode.
//
// One call: the copies' ranges are checked and the plain ones done on the host; the snappy
// streams' chunk is staged in pinned memory, uploaded, decoded (gputok's kernels, parquet.cu,
// or nvCOMP's batched snappy), and the streams' output ranges come back through pinned memory.
// Up to kDecodeSlots calls run at once, each on a slot of its own (stream, device buffer,
// pinned buffers, copy threads), so one call's staging and copy-out overlap others' kernels:
// a call has only ~300 one-warp fragments (a 9-13 MB row-group run), far from filling the GPU.
// A slot's buffers only grow (cuda/pool.cuh), so steady-state calls allocate nothing.
//
// Before this object the decode was a member of the tokenizer's GpuEncoder, sharing its
// device and slots' design; it measured 3.31-3.46 GB/s for corpus workers on one H200 (4 per
// GPU, bench/results/2026-11-25-benchmarks-history.md). The move kept the code path, so the
// figure stands; bench/results/2026-11-25-redesign-no-change.md has the check.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "cuda/common.cuh"
#include "cuda/pool.cuh"
#include "cuda/take_slot.cuh"
#include "gpu_page_decoder.h"
#include "nvcomp_snappy.h"
#include "snappy_kernels.cuh"
#include "thread_pool.h"

namespace gputok {

using namespace cuda_detail;

namespace {

constexpr size_t kDecodeSlots = 4;

// A call's snappy streams, listed on the host (where its plain copies were done).
struct DecodeJobs {
  std::vector<SnappyJob> jobs;
  uint32_t n_frags = 0, n_segs = 0, max_segs = 0;
  size_t max_out = 0, total_out = 0;
};

DecodeJobs plan_jobs(const uint8_t* chunk, size_t size, const std::vector<PageCopy>& copies,
                     uint8_t* out, size_t out_size, uint32_t seg_shift) {
  DecodeJobs d;
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
    d.jobs.push_back(SnappyJob{uint64_t(c.src), uint64_t(c.dst), uint32_t(c.src_size), hdr, length,
                               d.n_frags, d.n_segs});
    d.n_frags += (length + kSnappyFragment - 1) / kSnappyFragment;
    const uint64_t seg_bytes = uint64_t(1) << seg_shift;
    const uint32_t segs = uint32_t((uint64_t(c.src_size) - hdr + seg_bytes - 1) >> seg_shift);
    d.n_segs += segs;
    d.max_segs = std::max(d.max_segs, segs);
    d.max_out = std::max<size_t>(d.max_out, length);
    d.total_out += length;
  }
  return d;
}

// A stream and buffers of its own, held by one call at a time (mu).
struct DecodeSlot {
  std::mutex mu;
  cudaStream_t stream = nullptr;  // made on the slot's first use
  cudaEvent_t ev_sync = nullptr;  // blocking-sync wait (PageDecoderOptions::blocking_sync)
  cudaEvent_t marks[7] = {};      // PageDecoderOptions::profile: the kernels' times
  DeviceArena arena;
  PinnedBuffer pin_in, pin_out;
  PageDecoderCounters counters;
  PoolPtr pool;  // host copies, made on the first copy of 1 MB or more

  void open(bool blocking_sync) {
    if (!stream) GPUTOK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    if (blocking_sync && !ev_sync)
      GPUTOK_CUDA(
          cudaEventCreateWithFlags(&ev_sync, cudaEventBlockingSync | cudaEventDisableTiming));
  }
  // Waits for the stream: asleep on the blocking-sync event when there is one, else spinning.
  void wait() {
    if (ev_sync) {
      GPUTOK_CUDA(cudaEventRecord(ev_sync, stream));
      GPUTOK_CUDA(cudaEventSynchronize(ev_sync));
    } else {
      GPUTOK_CUDA(cudaStreamSynchronize(stream));
    }
  }
  // Threads for a host copy of `bytes` (1: the caller alone): none under 1 MB, at most 8
  // under 16 MB, one per 256 KB.
  size_t copy_threads(int setting, size_t bytes) {
    if (bytes < (size_t(1) << 20) || setting == 1) return 1;
    if (!pool) {
      const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
      pool.reset(new ThreadPool(std::min(hw, setting > 0 ? unsigned(setting) : 16u)));
    }
    const size_t cap =
        bytes >= (size_t(16) << 20) ? pool->size() : std::min<size_t>(pool->size(), 8);
    return std::min(cap, (bytes >> 18) + 1);
  }
  ~DecodeSlot() {
    if (stream) cudaStreamSynchronize(stream);
    arena.release();
    pin_in.release();
    pin_out.release();
    for (cudaEvent_t e : marks)
      if (e) cudaEventDestroy(e);
    if (ev_sync) cudaEventDestroy(ev_sync);
    if (stream) cudaStreamDestroy(stream);
  }
};

// Device buffers of one call: [chunk | jobs | the engine's scratch | out].
struct DecodeDev {
  const uint8_t* src = nullptr;
  SnappyJob* jobs = nullptr;
  uint8_t* out = nullptr;
  int32_t* status = nullptr;  // kernels: SnappyStatus; nvCOMP: nvcompStatus_t (0: success)
  SnappyScratch sc;           // kernels
  // nvCOMP: per stream, input pointer and size, output pointer, capacity and decoded size
  const void** in_ptrs = nullptr;
  size_t* in_bytes = nullptr;
  void** out_ptrs = nullptr;
  size_t* out_cap = nullptr;
  size_t* out_bytes = nullptr;
  void* temp = nullptr;
  size_t temp_bytes = 0;
};

}  // namespace

struct GpuPageDecoder::Impl {
  PageDecoderOptions opt;
  SnappyOptions snappy;  // the kernels' switches, from opt
  std::unique_ptr<NvcompSnappy> nvcomp;
  DecodeSlot slots[kDecodeSlots];
  std::atomic<uint32_t> next{0};
  std::atomic<size_t> pool_limit{0};

  DecodeSlot& take_slot(std::unique_lock<std::mutex>& lock);
  size_t carve(char* base, DecodeDev& d, const DecodeJobs& j, size_t size, size_t out_size) const;
  void run_kernels(DecodeSlot& S, const DecodeDev& d, const DecodeJobs& j, size_t size);
  void print_profile(DecodeSlot& S, const DecodeJobs& j, size_t size, size_t out_size,
                     double launch_to_sync_us) const;
  void run_nvcomp(DecodeSlot& S, const DecodeDev& d, const DecodeJobs& j);
  void copy_out(DecodeSlot& S, const DecodeJobs& j, const char* pout, uint8_t* out);
};

// The first free slot from a rotating start; when all are busy, waits for that one.
DecodeSlot& GpuPageDecoder::Impl::take_slot(std::unique_lock<std::mutex>& lock) {
  const uint32_t first = next.fetch_add(1, std::memory_order_relaxed);
  return ::gputok::take_slot(slots, kDecodeSlots, first, first, lock);
}

// Lays the call's device buffers out from `base` (nullptr: measures); returns the bytes used.
size_t GpuPageDecoder::Impl::carve(char* base, DecodeDev& d, const DecodeJobs& j, size_t size,
                                   size_t out_size) const {
  const uint32_t n_jobs = uint32_t(j.jobs.size());
  Carver c(base);
  d.src = c.take<uint8_t>(size);
  d.jobs = c.take<SnappyJob>(n_jobs);
  d.status = c.take<int32_t>(n_jobs);
  if (nvcomp) {
    d.in_ptrs = c.take<const void*>(n_jobs);
    d.in_bytes = c.take<size_t>(n_jobs);
    d.out_ptrs = c.take<void*>(n_jobs);
    d.out_cap = c.take<size_t>(n_jobs);
    d.out_bytes = c.take<size_t>(n_jobs);
    d.temp = c.take<char>(d.temp_bytes);
  } else {
    const uint32_t levels = snappy_jump_levels(j.max_segs);
    const size_t level_n = size_t(levels + 1) * j.n_segs;
    d.sc.cum = c.take<uint32_t>(size);
    d.sc.seg_exit = c.take<uint32_t>(j.n_segs);
    d.sc.seg_total = c.take<uint32_t>(j.n_segs);
    d.sc.frag_q = c.take<uint32_t>(j.n_frags);
    d.sc.frag_op = c.take<uint32_t>(j.n_frags);
    d.sc.frag_ip = c.take<uint32_t>(j.n_frags);
    d.sc.status = d.status;
    d.sc.jump = c.take<uint32_t>(level_n);
    d.sc.weight = c.take<uint32_t>(level_n);
    d.sc.valid = c.take<uint8_t>(level_n);
    d.sc.on = c.take<uint8_t>(j.n_segs);
  }
  d.out = c.take<uint8_t>(out_size);
  return c.used();
}

// gputok's kernels (parquet.cu) on the uploaded chunk; each stream's status into d.status.
void GpuPageDecoder::Impl::run_kernels(DecodeSlot& S, const DecodeDev& d, const DecodeJobs& j,
                                       size_t size) {
  const uint32_t n_jobs = uint32_t(j.jobs.size());
  const uint32_t levels = snappy_jump_levels(j.max_segs);
  GPUTOK_CUDA(cudaMemsetAsync(d.sc.cum, 0xFF, size * sizeof(uint32_t), S.stream));
  GPUTOK_CUDA(cudaMemsetAsync(d.sc.on, 0, j.n_segs, S.stream));
  cudaEvent_t* marks = nullptr;
  if (opt.profile) {  // each kernel's time, on stderr (print_profile)
    if (!S.marks[0])
      for (auto& e : S.marks) GPUTOK_CUDA(cudaEventCreate(&e));
    marks = S.marks;
  }
  S.counters.launches += launch_snappy_fragments(d.src, d.out, d.jobs, n_jobs, j.n_segs, j.n_frags,
                                                 levels, d.sc, snappy, S.stream, marks);
  S.counters.launches += launch_snappy_sequential(d.src, d.out, d.jobs, n_jobs, d.status, S.stream);
}

// PageDecoderOptions::profile, after the call's sync: the kernels' times (their engine only)
// and the time from the first launch to the sync.
void GpuPageDecoder::Impl::print_profile(DecodeSlot& S, const DecodeJobs& j, size_t size,
                                         size_t out_size, double launch_to_sync_us) const {
  float k[6] = {};
  if (!nvcomp)
    for (int i = 0; i < 6; ++i)
      GPUTOK_CUDA(cudaEventElapsedTime(&k[i], S.marks[i], S.marks[i + 1]));
  std::fprintf(stderr,
               "[gputok snappy] %zu -> %zu bytes, %zu jobs %u segments of %u B %u fragments: "
               "segments %.0f us, extend %.0f, jump %.0f, serial chain %.0f, starts %.0f, "
               "decode (%s) %.0f; launch to sync %.0f us\n",
               size, out_size, j.jobs.size(), j.n_segs, 1u << snappy.seg_shift, j.n_frags,
               k[0] * 1e3, k[1] * 1e3, k[2] * 1e3, k[3] * 1e3, k[4] * 1e3,
               nvcomp ? "nvcomp" : kSnappyDecodeNames[int(snappy.decode)], k[5] * 1e3,
               launch_to_sync_us);
}

// nvCOMP's batched snappy on the uploaded chunk: the pointer and size arrays are built on the
// host (pinned, after the jobs) and uploaded; each stream's status into d.status, and its
// decoded size, which must be the size its header claims, into d.out_bytes.
void GpuPageDecoder::Impl::run_nvcomp(DecodeSlot& S, const DecodeDev& d, const DecodeJobs& j) {
  const size_t n = j.jobs.size();
  char* pin = S.pin_in.base() +
              (reinterpret_cast<const char*>(d.in_ptrs) - reinterpret_cast<const char*>(d.src));
  auto* in_ptrs = reinterpret_cast<const void**>(pin);
  auto* in_bytes = reinterpret_cast<size_t*>(
      pin + (reinterpret_cast<const char*>(d.in_bytes) - reinterpret_cast<const char*>(d.in_ptrs)));
  auto* out_ptrs = reinterpret_cast<void**>(
      pin + (reinterpret_cast<const char*>(d.out_ptrs) - reinterpret_cast<const char*>(d.in_ptrs)));
  auto* out_cap = reinterpret_cast<size_t*>(
      pin + (reinterpret_cast<const char*>(d.out_cap) - reinterpret_cast<const char*>(d.in_ptrs)));
  for (size_t k = 0; k < n; ++k) {
    const SnappyJob& job = j.jobs[k];
    in_ptrs[k] = d.src + job.src;
    in_bytes[k] = job.src_size;
    out_ptrs[k] = d.out + job.dst;
    out_cap[k] = job.out_len;
  }
  const size_t arrays =
      size_t(reinterpret_cast<const char*>(d.out_bytes) - reinterpret_cast<const char*>(d.in_ptrs));
  GPUTOK_CUDA(cudaMemcpyAsync(d.in_ptrs, pin, arrays, cudaMemcpyHostToDevice, S.stream));
  nvcomp->decompress_async(d.in_ptrs, d.in_bytes, d.out_cap, d.out_bytes, n, d.temp, d.temp_bytes,
                           d.out_ptrs, d.status, S.stream);
  GPUTOK_LAUNCHED("nvcompBatchedSnappyDecompressAsync");
  ++S.counters.launches;
}

// The snappy streams' output, from pinned memory into `out` (the plain copies are there).
void GpuPageDecoder::Impl::copy_out(DecodeSlot& S, const DecodeJobs& j, const char* pout,
                                    uint8_t* out) {
  const std::vector<SnappyJob>& jobs = j.jobs;
  if (S.copy_threads(opt.copy_threads, j.total_out) > 1 && jobs.size() > 1) {
    S.pool->parallel_for(jobs.size(), S.pool->size(), [&](size_t k) {
      std::memcpy(out + jobs[k].dst, pout + jobs[k].dst, jobs[k].out_len);
    });
  } else {
    for (const SnappyJob& job : jobs) std::memcpy(out + job.dst, pout + job.dst, job.out_len);
  }
}

GpuPageDecoder::GpuPageDecoder(PageDecoderOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->opt = std::move(options);
  const PageDecoderOptions& o = impl->opt;
  // The library first: a wrong path says so on any machine, a GPU-less one included.
  if (!o.nvcomp_library.empty()) impl->nvcomp = std::make_unique<NvcompSnappy>(o.nvcomp_library);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw CudaError("no CUDA device for the GPU page decoder");
  }
  impl->pool_limit.store(o.pool_limit_bytes);
  if (o.segment_bytes) {
    // bytes per walk segment, a power of two from 256 to 64 KiB (others round down)
    uint32_t shift = 8;
    while (shift < 16 && (1ul << (shift + 1)) <= o.segment_bytes) ++shift;
    impl->snappy.seg_shift = shift;
  }
  for (int d = 0; d < 3; ++d)  // an unknown name keeps the default
    if (o.decode == kSnappyDecodeNames[d]) impl->snappy.decode = SnappyDecode(d);
  GPUTOK_CUDA(cudaSetDevice(o.device_id));
  impl_ = std::move(impl);
}

GpuPageDecoder::~GpuPageDecoder() {
  if (impl_) cudaSetDevice(impl_->opt.device_id);
}

void GpuPageDecoder::decompress(const uint8_t* chunk, size_t size,
                                const std::vector<PageCopy>& copies, uint8_t* out,
                                size_t out_size) {
  Impl& I = *impl_;
  const DecodeJobs j = plan_jobs(chunk, size, copies, out, out_size, I.snappy.seg_shift);
  if (j.jobs.empty()) return;
  std::unique_lock<std::mutex> lock;
  DecodeSlot& S = I.take_slot(lock);
  GPUTOK_CUDA(cudaSetDevice(I.opt.device_id));
  S.open(I.opt.blocking_sync);
  const size_t n_jobs = j.jobs.size();
  DecodeDev d;
  if (I.nvcomp) d.temp_bytes = I.nvcomp->temp_bytes(n_jobs, j.max_out, j.total_out, S.stream);
  const size_t used = I.carve(nullptr, d, j, size, out_size);
  S.arena.ensure(used, I.pool_limit.load(), S.counters.device_allocs);
  I.carve(S.arena.base(), d, j, size, out_size);
  // Pinned in mirrors the device layout up to the statuses (chunk, jobs), or with nvCOMP up to
  // the decoded sizes (its pointer and size arrays too); pinned out: the output, then (8-byte
  // aligned) the statuses and nvCOMP's decoded sizes.
  const char* base = reinterpret_cast<const char*>(d.src);
  const size_t in_bytes = size_t(reinterpret_cast<const char*>(d.status) - base);
  const size_t pin_in =
      I.nvcomp ? size_t(reinterpret_cast<const char*>(d.out_bytes) - base) : in_bytes;
  const size_t st_off = (out_size + 7) & ~size_t(7), sz_off = st_off + ((n_jobs * 4 + 7) & ~7ul);
  S.pin_in.ensure(pin_in, S.counters.pinned_allocs);
  S.pin_out.ensure(sz_off + n_jobs * sizeof(size_t), S.counters.pinned_allocs);
  char* pin = S.pin_in.base();
  const size_t nt = S.copy_threads(I.opt.copy_threads, size);
  if (nt > 1) {
    S.pool->parallel_for(nt, nt, [&](size_t t) {
      const size_t lo = size * t / nt, hi = size * (t + 1) / nt;
      std::memcpy(pin + lo, chunk + lo, hi - lo);
    });
  } else {
    std::memcpy(pin, chunk, size);
  }
  std::memcpy(pin + (reinterpret_cast<const char*>(d.jobs) - base), j.jobs.data(),
              n_jobs * sizeof(SnappyJob));
  GPUTOK_CUDA(cudaMemcpyAsync(const_cast<uint8_t*>(d.src), pin, in_bytes, cudaMemcpyHostToDevice,
                              S.stream));
  const auto t_in = std::chrono::steady_clock::now();
  if (I.nvcomp)
    I.run_nvcomp(S, d, j);
  else
    I.run_kernels(S, d, j, size);
  // Only the snappy streams' ranges come back: the plain copies are already in `out`.
  char* pout = S.pin_out.base();
  for (const SnappyJob& job : j.jobs)
    GPUTOK_CUDA(cudaMemcpyAsync(pout + job.dst, d.out + job.dst, job.out_len,
                                cudaMemcpyDeviceToHost, S.stream));
  auto* status = reinterpret_cast<int32_t*>(pout + st_off);
  auto* decoded = reinterpret_cast<size_t*>(pout + sz_off);
  GPUTOK_CUDA(cudaMemcpyAsync(status, d.status, n_jobs * sizeof(int32_t), cudaMemcpyDeviceToHost,
                              S.stream));
  if (I.nvcomp)
    GPUTOK_CUDA(cudaMemcpyAsync(decoded, d.out_bytes, n_jobs * sizeof(size_t),
                                cudaMemcpyDeviceToHost, S.stream));
  S.wait();
  if (I.opt.profile)
    I.print_profile(
        S, j, size, out_size,
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t_in).count());
  for (size_t k = 0; k < n_jobs; ++k) {
    // kSnappyFragmented (0) is the kernels' success, as nvcompSuccess (0) is nvCOMP's.
    const bool ok =
        status[k] == kSnappyFragmented && (!I.nvcomp || decoded[k] == j.jobs[k].out_len);
    if (!ok) throw ParquetCorrupt("corrupt Parquet page: bad snappy stream");
  }
  I.copy_out(S, j, pout, out);
}

void GpuPageDecoder::set_pool_limit(size_t bytes) {
  Impl& I = *impl_;
  I.pool_limit.store(bytes);
  GPUTOK_CUDA(cudaSetDevice(I.opt.device_id));
  for (DecodeSlot& s : I.slots) {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!bytes || s.arena.capacity() <= bytes) continue;
    if (s.stream) GPUTOK_CUDA(cudaStreamSynchronize(s.stream));
    s.arena.release();
  }
}

PageDecoderCounters GpuPageDecoder::counters() const {
  PageDecoderCounters c;
  for (DecodeSlot& s : impl_->slots) {
    std::lock_guard<std::mutex> lock(s.mu);
    c.device_allocs += s.counters.device_allocs;
    c.pinned_allocs += s.counters.pinned_allocs;
    c.launches += s.counters.launches;
    c.device_bytes += s.arena.capacity();
  }
  return c;
}

const PageDecoderOptions& GpuPageDecoder::options() const { return impl_->opt; }
const char* GpuPageDecoder::engine() const { return impl_->nvcomp ? "nvcomp" : "kernels"; }

}  // namespace gputok
