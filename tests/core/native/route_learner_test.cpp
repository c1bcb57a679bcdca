// device="auto"'s learned routes (backend_src/csrc/route_learner.h), on their own: no GPU needed.
// tests/core/test_route_learner.py builds and runs it, plain and under ThreadSanitizer. Each
// check prints "FAIL: what" and the program exits 1; all passing prints "ok".
//
//   route_learner_test [THREADS]
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "route_learner.h"

using gputok::RouteLearner;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what.c_str());
    ++failures;
  }
}

constexpr size_t kCenter = 16000;
using Kind = RouteLearner::Kind;

// n calls of `us` microseconds on path `gpu` in the bucket of `weight`.
void feed(RouteLearner& l, Kind k, size_t weight, bool gpu, double us, int n) {
  const int bucket = l.choose(k, weight, gpu).bucket;
  for (int i = 0; i < n; ++i) l.record(k, RouteLearner::Choice{gpu, bucket}, int64_t(us * 1e3));
}

// How many of `calls` calls of `weight` take the GPU.
int gpu_calls(RouteLearner& l, Kind k, size_t weight, bool rule_gpu, int calls) {
  int gpu = 0;
  for (int i = 0; i < calls; ++i) gpu += l.choose(k, weight, rule_gpu).gpu ? 1 : 0;
  return gpu;
}

const RouteLearner::BucketStats* stats_of(const std::vector<RouteLearner::BucketStats>& all,
                                          Kind k, size_t weight) {
  for (const RouteLearner::BucketStats& b : all)
    if (b.kind == k && b.lo <= weight && weight < b.hi) return &b;
  return nullptr;
}

void rule_until_both_timed() {
  RouteLearner l(kCenter);
  // A fresh bucket answers with the rule, but every 8th call (the other path, to time it).
  std::vector<bool> got;
  for (int i = 0; i < 16; ++i) got.push_back(l.choose(RouteLearner::kOne, 12000, false).gpu);
  for (int i = 0; i < 16; ++i)
    check(got[size_t(i)] == (i % 8 == 7), "fresh bucket, call " + std::to_string(i));
  // Timed on one path only: still the rule.
  feed(l, RouteLearner::kOne, 20000, false, 50.0, 20);
  check(gpu_calls(l, RouteLearner::kOne, 20000, true, 7) == 7, "CPU timed alone: the rule");
}

void faster_path_and_explore_rates() {
  RouteLearner l(kCenter);
  // The rule says CPU at 12 KB, but here the GPU has been faster.
  feed(l, RouteLearner::kOne, 12000, false, 25.0, 4);
  feed(l, RouteLearner::kOne, 12000, true, 20.0, 4);
  // The CPU timed 4 times: one call in 32 takes it.
  const int gpu = gpu_calls(l, RouteLearner::kOne, 12000, false, 3200);
  check(gpu == 3100, "faster GPU, 3200 calls: 3100 on the GPU, got " + std::to_string(gpu));
  // Timed 16 times: one call in 128 (under 1%: the p99 of a stream of such calls is the GPU's).
  feed(l, RouteLearner::kOne, 12000, false, 25.0, 12);
  const int settled = gpu_calls(l, RouteLearner::kOne, 12000, false, 2560);
  check(settled == 2540, "settled, 2560 calls: 2540 on the GPU, got " + std::to_string(settled));
  // Another bucket of the band is untouched, and so are batch calls of the same weight.
  check(gpu_calls(l, RouteLearner::kOne, 6000, false, 7) == 0, "another bucket: the rule");
  check(gpu_calls(l, RouteLearner::kBatch, 12000, false, 7) == 0, "batch calls: the rule");
}

void an_outlier_does_not_flip() {
  RouteLearner l(kCenter);
  feed(l, RouteLearner::kOne, 24000, false, 25.0, 8);
  feed(l, RouteLearner::kOne, 24000, true, 20.0, 8);
  feed(l, RouteLearner::kOne, 24000, true, 1e7, 1);  // one GPU call preempted for 10 s
  // (32 calls: one of them explores, whatever the bucket's call count was)
  check(gpu_calls(l, RouteLearner::kOne, 24000, false, 32) == 31, "one outlier flipped it");
  // A lasting change does: the GPU slower from now on.
  feed(l, RouteLearner::kOne, 24000, true, 60.0, 16);
  check(gpu_calls(l, RouteLearner::kOne, 24000, true, 32) <= 1, "a lasting change");
}

