// device="auto"'s learned crossover (route_learner.h).
#include "route_learner.h"

#include <algorithm>
#include <cmath>

namespace gputok {

namespace {

// How often a bucket takes its slower path: every 8th call while that path has fewer than
// kMinSamples timed calls, every 32nd while it has fewer than kSettled, then every 128th (under
// 1% of the bucket's calls, so a stream of calls of one size keeps its p99 on the faster path).
constexpr uint32_t kExploreNew = 8;
constexpr uint32_t kExploreNear = 32;
constexpr uint32_t kExploreSettled = 128;
constexpr uint32_t kSettled = 16;
constexpr float kClip = 2.0f;             // a sample is clipped to [mean / 2, mean * 2]
constexpr float kStep = 1.0f / 8.0f;      // the mean's step toward a sample
constexpr uint32_t kCountCap = 1u << 30;  // counts saturate (never wrap to "no samples")

}  // namespace

RouteLearner::RouteLearner(size_t center) {
  if (center == 0) return;
  const double lo = double(center) / std::exp2(1.5);
  for (int j = 0; j <= kBuckets; ++j)
    edges_[j] = std::max<size_t>(1, size_t(std::llround(lo * std::exp2(double(j) / kPerOctave))));
}

int RouteLearner::bucket_of(size_t weight) const {
  if (edges_[0] == 0 || weight < edges_[0] || weight >= edges_[kBuckets]) return -1;
  return int(std::upper_bound(edges_.begin(), edges_.end(), weight) - edges_.begin()) - 1;
}

// The bucket's faster path (the rule's until both have kMinSamples), and how often the other
// one is taken to keep its mean current.
bool RouteLearner::faster_gpu(const Bucket& b, bool rule_gpu, uint32_t* period) const {
  const uint32_t n_cpu = b.n[0].load(std::memory_order_relaxed);
  const uint32_t n_gpu = b.n[1].load(std::memory_order_relaxed);
  const float cpu = b.mean_ns[0].load(std::memory_order_relaxed);
  const float gpu = b.mean_ns[1].load(std::memory_order_relaxed);
  const bool known = n_cpu >= kMinSamples && n_gpu >= kMinSamples;
  const bool fast_gpu = known ? gpu < cpu : rule_gpu;
  const uint32_t n_other = fast_gpu ? n_cpu : n_gpu;
  *period = n_other < kMinSamples ? kExploreNew
            : n_other < kSettled  ? kExploreNear
                                  : kExploreSettled;
  return fast_gpu;
}

RouteLearner::Choice RouteLearner::choose(Kind kind, size_t weight, bool rule_gpu) {
  const int k = bucket_of(weight);
  if (k < 0) return Choice{rule_gpu, -1};
  Bucket& b = buckets_[kind][k];
  uint32_t period = kExploreNear;
  const bool fast_gpu = faster_gpu(b, rule_gpu, &period);
  const uint32_t call = b.calls.fetch_add(1, std::memory_order_relaxed);
  const bool explore = call % period == period - 1;
  return Choice{explore ? !fast_gpu : fast_gpu, k};
}

void RouteLearner::record(Kind kind, const Choice& c, int64_t ns) {
  if (c.bucket < 0 || c.bucket >= kBuckets || ns <= 0) return;
  Bucket& b = buckets_[kind][c.bucket];
  const int p = c.gpu ? 1 : 0;
  const uint32_t n = b.n[p].load(std::memory_order_relaxed);
  const float mean = b.mean_ns[p].load(std::memory_order_relaxed);
  // A path's first call in a bucket is counted, not averaged: it finds that path's caches cold
  // for these texts (the CPU's pretoken cache, the GPU's learned one; H200, 2026-11-29: a
  // bucket's first GPU calls averaged 82.6 us where the GPU path took 60).
  float s = float(ns);
  if (n > 1) s = std::min(std::max(s, mean / kClip), mean * kClip);
  if (n > 0) b.mean_ns[p].store(n == 1 ? s : mean + (s - mean) * kStep, std::memory_order_relaxed);
  if (n < kCountCap) b.n[p].store(n + 1, std::memory_order_relaxed);
}

std::vector<RouteLearner::BucketStats> RouteLearner::stats(size_t cpu_below) const {
  std::vector<BucketStats> out;
  if (edges_[0] == 0) return out;
  for (int kind = 0; kind < kKinds; ++kind) {
    for (int j = 0; j < kBuckets; ++j) {
      const Bucket& b = buckets_[kind][j];
      const bool rule_gpu = edges_[j] >= cpu_below;
      uint32_t period = 0;
      const uint32_t n_cpu = b.n[0].load(std::memory_order_relaxed);
      const uint32_t n_gpu = b.n[1].load(std::memory_order_relaxed);
      out.push_back(BucketStats{
          Kind(kind), edges_[j], edges_[j + 1], b.calls.load(std::memory_order_relaxed), n_cpu,
          n_gpu, n_cpu > 1 ? b.mean_ns[0].load(std::memory_order_relaxed) / 1e3 : 0.0,
          n_gpu > 1 ? b.mean_ns[1].load(std::memory_order_relaxed) / 1e3 : 0.0,
          faster_gpu(b, rule_gpu, &period), rule_gpu});
    }
  }
  return out;
}

}  // namespace gputok
