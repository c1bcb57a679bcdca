// The encoder's CPU thread pool (encoder.h): one per Encoder, started on its first parallel
// call, with the spin window of thread_pool.h; and which calls split across it.
#include <algorithm>
#include <chrono>
#include <string>

#include "encoder.h"

namespace gputok {

namespace {
// A call of at least one_text_parallel_bytes(threads) is cut into about two parts per hardware
// thread (at safe split points, none under kMinChunkBytes) and encoded on every core; from
// one_text_warm_bytes(threads) below that it is split only when the pool is awake
// (Encoder::CallSplit: its last job or the last such call ended within the spin window, as in
// a stream of calls); smaller calls, and calls that find the pool busy, run on the calling
// thread. Waking the
// pool costs ~100-200 us on a VM, so fewer threads need a longer call to gain: 16 KiB on 9
// threads or more, 32 on 5-8, 64 on 3-4, 128 on 2. Measured:
// - 16-core H100 host, 2026-11-27, split/one thread, one text: 0.62-0.68x at 32 KB, 0.40-0.61x
//   at 64 KB, 0.19-0.38x from 128 KB; 2-core dev VM, alone 1.88-2.28x at 32-64 KB and 0.79-0.98x
//   from 128 KB, back to back 0.43-0.78x at 32-96 KB. 3-7 threads: interpolated.
// - H200 host, 16 cores, 2026-11-29, with the lock-free pool (bench/bench_encoder_ab.py
//   --wall, medians of 5 rounds): back to back, 16 KB in 2 KiB parts 27.6 us against 41.3 on
//   the calling thread, 8 KB 24.1 against 21.2 (so not lower); alone (1 ms after the last
//   call), 24 KB 55.8 against 86.1, 16 KB 51.0 against 48.9.
constexpr size_t kOneTextParallelBytes = 16 * 1024;
size_t one_text_parallel_bytes(size_t threads) {
  if (threads > 8) return kOneTextParallelBytes;
  return 2 * kOneTextParallelBytes * std::max<size_t>(1, 8 / std::max<size_t>(1, threads));
}
// In a stream, one text (encode_one) from 8 KiB on 9 or more hardware threads; 16 KiB on
// fewer (unmeasured below) and for a batch call. H200 host, 16 cores, 2026-11-29 07:47
// (`bench_encoder_ab.py --wall`, medians of 5 rounds), in a stream, 16 KiB against 6 KiB: 8 KB
// 21.4 -> 20.3 us, 9.3 KB 24.1 -> 21.0, 10.2 KB 27.6 -> 21.0, 12.3 KB 39.9 -> 20.8, 14.3 KB 38.0
// -> 23.1; 6 KB 16.1 -> 17.9 (so not lower). Parts of 1 KiB instead of 2: 8-10 KB 5-13% faster,
// 12-16 KB up to 10% slower (not taken). A batch call keeps 16 KiB: the served tokenizer makes
// one per request from several instance processes, each with a pool on every core, and with
// 8 KiB its 4K-token requests at concurrency 64 ran at 0.85x the gigatoken baseline against
// 0.99x with 16 (H200, 08:35, `scripts/gpu_serve_bench.sh`, 2 instances; one pass each).
constexpr size_t kOneTextWarmBytes = 16 * 1024;
constexpr size_t kOneTextWarmBytesWide = 8 * 1024;
size_t one_text_warm_bytes(size_t threads, bool one_text) {
  return one_text && threads > 8 ? kOneTextWarmBytesWide : kOneTextWarmBytes;
}
// Parts: about two per hardware thread, none under kMinChunkBytes. 16-core H100 host,
// 2026-11-27, back to back (`2026-11-27-eve-h100.md` §7): 4 KiB against 8 KiB 0.76x the time
// at 32 KB, 0.87-0.90x at 48-64 KB, the same from 256 KB; 16 and 24 KiB 1.2-2.0x slower. H200
// host, 2026-11-29, with the lock-free pool: 2 KiB against 4 KiB 30.3-32.8 us against 37.4-39.7
// at 32 KB, within 5% at 48-256 KB (with the old pool 2 KiB measured like 4).
constexpr size_t kMinChunkBytes = 2 * 1024;
}  // namespace

int64_t Encoder::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

size_t Encoder::stream_split_bytes(bool one_text) {
  return one_text_warm_bytes(hardware_threads(), one_text);
}

bool Encoder::within_spin_window(int64_t stamp_ns) const {
  const int64_t spin_ns = int64_t(spin_us_.load(std::memory_order_relaxed)) * 1000;
  return spin_ns > 0 && now_ns() - stamp_ns < spin_ns;
}

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

Encoder::CallSplit::CallSplit(const Encoder* e, size_t bytes, size_t threads, bool one_text) {
  if (threads <= 1 || bytes < one_text_warm_bytes(threads, one_text)) return;
  bool split = bytes >= one_text_parallel_bytes(threads);
  if (!split) {  // mid-size: split when the pool is awake
    enc = e;
    split = e->within_spin_window(std::max(e->pool_job_end_ns_.load(std::memory_order_relaxed),
                                           e->one_text_end_ns_.load(std::memory_order_relaxed)));
  }
  if (split) part = std::min(kChunkBytes, std::max(kMinChunkBytes, bytes / (2 * threads)));
}

Encoder::CallSplit::~CallSplit() {
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