void the_first_call_of_a_path_is_not_averaged() {
  RouteLearner l(kCenter);
  feed(l, RouteLearner::kBatch, 9000, true, 900.0, 1);  // cold caches
  feed(l, RouteLearner::kBatch, 9000, true, 30.0, 3);
  const auto all = l.stats(kCenter);
  const RouteLearner::BucketStats* b = stats_of(all, RouteLearner::kBatch, 9000);
  check(b && b->n_gpu == 4 && b->gpu_us > 29.9 && b->gpu_us < 30.1, "the first call averaged");
}

void outside_the_band() {
  RouteLearner l(kCenter);
  // [16000 / 2^1.5, 16000 * 2^1.5) in 12 buckets.
  check(l.low() == 5657 && l.high() == 45255,
        "band [5657, 45255), got [" + std::to_string(l.low()) + ", " + std::to_string(l.high()));
  for (const size_t w : {size_t(100), size_t(5656), size_t(45255), size_t(1) << 40}) {
    for (int i = 0; i < 40; ++i) {
      const RouteLearner::Choice c = l.choose(RouteLearner::kBatch, w, i % 2 == 0);
      check(c.bucket == -1 && c.gpu == (i % 2 == 0), "outside, weight " + std::to_string(w));
    }
  }
  check(l.choose(RouteLearner::kOne, 5657, true).bucket == 0, "the band's first bucket");
  check(l.choose(RouteLearner::kOne, 45254, true).bucket == 11, "the band's last bucket");
  RouteLearner none(0);  // no rule, no band
  check(none.choose(RouteLearner::kOne, 20000, true).bucket == -1, "no band");
  check(none.stats(0).empty(), "no band, no stats");
}

void stats_say_what_was_learned() {
  RouteLearner l(kCenter);
  feed(l, RouteLearner::kBatch, 20000, true, 80.0, 5);
  feed(l, RouteLearner::kBatch, 20000, false, 50.0, 5);
  const auto all = l.stats(kCenter);
  check(all.size() == 24, "two kinds of 12 buckets");
  const RouteLearner::BucketStats* b = stats_of(all, RouteLearner::kBatch, 20000);
  check(b && b->n_cpu == 5 && b->n_gpu == 5 && !b->gpu && b->rule_gpu, "bucket stats");
  check(b && b->cpu_us > 49.9 && b->cpu_us < 50.1 && b->gpu_us > 79.9 && b->gpu_us < 80.1,
        "means");
}

// Many threads choosing and recording at once (ThreadSanitizer: no race), then sane counts.
void concurrent(int threads) {
  RouteLearner l(kCenter);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&l, t] {
      for (int i = 0; i < 20000; ++i) {
        const size_t w = 5000 + size_t((i * 7919 + t * 104729) % 45000);
        const Kind k = (i & 1) ? RouteLearner::kBatch : RouteLearner::kOne;
        const RouteLearner::Choice c = l.choose(k, w, w >= kCenter);
        l.record(k, c, c.gpu ? 40000 : int64_t(2 * w));
      }
    });
  }
  for (std::thread& th : pool) th.join();
  uint64_t calls = 0;
  for (const RouteLearner::BucketStats& b : l.stats(kCenter)) {
    calls += b.calls;
    check(b.n_cpu + b.n_gpu <= b.calls, "samples <= calls");
    if (b.n_cpu > 1) check(b.cpu_us > 0 && b.cpu_us < 1e3, "CPU mean in range");
  }
  check(calls > 0 && calls <= uint64_t(threads) * 20000, "calls counted");
}

}  // namespace

int main(int argc, char** argv) {
  rule_until_both_timed();
  faster_path_and_explore_rates();
  an_outlier_does_not_flip();
  the_first_call_of_a_path_is_not_averaged();
  outside_the_band();
  stats_say_what_was_learned();
  concurrent(argc > 1 ? std::atoi(argv[1]) : 8);
  if (failures) return 1;
  std::printf("ok\n");
  return 0;
}
