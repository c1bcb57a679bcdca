// The thread pool (thread_pool.h).
#include "thread_pool.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gputok {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace

size_t hardware_threads() {
  static const size_t n = std::max<size_t>(1, std::thread::hardware_concurrency());
  return n;
}

size_t resolve_threads(int num_threads) {
  if (num_threads > kMaxThreads)
    throw std::invalid_argument("num_threads must be <= " + std::to_string(kMaxThreads) +
                                " (0: every hardware thread), got " + std::to_string(num_threads));
  if (num_threads <= 0) return hardware_threads();
  return std::min(size_t(num_threads), hardware_threads());
}

ThreadPool::ThreadPool(size_t threads, unsigned spin_us) : spin_us_(std::min(spin_us, kMaxSpinUs)) {
  threads = std::min(threads, size_t(kMaxThreads));
  workers_.reserve(threads > 0 ? threads - 1 : 0);
  for (size_t i = 1; i < threads; ++i) {
    try {
      workers_.emplace_back([this] { loop(); });
    } catch (const std::system_error&) {
      break;  // the system refused a thread: run with those already started
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

bool ThreadPool::in_this_process() const { return made_.here(); }

void ThreadPoolDeleter::operator()(ThreadPool* p) const noexcept {
  if (p && p->in_this_process()) delete p;
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
}

// A worker watches for the next job's generation for up to spin_us_: a job published meanwhile
// is taken without waking a sleeping worker (a futex wake, and on a VM an idle vCPU's); the
// caller watches for the workers' last items, which usually end within microseconds of its
// own. Measured (H100 host, 16 cores, 2026-11-27, bench/bench_pool_spin.py, 4 rotated rounds):
// one text split across the cores, 32-128 KB, took 0.84-0.95x the time with 50 us as with 0;
// 256 KB-1 MB and batches the same; 200 us measured like 50. The cost: up to spin_us_ of CPU
// per worker after each job.
template <typename Done>
void ThreadPool::spin_until(Done done, bool yield) const {
  if (spin_us_ == 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
  for (unsigned k = 0; !done(); ++k) {
    if ((k & 63) == 63) {
      if (std::chrono::steady_clock::now() >= until) return;
      if (yield) std::this_thread::yield();  // a runnable thread (the caller's) goes first
    }
    cpu_relax();
  }
}

void ThreadPool::loop() {
  size_t seen = 0;
  for (;;) {
    const std::function<void(size_t)>* fn;
    size_t n;
    spin_until(
        [&] {
          return generation_.load(std::memory_order_acquire) != seen ||
                 stop_.load(std::memory_order_relaxed);
        },
        true);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || (generation_ != seen && job_threads_ > 0); });
      if (stop_) return;
      seen = generation_;
      --job_threads_;
      fn = job_;
      n = job_n_;
    }
    for (size_t i; (i = next_.fetch_add(1)) < n;) (*fn)(i);
    std::lock_guard<std::mutex> lock(mu_);
    if (active_.fetch_sub(1, std::memory_order_release) == 1) done_cv_.notify_all();
  }
}

void ThreadPool::parallel_for(size_t n, size_t threads, const std::function<void(size_t)>& fn) {
  threads = std::min({threads, size(), n});
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_threads_ = threads - 1;
    active_.store(threads - 1, std::memory_order_relaxed);
    next_.store(0);
    generation_.fetch_add(1, std::memory_order_release);  // a spinning worker sees the job
  }
  cv_.notify_all();
  for (size_t i; (i = next_.fetch_add(1)) < n;) fn(i);
  spin_until([&] { return active_.load(std::memory_order_acquire) == 0; }, false);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return active_ == 0; });
  job_threads_ = 0;
}

}  // namespace gputok
