// The tokenizer facade: what the Python API calls. It owns the CPU/GPU choice (the device
// at construction, the path per call under device "auto"), parses the string options and
// checks every argument that guards native memory, once. The bindings only convert types.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "encoder.h"
#include "gpu_encoder.h"
#include "process_stamp.h"
#include "route_learner.h"
#include "vocab.h"

namespace gputok {

// device="cuda" asked for where no GPU can be used (Python: gputok.CudaUnavailableError, a
// RuntimeError).
class CudaUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad option or argument value (Python: ValueError).
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class Device { kCpu, kCuda };

// Where a call runs on a GPU tokenizer: the CPU path while
//   bytes + rows * bytes_per_row < cpu_below_bytes,
// the GPU otherwise. A call's GPU time has a fixed part (a launch, two copies, a sync: ~50 us
// on the H100 host) that a small call's CPU time stays under; each text costs the CPU path
// more than it costs the GPU (bytes_per_row: that difference in bytes of CPU work), so the
// more texts, the fewer bytes stay on the CPU. cpu_below_bytes 0: always the GPU.
//
// In a stream of calls the CPU path is faster further up: a call that starts within the CPU
// pool's spin window of the last such call's end, with no other such call of this tokenizer
// running, finds the pool's threads awake and cuts its text across every core. Such a call
// also stays on the CPU while bytes + rows * bytes_per_row < stream_below_bytes (0 or any
// value <= cpu_below_bytes: no stream rule). tokenizer.cpp gives the measurement.
struct Crossover {
  size_t cpu_below_bytes = 0;
  size_t bytes_per_row = 0;
  size_t stream_below_bytes = 0;
  bool use_cpu(size_t bytes, size_t rows) const { return weight(bytes, rows) < cpu_below_bytes; }
  // bytes + rows * bytes_per_row, saturating: a huge row count must not wrap to a small sum.
  size_t weight(size_t bytes, size_t rows) const;
  // From Python's ints: throws ArgumentError for a negative one.
  static Crossover checked(int64_t cpu_below_bytes, int64_t bytes_per_row,
                           int64_t stream_below_bytes = 0);
};

// The measured default (bench/bench_crossover.py; tokenizer.cpp says where and when), its
// stream rule scaled to `threads` hardware threads (the measuring host had 16).
Crossover default_crossover(size_t threads = hardware_threads());

struct TokenizerOptions {
  std::string device = "cpu";  // "auto" (the GPU when usable), "cpu" or "cuda"
  std::string algorithm = "per_word";
  GpuOptions gpu;        // used on a GPU tokenizer; copy_threads >= 0
  GpuTuning gpu_tuning;  // the GPU path's tuning switches (gpu_encoder.h)
  // The rule of a GPU tokenizer when `crossover_given`; else default_crossover() for device
  // "auto" and none (always the GPU) for device "cuda".
  Crossover crossover;
  bool crossover_given = false;
};

// The per-call policy, parsed.
struct EncodeArgs {
  SpecialPolicy policy;
  Utf8Policy utf8 = Utf8Policy::kStrict;
  int num_threads = 0;  // CPU path; <= 0: all hardware threads
};

Utf8Policy parse_utf8_policy(const std::string& errors);  // "strict" | "replace"
Algorithm parse_algorithm(const std::string& name);

// Document bounds into a buffer of `size` bytes: int32 or int64 values, either n + 1
// boundaries (`rows_plus_one`, non-decreasing) or n [start, end) spans (any order).
struct Bounds {
  const void* data = nullptr;
  bool wide = true;    // int64 (else int32)
  bool spans = false;  // shape (n, 2), else (n + 1,)
  size_t length = 0;   // shape[0]
};

// The documents as views into data[0, size); throws ArgumentError naming the first bound that
// is not a range inside the buffer (a bad one would read outside it).
std::vector<TextInput> buffer_views(const char* data, size_t size, const Bounds& bounds);

class Tokenizer {
 public:
  // Throws ArgumentError for a bad option, CudaUnavailable for device "cuda" without a GPU.
  Tokenizer(std::shared_ptr<const Vocab> vocab, const TokenizerOptions& options);

