#include "tokenizer.h"

#include <algorithm>
#include <exception>

#include "decode.h"

namespace gputok {

// The default crossover of device "auto", measured by `python bench/bench_crossover.py --out
// DIR` on the H100 host (16 CPUs), 2026-11-27 09:33 UTC, after the CPU path's whole-token
// pretoken cache (bench/results/2026-11-27-crossover-h100.md): one text of 9.4 KB took 35 us on
// the CPU path and 56 us on the GPU, 13.8 KB 52-62 vs 62-63 us, 16.4 KB 62-63 vs 60-62 us,
// 18.5 KB 92-99 vs 64 us; a text more costs the CPU about 12 bytes' worth more than the GPU.
// The fit: CPU while bytes + 12 * texts < 14387; its worst slowdown against the faster path
// over the 92-point grid is 1.16x (one noisy CPU point at 11.5 KB), where the rule before it,
// (6049, 0), fitted on 2026-11-25 to the slower CPU path, was 1.32x at 9.4 KB x 16 texts.
// Re-measure when either path changes.
constexpr size_t kCpuBelowBytes = 14387;
constexpr size_t kBytesPerRow = 12;
// The stream rule (Crossover), measured by the same bench's stream step (calls back to back,
// each path in bursts) on two H200 hosts (16 CPUs), 2026-11-29 07:43 and 07:48 UTC
// (bench/results/2026-11-29-stream-h200.md). The CPU path, split across the cores from 16 KiB
// with its pool awake, against the GPU, one text: 16 KB 26.9 / 43.9 us and 39.2 / 51.5, 64 KB
// 53.5 / 66.3 and 85.2 / 75.6, 128 KB 97.9 / 117.4 and 119.9 / 120.0, 512 KB 379 / 367 and
// 341 / 318; more texts move it toward the GPU. The two hosts' fits were 230195 and 40693;
// 98304 is the least worst over both (CPU while bytes + 12 * texts < 98304: worst 1.20x of the
// faster path on each, mean 1.027x and 1.021x over 56 points each, where the rule by size
// alone was up to 1.69x and 1.31x, mean 1.15x and 1.03x).
constexpr size_t kStreamBelowBytes = 98304;
constexpr size_t kStreamHostThreads = 16;  // the measuring host's; fewer threads scale it down

size_t Crossover::weight(size_t bytes, size_t rows) const {
  if (bytes_per_row && rows > (SIZE_MAX - bytes) / bytes_per_row) return SIZE_MAX;
  return bytes + rows * bytes_per_row;
}

Crossover Crossover::checked(int64_t cpu_below_bytes, int64_t bytes_per_row,
                             int64_t stream_below_bytes) {
  const auto need = [](int64_t v, const char* name) {
    if (v < 0) throw ArgumentError(std::string(name) + " must be >= 0, got " + std::to_string(v));
    return size_t(v);
  };
  return Crossover{need(cpu_below_bytes, "cpu_below_bytes"), need(bytes_per_row, "bytes_per_row"),
                   need(stream_below_bytes, "stream_below_bytes")};
}

// The split CPU path's time falls about as the cores rise, the GPU's does not: on fewer
// threads than the measuring host's the stream rule keeps proportionally less on the CPU (and
// none where that is under the alone rule's bytes).
Crossover default_crossover(size_t threads) {
  const size_t t = std::min(std::max<size_t>(threads, 1), kStreamHostThreads);
  return Crossover{kCpuBelowBytes, kBytesPerRow, kStreamBelowBytes * t / kStreamHostThreads};
}

Utf8Policy parse_utf8_policy(const std::string& errors) {
  if (errors == "strict") return Utf8Policy::kStrict;
  if (errors == "replace") return Utf8Policy::kReplace;
  throw ArgumentError("errors must be 'strict' or 'replace', got '" + errors + "'");
}

Algorithm parse_algorithm(const std::string& name) {
  if (name == "per_word") return Algorithm::kPerWord;
  if (name == "blockbpe") return Algorithm::kBlockBpe;
  if (name == "blockbpe_optimized") return Algorithm::kBlockBpeOptimized;
  throw ArgumentError(
      "algorithm must be one of ('per_word', 'blockbpe', 'blockbpe_optimized'), got '" + name +
      "'");
}

namespace {

Device resolve_device(const std::string& device) {
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw ArgumentError("device must be 'auto', 'cpu' or 'cuda', got '" + device + "'");
  if (device == "cpu") return Device::kCpu;
  std::string why;
  const bool ok = cuda_available(&why);
  if (device == "cuda" && !ok) throw CudaUnavailable("device='cuda' is not available: " + why);
  return ok ? Device::kCuda : Device::kCpu;
}

template <typename T>
std::vector<TextInput> views(const char* data, size_t size, const T* b, const Bounds& bounds) {
  const size_t n = bounds.spans ? bounds.length : bounds.length - 1;
  const auto in_range = [size](int64_t v) { return v >= 0 && uint64_t(v) <= size; };
  std::vector<TextInput> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t start = bounds.spans ? int64_t(b[2 * i]) : int64_t(b[i]);
    const int64_t end = bounds.spans ? int64_t(b[2 * i + 1]) : int64_t(b[i + 1]);
    if (!in_range(start) || !in_range(end) || end < start) {
      const std::string what =
          bounds.spans ? "span " + std::to_string(i) + " ["
                       : "offsets[" + std::to_string(i) + ":" + std::to_string(i + 2) + "] [";
      throw ArgumentError(what + std::to_string(start) + ", " + std::to_string(end) +
                          ") is not a range inside the buffer of " + std::to_string(size) +
                          " bytes (offsets must be non-decreasing, from 0 to its size)");
    }
    out.push_back(TextInput{std::string_view(data + start, size_t(end - start)), false});
  }
  return out;
}

size_t total_bytes(const std::vector<TextInput>& texts) {
  size_t bytes = 0;
  for (const TextInput& t : texts) bytes += t.bytes.size();
  return bytes;
}

}  // namespace

