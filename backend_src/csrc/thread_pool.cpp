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
    stop_.store(true);
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

// The job's hand-off takes no lock while workers spin. Before, every worker took one mutex to
// join a job and again to leave it: a job of trivial items cost 20-34 us on 16 threads (H200
// host, 2026-11-29; 3.2-5.2 us now, thread_pool.h), and one text of 32 KB cut into 8 parts
// took 61 us against ~10 us a part (60.8 -> 32.7-33.3 us with this pool and 2 KiB parts,
// bench/results/2026-11-29-pool-h200.md). Every atomic below is sequentially consistent
// where a comment names an order; the arguments:
// - A worker reads job_ and job_n_ only after raising busy_ and then seeing gen_ even and
//   unchanged; a caller makes gen_ odd before it waits for busy_ to be 0 and writes them.
//   So a worker either sees the odd gen_ and leaves, or holds busy_ while it reads.
// - A worker that reads a finished job's fields finds its items all taken (the caller took
//   the rest before it returned, and next_ is reset only while busy_ is 0), so it never calls
//   a function whose caller has returned.
// - Sleepers: a worker counts itself in sleepers_ under mu_ and then tests gen_ under mu_; a
//   caller stores gen_ and then reads sleepers_. Either the worker sees the new gen_, or the
//   caller sees the sleeper and notifies under mu_ (after the worker waits).
// - The caller's wait: it sets caller_waits_ under mu_ and then tests busy_; the worker that
//   brings busy_ to 0 then reads caller_waits_ and notifies under mu_.
void ThreadPool::join_job(uint64_t g) {
  busy_.fetch_add(1);                                 // order: before the load of gen_
  if (gen_.load() == g && seats_.fetch_sub(1) > 0) {  // published, and a seat left
    const std::function<void(size_t)>* fn = job_;
    const size_t n = job_n_;
    for (size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n;) (*fn)(i);
  }
  if (busy_.fetch_sub(1) == 1 && caller_waits_.load()) {  // order: after the decrement
    std::lock_guard<std::mutex> lock(mu_);
    done_cv_.notify_all();
  }
}

void ThreadPool::loop() {
  uint64_t seen = 0, g = 0;
  const auto fresh = [&] {
    g = gen_.load(std::memory_order_acquire);
    return (g != seen && (g & 1) == 0) || stop_.load(std::memory_order_relaxed);
  };
  for (;;) {
    spin_until(fresh, true);
    if (!fresh()) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);  // order: before the wait's test of gen_
      cv_.wait(lock, fresh);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = g;
    join_job(g);
  }
}

void ThreadPool::parallel_for(size_t n, size_t threads, const std::function<void(size_t)>& fn) {
  threads = std::min({threads, size(), n});
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  // Callers serialize (the class comment), so only this thread writes gen_.
  const uint64_t g = gen_.load(std::memory_order_relaxed) + 2;
  gen_.store(g - 1);  // odd: workers that look now leave; order: before the loads of busy_
  spin_until([&] { return busy_.load() == 0; }, false);
  while (busy_.load() != 0) std::this_thread::yield();  // a late worker leaving an old job
  job_ = &fn;
  job_n_ = n;
  next_.store(0, std::memory_order_relaxed);
  seats_.store(int64_t(threads) - 1, std::memory_order_relaxed);
  gen_.store(g);  // published; order: before the load of sleepers_
  if (sleepers_.load() > 0) {
    {
      std::lock_guard<std::mutex> lock(mu_);
    }
    cv_.notify_all();
  }
  for (size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
  spin_until([&] { return busy_.load() == 0; }, false);
  if (busy_.load() != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_waits_.store(true);  // order: before the wait's test of busy_
    done_cv_.wait(lock, [&] { return busy_.load() == 0; });
    caller_waits_.store(false);
  }
}

}  // namespace gputok