  bool on_gpu() const { return gpu_ != nullptr; }
  // "cuda" when calls past the crossover run on the GPU; "cpu" for a CPU tokenizer, and for a
  // device "auto" one in a process forked from the one that built it (routes_to_gpu).
  const char* device() const;
  const Vocab& vocab() const { return *vocab_; }

  // All texts' ids and offsets, on the path the crossover picks. kernel_ms: 0 on the CPU.
  EncodeResult encode(const std::vector<TextInput>& texts, const EncodeArgs& args) const;
  // encode packed as uint16 with `separator` (none: nothing) after every text; a separator
  // outside 0..65535 throws ArgumentError.
  PackedResult encode_packed(const std::vector<TextInput>& texts, const EncodeArgs& args,
                             std::optional<int64_t> separator) const;
  // One text's ids into `out` (cleared first, so a caller may hand the same buffer to every
  // call and keep its capacity): on the calling thread when the CPU path is picked (the
  // latency path), else the GPU's output buffer itself, moved in (no copy).
  void encode_one(const TextInput& text, const EncodeArgs& args, IdVector& out) const;
  std::string decode_bytes(const int64_t* ids, size_t n) const;

  // True when a call of `bytes` over `rows` texts would run on the GPU. CUDA does not survive
  // fork(): in a process forked from the one that built the GPU encoder (a PyTorch DataLoader
  // worker, a multiprocessing "fork" pool), a device "auto" tokenizer runs every call on the
  // CPU path (false here), and a device "cuda" one refuses each GPU call (CudaUnavailable).
  // The path of a call that comes alone: the stream rule (Crossover) is decided per call.
  bool routes_to_gpu(size_t bytes, size_t rows) const;
  Crossover crossover() const;
  void set_crossover(Crossover c);  // GPU tokenizers only; ends the learning below
  // device "auto" with the default rule learns, near the rule's thresholds, which path is
  // faster on this host (route_learner.h); a rule given or set is kept as it is (no buckets).
  std::vector<RouteLearner::BucketStats> learned_routes() const;
  void set_pool_limit(size_t bytes);  // GPU tokenizers only
  void set_gpu_pretokenize(bool on);  // GPU tokenizers only
  GpuCounters gpu_counters() const;   // zeros on the CPU
  // The CPU path's shared pretoken cache (encoder.h).
  void set_piece_cache_bytes(size_t bytes) { encoder_.set_piece_cache_bytes(bytes); }
  PieceCacheStats piece_cache_stats() const { return encoder_.piece_cache_stats(); }
  void set_cpu_spin_us(unsigned us) { encoder_.set_cpu_spin_us(us); }
  unsigned cpu_spin_us() const { return encoder_.cpu_spin_us(); }
  GpuEncoder* gpu() const { return gpu_.get(); }  // for tools built on the tokenizer

 private:
  GpuEncoder& need_gpu(const char* what) const;
  class Route;
  // The GPU encoder for a call routes_to_gpu sends there, or null for the CPU path; throws
  // CudaUnavailable in a forked child of a device "cuda" tokenizer.
  GpuEncoder* gpu_for(size_t bytes, size_t rows) const;
  void store(Crossover c);
  std::shared_ptr<const Vocab> vocab_;
  Encoder encoder_;
  std::unique_ptr<GpuEncoder> gpu_;  // thread-safe: concurrent calls run on slots of their own
  Algorithm algorithm_;
  bool automatic_ = false;  // device "auto"
  ProcessStamp made_;       // the process that built this tokenizer, and so gpu_
  // Read on every call, written by set_crossover from any thread: two relaxed atomics (a call
  // racing a setter sees the old rule or the new one, either of which gives the same ids).
  std::atomic<size_t> cpu_below_bytes_{0}, bytes_per_row_{0}, stream_below_bytes_{0};
  // The stream rule's state (Route): calls in its range now running, and when the last ended.
  mutable std::atomic<int> stream_calls_{0};
  mutable std::atomic<int64_t> stream_end_ns_{INT64_MIN / 2};  // as Encoder's stamps
  // The learned routes (null: none) and whether they are still in force (set_crossover ends
  // them).
  std::unique_ptr<RouteLearner> learner_;
  std::atomic<bool> learning_{false};
};

}  // namespace gputok