std::vector<TextInput> buffer_views(const char* data, size_t size, const Bounds& bounds) {
  if (!bounds.spans && bounds.length < 1)
    throw ArgumentError("offsets must have shape (n + 1,) or (n, 2), got (0,)");
  if (bounds.wide) return views(data, size, static_cast<const int64_t*>(bounds.data), bounds);
  return views(data, size, static_cast<const int32_t*>(bounds.data), bounds);
}

Tokenizer::Tokenizer(std::shared_ptr<const Vocab> vocab, const TokenizerOptions& options)
    : vocab_(vocab), encoder_(vocab), algorithm_(parse_algorithm(options.algorithm)) {
  if (options.gpu.copy_threads < 0)
    throw ArgumentError("copy_threads must be >= 0 (0: automatic), got " +
                        std::to_string(options.gpu.copy_threads));
  const bool automatic = options.device == "auto";
  store(options.crossover_given ? options.crossover
        : automatic             ? default_crossover()
                                : Crossover{});
  automatic_ = automatic;
  if (resolve_device(options.device) == Device::kCuda)
    gpu_ = std::make_unique<GpuEncoder>(vocab, options.gpu, options.gpu_tuning);
  if (gpu_ && automatic && !options.crossover_given) {
    const Crossover c = crossover();
    learner_ = std::make_unique<RouteLearner>(c.cpu_below_bytes);
    learning_.store(true, std::memory_order_relaxed);
  }
}

// ProcessStamp::here() is a system call: asked only of calls bound for the GPU, whose fixed
// cost is ~50 us, never of the CPU path's microsecond calls.
const char* Tokenizer::device() const {
  return gpu_ && (!automatic_ || made_.here()) ? "cuda" : "cpu";
}

bool Tokenizer::routes_to_gpu(size_t bytes, size_t rows) const {
  if (!gpu_ || crossover().use_cpu(bytes, rows)) return false;
  return !automatic_ || made_.here();
}

