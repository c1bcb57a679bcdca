// What a GPU encode call holds while it runs (gpu_encoder.cu, encode_chunk.cu): a slot of the
// encoder (a stream, a device arena, pinned buffers, copy threads; up to kEncodeSlots calls at
// once) and the slot's lanes (one chunk in flight each, up to kMaxLanes). Private to the
// encoder's CUDA sources.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common.cuh"
#include "gpu_encoder.h"
#include "kernels.cuh"
#include "pool.cuh"
#include "pretokenize.h"
#include "take_slot.cuh"
#include "thread_pool.h"

namespace gputok {

using cuda_detail::DeviceArena;
using cuda_detail::PinnedBuffer;

// The pool for a host copy of `bytes` (made on first need), or null where one thread does:
// under 1 MB, or with copy_threads 1.
inline ThreadPool* copy_pool_for(PoolPtr& pool, int copy_threads, size_t bytes) {
  if (bytes < (size_t(1) << 20) || copy_threads == 1) return nullptr;
  if (!pool) {
    const unsigned hw = std::thread::hardware_concurrency();
    const unsigned want = copy_threads > 0 ? unsigned(copy_threads) : 16u;
    pool.reset(new ThreadPool(std::min<unsigned>(hw ? hw : 1, want)));
  }
  return pool.get();
}

// Waits for everything queued on `stream`: spinning (cudaStreamSynchronize under the default
// schedule) or, given a blocking-sync event (GpuOptions::blocking_sync), asleep on it.
inline void wait_for(cudaStream_t stream, cudaEvent_t ev_sync) {
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
  PoolPtr pool;  // host copies; a ThreadPool runs one job at a time

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

// Tokenizing: up to 4 calls at once (GpuTuning::encode_slots: 1-8; 1 is the encoder before
// slots, one call at a time). Calls take the lowest free slot, so one caller at a time uses
// (and allocates) slot 0 only. Measured: the performance notes at the top of gpu_encoder.cu.
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
  bool events = true;  // ev0/ev1 recorded around the kernels (else the kernel's own clock)
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

}  // namespace gputok
