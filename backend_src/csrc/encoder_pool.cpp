// The encoder's CPU thread pool (encoder.h): one per Encoder, started on its first parallel
// call, with the spin window of thread_pool.h.
#include <algorithm>
#include <chrono>
#include <string>

#include "encoder.h"

namespace gputok {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void Encoder::run_parallel(size_t n, size_t threads, const std::function<void(size_t)>& fn) const {
  if (threads <= 1 || n <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  // The pool runs one job at a time: a call that finds it busy runs on its own thread
  // rather than queueing behind another call.
  std::unique_lock<std::mutex> lock(pool_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  // After fork() a child holds this Encoder but none of the pool's threads, and waiting for
  // them hung its first parallel call (a DataLoader worker, a multiprocessing "fork" pool):
  // the child starts its own (PoolPtr leaks the parent's, a small leak per fork).
  if (pool_ && !pool_->in_this_process()) pool_.reset();
  // Once, with every hardware thread (resolve_threads never asks for more); a pool the
  // system made smaller stays as it is rather than being rebuilt on every call.
  if (!pool_) pool_.reset(new ThreadPool(hardware_threads(), spin_us_.load()));
  pool_->parallel_for(n, threads, fn);
  pool_job_end_ns_.store(now_ns(), std::memory_order_relaxed);
}

Encoder::OneTextStream::OneTextStream(const Encoder* e) : enc(e) {
  if (!e) return;
  const int64_t spin_ns = int64_t(e->spin_us_.load(std::memory_order_relaxed)) * 1000;
  const int64_t last = std::max(e->pool_job_end_ns_.load(std::memory_order_relaxed),
                                e->one_text_end_ns_.load(std::memory_order_relaxed));
  warm = spin_ns > 0 && now_ns() - last < spin_ns;
}

Encoder::OneTextStream::~OneTextStream() {
  if (enc) enc->one_text_end_ns_.store(now_ns(), std::memory_order_relaxed);
}

void Encoder::set_cpu_spin_us(unsigned us) {
  if (us > kMaxSpinUs)
    throw std::invalid_argument("cpu_spin_us must be <= " + std::to_string(kMaxSpinUs) + ", got " +
                                std::to_string(us));
  std::lock_guard<std::mutex> lock(pool_mu_);
  spin_us_.store(us);
  pool_.reset();  // the next parallel call starts one with the new setting
}

unsigned Encoder::cpu_spin_us() const { return spin_us_.load(); }

}  // namespace gputok