// One call's path: the GPU encoder or null (the CPU path). A call the stream rule may keep on
// the CPU (cpu_below_bytes <= its weight < stream_below_bytes) counts itself in while it runs
// and stamps its end: it takes the CPU path when it is the only such call running (the pool
// runs one call at a time; a second would run on its own thread, several times slower than
// the GPU) and it starts within the pool's spin window of the last one's end. Calls outside
// that range pay nothing here; inside it, two atomics and two clock reads (~0.1 us) on calls of
// 20 us or more. A call told to use fewer CPU threads than the hardware has (num_threads) keeps
// the rule by size: the stream rule was measured with every core.
//
// With learned routes (route_learner.h) the range counted also covers the learner's band, and
// a call alone in it asks the learner and is timed, unless it is in a stream and the CPU path
// would cut it across its awake pool (Encoder::stream_split_bytes): those keep the stream rule.
// A call the CPU path runs on the caller costs the same in a stream or not, and the stream rule
// sent such batch calls (8-16 KB) to the CPU at 1.3-1.8x the GPU's time (H200, 2026-11-29,
// bench_crossover.py's stream step). Learning split calls too was tried (four runs): its CPU
// timings of them in that bench ran 2-4x the CPU path's steady time (why is open: right after a
// GPU call the third CPU call is at steady speed, bench/bench_after_gpu.py), buckets turned to
// the GPU where the CPU was faster, and one text in a stream went to 1.06-1.74x the faster path
// against the rule's 1.05-1.13x. Cost: about four atomics and three clock reads, on calls of
// ~5 KB (10 us) and more.
class Tokenizer::Route {
 public:
  Route(const Tokenizer& t, size_t bytes, size_t rows, bool batch, int num_threads = 0)
      : gpu_(t.gpu_for(bytes, rows)) {
    if (!t.gpu_ || (num_threads > 0 && size_t(num_threads) < hardware_threads())) return;
    const Crossover c = t.crossover();
    RouteLearner* learner =
        t.learning_.load(std::memory_order_relaxed) ? t.learner_.get() : nullptr;
    const size_t w = c.weight(bytes, rows);
    const size_t lo = learner ? std::min(learner->low(), c.cpu_below_bytes) : c.cpu_below_bytes;
    const size_t hi =
        learner ? std::max(learner->high(), c.stream_below_bytes) : c.stream_below_bytes;
    if (w < lo || w >= hi) return;
    counted_ = &t;
    if (t.stream_calls_.fetch_add(1, std::memory_order_acq_rel) != 0) return;  // not alone
    const bool stream =
        t.encoder_.within_spin_window(t.stream_end_ns_.load(std::memory_order_relaxed));
    if (stream && (!learner || bytes >= Encoder::stream_split_bytes(!batch))) {
      if (w < c.stream_below_bytes) gpu_ = nullptr;  // a stream: the stream rule
    } else if (learner) {
      learn(t, *learner, c, w, batch);
    }
  }
  ~Route() {
    if (!counted_) return;
    const int64_t end = Encoder::now_ns();
    if (learner_ && record_ && std::uncaught_exceptions() == uncaught_)
      learner_->record(kind_, choice_, end - start_ns_);
    counted_->stream_end_ns_.store(end, std::memory_order_relaxed);
    counted_->stream_calls_.fetch_sub(1, std::memory_order_acq_rel);
  }
  Route(const Route&) = delete;
  Route& operator=(const Route&) = delete;
  GpuEncoder* gpu() const { return gpu_; }

 private:
  void learn(const Tokenizer& t, RouteLearner& learner, const Crossover& c, size_t w, bool batch) {
    kind_ = batch ? RouteLearner::kBatch : RouteLearner::kOne;
    choice_ = learner.choose(kind_, w, w >= c.cpu_below_bytes);
    // A forked child has no GPU (routes_to_gpu): its calls run on the CPU, untimed. gpu_ set by
    // the rule already passed that check (a system call), so it is asked only when not.
    gpu_ = choice_.gpu && (gpu_ || t.made_.here()) ? t.gpu_.get() : nullptr;
    record_ = (gpu_ != nullptr) == choice_.gpu;
    learner_ = &learner;
    uncaught_ = std::uncaught_exceptions();
    start_ns_ = Encoder::now_ns();
  }

  GpuEncoder* gpu_;
  const Tokenizer* counted_ = nullptr;
  RouteLearner* learner_ = nullptr;  // set for a call the learner routed
  RouteLearner::Kind kind_ = RouteLearner::kOne;
  RouteLearner::Choice choice_;
  bool record_ = false;
  int uncaught_ = 0;
  int64_t start_ns_ = 0;
};

