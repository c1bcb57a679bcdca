// The thread pool (thread_pool.h).
#include "thread_pool.h"

#include <algorithm>
#include <string>
#include <system_error>

namespace gputok {

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

ThreadPool::ThreadPool(size_t threads) {
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

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
}

void ThreadPool::loop() {
  size_t seen = 0;
  for (;;) {
    const std::function<void(size_t)>* fn;
    size_t n;
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
    if (--active_ == 0) done_cv_.notify_all();
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
    active_ = threads - 1;
    next_.store(0);
    ++generation_;
  }
  cv_.notify_all();
  for (size_t i; (i = next_.fetch_add(1)) < n;) fn(i);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return active_ == 0; });
  job_threads_ = 0;
}

}  // namespace gputok
