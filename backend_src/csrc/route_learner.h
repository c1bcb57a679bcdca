// device="auto" near its crossover, on this host: which path has been faster for calls of about
// this weight (Crossover::weight: bytes + rows * bytes_per_row), learned from the calls.
//
// Why: the measured rule (tokenizer.cpp) is one host's. Hosts differ: the CPU path's time at
// 10-14 KB moved 1.5-2x between H200 hosts and hours, and the fitted threshold with it (7,193-
// 14,387 over three days), so one rule was up to 1.25-1.47x the faster path at single points
// on some hosts (bench/results/2026-11-29-stream-h200.md). The learner keeps the rule's answer
// until both paths have been timed in a weight bucket, then takes the faster one there.
//
// How: the tokenizer asks it for calls that come alone or that the CPU path would run on the
// caller (its stream rule takes the others: tokenizer.cpp), of one text or batch calls (the
// CPU path cuts them from different sizes: at one weight the two can differ by 2x on the CPU
// and not on the GPU), each in a band of 12 buckets, 4 to an octave, over
// [center / 2^1.5, center * 2^1.5), center being the rule's cpu_below_bytes. Each bucket keeps
// per path the count of timed calls and an exponential mean of their wall time from its
// second call on (the first finds that path's caches cold; 1/8 per sample; a sample is first
// clipped to 1/2-2x the mean, so one preempted call moves it 12.5% at most). A bucket answers
// with its faster path once both have kMinSamples calls; until then the rule's. To keep the
// slower path's time current, every `period`-th call of a bucket takes it: 8 while it has
// fewer than kMinSamples timed calls, 32 while it has fewer than 16, then 128 (under 1% of a
// bucket's calls: its median and p99 stay on the faster path, its mean pays ~1% where the
// other path takes 2x).
//
// Thread safety: lock-free. Counters and means are relaxed atomics; two calls recording at once
// may lose one sample (an average of timings: harmless). Results never depend on it: both
// paths give the same ids.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gputok {

class RouteLearner {
 public:
  enum Kind : int { kOne = 0, kBatch = 1 };  // encode_one, or a batch call
  static constexpr int kKinds = 2;
  static constexpr int kBuckets = 12;
  static constexpr int kPerOctave = 4;
  static constexpr uint32_t kMinSamples = 4;

  struct Choice {
    bool gpu = false;
    int bucket = -1;  // -1: outside the band (the rule's answer, nothing to record)
  };
  struct BucketStats {
    Kind kind;
    size_t lo, hi;  // weights [lo, hi)
    uint32_t calls, n_cpu, n_gpu;
    double cpu_us, gpu_us;  // means (0 with fewer than two calls)
    bool gpu;               // what the bucket answers now
    bool rule_gpu;          // the rule's answer at the bucket's low edge
  };

  // center: the rule's cpu_below_bytes (0: no band).
  explicit RouteLearner(size_t center);

  // The band: weights [low(), high()).
  size_t low() const { return edges_[0]; }
  size_t high() const { return edges_[kBuckets]; }
  // The path of a call of `weight`, where the rule says `rule_gpu`.
  Choice choose(Kind k, size_t weight, bool rule_gpu);
  // The wall time of a call that took `c` (ignored for bucket -1).
  void record(Kind k, const Choice& c, int64_t ns);
  std::vector<BucketStats> stats(size_t cpu_below) const;

 private:
  struct Bucket {
    std::atomic<uint32_t> calls{0};
    std::atomic<uint32_t> n[2] = {};     // [0] CPU, [1] GPU
    std::atomic<float> mean_ns[2] = {};  // as n
  };
  int bucket_of(size_t weight) const;
  bool faster_gpu(const Bucket& b, bool rule_gpu, uint32_t* period) const;
  std::array<size_t, kBuckets + 1> edges_{};  // bucket j: [edges_[j], edges_[j + 1]); 0: none
  std::array<std::array<Bucket, kBuckets>, kKinds> buckets_;
};

}  // namespace gputok
