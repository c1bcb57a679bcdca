// A small persistent thread pool, and the thread-count policy of every native call.
//
// Spawning threads per call costs ~30 us each, which would dominate small batches in a
// server; the pool keeps them. Its size is capped (kMaxThreads, and the hardware's thread
// count for the threads actually started), and a thread the system refuses to create
// leaves a smaller pool instead of an error or a hang.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "process_stamp.h"

namespace gputok {

// Above this a num_threads argument is refused (std::invalid_argument, ValueError in
// Python): no CPU this runs on has that many hardware threads, and each thread reserves a
// stack (8 MiB of address space by default).
constexpr int kMaxThreads = 1024;

// std::thread::hardware_concurrency(), at least 1, read once: glibc answers it by reading
// /sys on every call (~2 us here, measured 2026-11-25), which was most of a small call.
size_t hardware_threads();

// The threads a call runs on: num_threads <= 0 means every hardware thread; more than the
// hardware has are not started (CPU-bound work only slows down when oversubscribed, and
// results never depend on the count). Throws std::invalid_argument above kMaxThreads.
size_t resolve_threads(int num_threads);

// How long an idle worker of the CPU encoder's pool keeps watching for the next job before it
// sleeps (Encoder's default; thread_pool.cpp has the measurement). Other pools (the GPU path's
// host copies) do not spin: nobody measured it there, and a corpus run keeps several of them.
constexpr unsigned kDefaultSpinUs = 50;
constexpr unsigned kMaxSpinUs = 10000;

class ThreadPool {
 public:
  // Starts up to `threads` - 1 workers (the caller is the other one). A worker the system
  // cannot create (EAGAIN, address space) ends the start-up: the pool keeps those it has.
  // A worker that finishes a job watches for the next one for `spin_us` microseconds (at
  // most kMaxSpinUs) before it sleeps: a job that comes within that window starts without a
  // wake-up. 0: sleep at once.
  explicit ThreadPool(size_t threads, unsigned spin_us = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  size_t size() const { return workers_.size() + 1; }
  // False in a fork()ed child: it has this object but none of the workers' threads.
  bool in_this_process() const;
  // Runs fn(i) for i in [0, n) on up to `threads` threads (the caller is one of them).
  // One job at a time: callers serialize (Encoder holds a mutex around it).
  void parallel_for(size_t n, size_t threads, const std::function<void(size_t)>& fn);

 private:
  void loop();
  // Watches for done() for up to spin_us_ (returns at once when spin_us_ is 0); `yield` lets
  // a runnable thread go first every 64 rounds.
  template <typename Done>
  void spin_until(Done done, bool yield) const;
  // A worker's part of the job it saw published as generation g: a seat if one is left, then
  // items until none are left.
  void join_job(uint64_t g);
  void stop_workers();
  const unsigned spin_us_;
  const ProcessStamp made_;  // the process that started the workers
  // A job is published without a lock (thread_pool.cpp): gen_ is odd while the caller
  // writes job_ and job_n_, even once they are published; a worker reads them only between
  // raising busy_ and seeing the same even gen_ again, and the caller waits for busy_ to be 0
  // before it writes them. Sleeping workers wait on cv_ (under mu_), a caller whose workers
  // outlast its spin on done_cv_.
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  // gen_, which idle workers poll, has a cache line of its own, apart from the counters that
  // each job's workers write (seats_ and busy_, next_): 16-core H200 host, 2026-11-29,
  // back-to-back jobs of 4-32 trivial items on 8-16 threads (bench/native/pool_overhead.cpp)
  // took 2.7-8.4 us a job with them on one line and 3.2-5.2 us apart (20-34 us with the mutex
  // before).
  alignas(64) std::atomic<uint64_t> gen_{0};
  alignas(64) std::atomic<int64_t> seats_{0};  // workers that may still join the published job
  std::atomic<size_t> busy_{0};                // workers looking at, or running, that job
  alignas(64) std::atomic<size_t> next_{0};    // its next item
  alignas(64) std::atomic<size_t> sleepers_{0};
  std::atomic<bool> caller_waits_{false}, stop_{false};
  // Last member: destroyed first, and stop_workers() has joined every thread before the
  // condition variables above go (destroying one a thread still waits on hangs in glibc).
  std::vector<std::thread> workers_;
};

// Owns a pool: deletes it in the process that started it. In a fork()ed child, which has the
// object but not its threads, it leaks it instead: joining those threads, or destroying the
// condition variables they waited on, hung the child (a tokenizer dropped or replaced in a
// DataLoader worker, 2026-11-27).
struct ThreadPoolDeleter {
  void operator()(ThreadPool* p) const noexcept;
};
using PoolPtr = std::unique_ptr<ThreadPool, ThreadPoolDeleter>;

}  // namespace gputok