// One fork check a GPU call: routes_to_gpu asks it of a device "auto" tokenizer (false in a
// forked child: the CPU path), and here of a device "cuda" one.
GpuEncoder* Tokenizer::gpu_for(size_t bytes, size_t rows) const {
  if (!routes_to_gpu(bytes, rows)) return nullptr;
  if (automatic_ || made_.here()) return gpu_.get();
  throw CudaUnavailable(
      "device='cuda': this process was forked from the one that built the tokenizer, and "
      "CUDA does not survive fork(); build the tokenizer in this process, start workers with "
      "the 'spawn' method, or use device='auto' (which runs a forked child's calls on the "
      "CPU path) or device='cpu'");
}

Crossover Tokenizer::crossover() const {
  return Crossover{cpu_below_bytes_.load(std::memory_order_relaxed),
                   bytes_per_row_.load(std::memory_order_relaxed),
                   stream_below_bytes_.load(std::memory_order_relaxed)};
}

void Tokenizer::set_crossover(Crossover c) {
  need_gpu("set_cpu_below_bytes");
  learning_.store(false, std::memory_order_relaxed);
  store(c);
}

std::vector<RouteLearner::BucketStats> Tokenizer::learned_routes() const {
  if (!learner_ || !learning_.load(std::memory_order_relaxed)) return {};
  const Crossover c = crossover();
  return learner_->stats(c.cpu_below_bytes);
}

void Tokenizer::store(Crossover c) {
  cpu_below_bytes_.store(c.cpu_below_bytes, std::memory_order_relaxed);
  bytes_per_row_.store(c.bytes_per_row, std::memory_order_relaxed);
  stream_below_bytes_.store(c.stream_below_bytes, std::memory_order_relaxed);
}

EncodeResult Tokenizer::encode(const std::vector<TextInput>& texts, const EncodeArgs& args) const {
  const Route route(*this, total_bytes(texts), texts.size(), true, args.num_threads);
  if (GpuEncoder* gpu = route.gpu())
    return encoder_.encode_batch_gpu(*gpu, algorithm_, texts, args.policy, args.utf8);
  return encoder_.encode_batch(texts, args.policy, args.utf8, args.num_threads);
}

PackedResult Tokenizer::encode_packed(const std::vector<TextInput>& texts, const EncodeArgs& args,
                                      std::optional<int64_t> separator) const {
  if (separator && (*separator < 0 || *separator > 0xFFFF))
    throw ArgumentError("separator must be in 0..65535 (a uint16 id), got " +
                        std::to_string(*separator));
  const Route route(*this, total_bytes(texts), texts.size(), true, args.num_threads);
  return encoder_.encode_batch_packed(route.gpu(), algorithm_, texts, args.policy, args.utf8,
                                      separator ? int32_t(*separator) : -1, args.num_threads);
}

void Tokenizer::encode_one(const TextInput& text, const EncodeArgs& args, IdVector& out) const {
  out.clear();
  const Route route(*this, text.bytes.size(), 1, false);
  if (GpuEncoder* gpu = route.gpu())
    out = encoder_.encode_batch_gpu(*gpu, algorithm_, {text}, args.policy, args.utf8).ids;
  else
    encoder_.encode_one(text, args.policy, args.utf8, out);
}

std::string Tokenizer::decode_bytes(const int64_t* ids, size_t n) const {
  std::string out;
  gputok::decode_bytes(*vocab_, ids, n, out);
  return out;
}

GpuEncoder& Tokenizer::need_gpu(const char* what) const {
  if (!gpu_) throw ArgumentError(std::string(what) + " needs device='cuda'");
  return *gpu_;
}

void Tokenizer::set_pool_limit(size_t bytes) { need_gpu("set_pool_limit").set_pool_limit(bytes); }

void Tokenizer::set_gpu_pretokenize(bool on) {
  need_gpu("gpu_pretokenize").set_gpu_pretokenize(on);
}

GpuCounters Tokenizer::gpu_counters() const { return gpu_ ? gpu_->counters() : GpuCounters{}; }

}  // namespace gputok
