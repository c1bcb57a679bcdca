// The CPU encoder's thread pool under stress (tests/core/test_thread_pool_native.py builds and
// runs it, plain and under ThreadSanitizer): jobs of 1-13 items back to back, on 2-8 threads,
// with spin windows of 0, 5 and 50 us and pauses that let workers fall asleep. Every item of
// every job must run exactly once, before its parallel_for returns, and never afterwards
// (each job counts its calls; the counts are checked again at the end). Prints "ok".
//
//   pool_stress ROUNDS
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "thread_pool.h"

using gputok::ThreadPool;

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 20000;
  std::unique_ptr<std::atomic<int>[]> calls(new std::atomic<int>[size_t(rounds)]);
  for (const unsigned spin : {0u, 5u, 50u}) {
    for (const size_t threads : {2u, 4u, 8u}) {
      ThreadPool pool(threads, spin);
      for (int r = 0; r < rounds; ++r) calls[size_t(r)].store(0);
      std::vector<size_t> want(size_t(rounds), 0);
      for (int r = 0; r < rounds; ++r) {
        const size_t n = 1 + size_t(r) * 7 % 13;
        std::vector<int> hit(n, 0);  // plain ints: two runs of one item would race (TSan)
        const std::function<void(size_t)> fn = [&hit, &calls, r](size_t i) {
          hit[i] += 1;
          calls[size_t(r)].fetch_add(1);
        };
        pool.parallel_for(n, 2 + size_t(r) % threads, fn);
        want[size_t(r)] = n;
        for (size_t i = 0; i < n; ++i) {
          if (hit[i] != 1) {
            std::printf("spin %u threads %zu job %d: item %zu ran %d times\n", spin, threads, r, i,
                        hit[i]);
            return 1;
          }
        }
        if (r % 997 == 996) std::this_thread::sleep_for(std::chrono::microseconds(2 * spin + 200));
      }
      for (int r = 0; r < rounds; ++r) {
        if (size_t(calls[size_t(r)].load()) != want[size_t(r)]) {
          std::printf("spin %u threads %zu job %d: %d calls, want %zu (a call after it returned)\n",
                      spin, threads, r, calls[size_t(r)].load(), want[size_t(r)]);
          return 1;
        }
      }
    }
  }
  std::printf("ok\n");
  return 0;
}
