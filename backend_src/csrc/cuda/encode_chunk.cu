// GpuEncoder (gpu_encoder.h, the call in gpu_encoder.cu): one chunk on a lane. Its kernels and
// device buffers (lay_out), the host staging and uploads (stage_chunk), the launches, as a CUDA
// graph where GpuTuning::graph asks (enqueue_kernels), and the copies back of its counts and
// ids (submit_chunk, collect_chunk); print_chunk is GpuTuning::profile's line per chunk.
// Measured: the performance notes at the top of gpu_encoder.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "chunk_pipeline.h"
#include "common.cuh"
#include "gpu_encoder_impl.cuh"
#include "kernels.cuh"
#include "pretokenize.h"

namespace gputok {

using namespace cuda_detail;

namespace {

// Chunks up to this size write their ids straight into mapped pinned memory (the scatter
// kernel's stores cross PCIe), so one host sync ends the call instead of two: the token
// count no longer has to come back before the ids can be copied.
constexpr uint32_t kDirectMaxBytes = uint32_t(4) << 20;

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

void GpuEncoder::Impl::lay_out(Carver& cv, EncodeLane& L, uint32_t n, size_t n_units,
                               Algorithm algorithm, bool gpu_pretok) const {
  // The text (+ at least 16 zero bytes) and the unit offsets are one block, so one copy
  // uploads both.
  const size_t in_text = (size_t(n) + 16 + 15) & ~size_t(15);
  const bool per_word_alg = algorithm == Algorithm::kPerWord;
  L.small = per_word_alg && gpu_pretok && n <= kSmallMaxBytes;
  const bool one_launch =
      per_word_alg && gpu_pretok && !L.small && coop_blocks > 0 && tuning.fused_max_bytes > 0;
  // The lean kernel takes at most kLeanSpan bytes per block, and chunks above fused_max_bytes
  // up to GpuTuning::lean_max_bytes; the nine-barrier kernel only up to fused_max_bytes (0:
  // neither).
  const bool lean_fits = one_launch && lean_blocks > 0 &&
                         uint64_t(n) <= uint64_t(lean_blocks) * kLeanSpan &&
                         (n <= tuning.fused_max_bytes || n <= tuning.lean_max_bytes);
  L.fused = one_launch && (n <= tuning.fused_max_bytes || lean_fits);
  L.lean = lean_fits;
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
  // The lean kernel clocks itself into the mapped head (coop_device.cuh's host_stamp): no
  // events unless the profile wants them.
  L.events = !(L.lean && L.direct_head) || tuning.profile || tuning.kernel_events;
  auto enqueue = [&] {
    if (L.events) record(L.ev0);
    int launches = 0;
    const VocabView v = tables.vocab();
    PieceCacheView cache = tuning.piece_cache ? tables.cache() : PieceCacheView{};
    const int thread_min = L.small ? tuning.learn_thread_min_small : tuning.learn_thread_min;
    cache.learned.thread_min = thread_min > 0 ? thread_min : 1 << 30;
    cache.learned.early = tuning.learn_early;
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
    if (L.events) record(L.ev1);
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
  if (L.events) {
    GPUTOK_CUDA(cudaEventElapsedTime(&ms, L.ev0, L.ev1));
  } else {
    const uint32_t* h = reinterpret_cast<const uint32_t*>(L.pin_out.base()) + kHostStampAt;
    const uint64_t start = h[0] | uint64_t(h[1]) << 32, end = h[2] | uint64_t(h[3]) << 32;
    ms = end > start ? float(double(end - start) / 1e6) : 0.0f;
  }
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
