// What a job of the CPU encoder's thread pool costs beyond its work (thread_pool.h): jobs of N
// items, each busy-waiting W ns, back to back on T threads (the pool's spin window 50 us, as the
// encoder's), the median over 5 loops of 2,000 jobs, µs a job, and that minus the ideal
// (W x the rounds of items per thread). Not a test. Build it against a csrc tree to compare two:
//
//   g++ -O2 -std=c++17 -Ibackend_src/csrc bench/native/pool_overhead.cpp
//       backend_src/csrc/thread_pool.cpp -lpthread -o /tmp/pool_overhead && /tmp/pool_overhead
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "thread_pool.h"

using gputok::ThreadPool;

namespace {

void busy_wait(long ns) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::nanoseconds(ns)) {
  }
}

}  // namespace

int main() {
  const size_t hw = gputok::hardware_threads();
  ThreadPool pool(hw, gputok::kDefaultSpinUs);
  for (const size_t threads : {size_t(2), size_t(4), size_t(8), hw}) {
    if (threads > hw) continue;
    for (const long work : {0L, 2000L, 10000L}) {
      for (const size_t n : {std::max<size_t>(1, threads / 2), threads, 2 * threads}) {
        const std::function<void(size_t)> fn = [work](size_t) { busy_wait(work); };
        for (int i = 0; i < 200; ++i) pool.parallel_for(n, threads, fn);  // warm
        std::vector<double> t;
        for (int r = 0; r < 5; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          constexpr int kJobs = 2000;
          for (int i = 0; i < kJobs; ++i) pool.parallel_for(n, threads, fn);
          const std::chrono::duration<double, std::micro> d = std::chrono::steady_clock::now() - t0;
          t.push_back(d.count() / kJobs);
        }
        std::sort(t.begin(), t.end());
        const double ideal = double(work) / 1000 * double((n + threads - 1) / threads);
        std::printf("threads %2zu items %2zu work %5ld ns: %7.2f us a job (overhead %.2f)\n",
                    threads, n, work, t[2], t[2] - ideal);
      }
    }
  }
  return 0;
}
