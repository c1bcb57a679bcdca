// The encoder: special tokens, UTF-8 policy, the pretoken cache, and the multi-threaded
// batch loop over pretokenize + merge. On device="cuda" the ordinary segments go to the
// GpuEncoder in one call and the specials are stitched back in here.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gpu_encoder.h"
#include "piece_cache.h"
#include "thread_pool.h"
#include "vocab.h"

namespace gputok {

// Invalid UTF-8 under errors="strict". Bindings map it to ValueError.
class Utf8Error : public std::runtime_error {
 public:
  Utf8Error(size_t text_index, size_t offset, uint8_t byte);
  size_t text_index, offset;
  uint8_t byte;
};

// A disallowed special token found in the text. Bindings map it to ValueError.
class DisallowedSpecialError : public std::runtime_error {
 public:
  DisallowedSpecialError(size_t text_index, const std::string& token);
  size_t text_index;
  std::string token;
};

// A token id that does not fit the uint16 output of encode_batch_packed. Bindings map it to
// OverflowError.
class IdRangeError : public std::runtime_error {
 public:
  IdRangeError(size_t text_index, int64_t id);
  size_t text_index;
  int64_t id;
};

struct TextInput {
  std::string_view bytes;
  bool known_valid;  // true for text that came from a Python str
};

struct SpecialPolicy {
  std::vector<int32_t> allowed;     // ids encoded as specials when they appear
  std::vector<int32_t> disallowed;  // ids whose text raises when it appears
};

enum class Utf8Policy { kStrict, kReplace };

struct EncodeResult {
  IdVector ids;
  std::vector<int64_t> offsets;  // texts + 1 entries
  float kernel_ms = 0.0f;        // device time on the GPU path, 0 on the CPU
};

// The corpus shard format: every text's ids as uint16, `separator` after each one.
struct PackedResult {
  U16Vector ids;
  std::vector<int64_t> ends;  // one per text: where it (and its separator) ends in ids
  float kernel_ms = 0.0f;
};

// 64 MiB: 734,003 pieces (32 MiB of slots at 70% load, piece_cache.h) plus a 32 MiB arena
// for their long bytes; the bench corpus (85 MB) has 570,232 distinct pieces, 544,924 of
// them not tokens.
constexpr size_t kDefaultPieceCacheBytes = size_t(64) << 20;

class Encoder {
 public:
  explicit Encoder(std::shared_ptr<const Vocab> vocab);
  ~Encoder();

  const Vocab& vocab() const { return *vocab_; }

  // The shared pretoken cache (piece_cache.h): a new one of `bytes` (a hard cap on its
  // memory), or none with 0. Calls already running finish with the cache they started with.
  void set_piece_cache_bytes(size_t bytes);
  PieceCacheStats piece_cache_stats() const;
  // How long the CPU pool's idle threads watch for the next call before they sleep
  // (thread_pool.h; std::invalid_argument above kMaxSpinUs). Waits for a running call.
  void set_cpu_spin_us(unsigned us);
  unsigned cpu_spin_us() const;
  // The clock of the stamps below (steady_clock, nanoseconds), and whether a call starting now
  // is within the spin window of `stamp_ns` (false with no window): the pool's workers, if
  // they last worked then, are still awake. The split of a mid-size call (CallSplit) and the
  // tokenizer's stream rule both ask it.
  static int64_t now_ns();
  bool within_spin_window(int64_t stamp_ns) const;
  // The size from which a call of encode_one (one_text) or encode_batch on every hardware
  // thread is cut across the pool in a stream (CallSplit); smaller ones run on the caller.
  static size_t stream_split_bytes(bool one_text);

  // CPU path. num_threads <= 0 means all hardware threads.
  EncodeResult encode_batch(const std::vector<TextInput>& texts, const SpecialPolicy& policy,
                            Utf8Policy utf8, int num_threads) const;

  // GPU path: the same contract, merges (and by default pretokenization) on the device.
  EncodeResult encode_batch_gpu(GpuEncoder& gpu, Algorithm algorithm,
                                const std::vector<TextInput>& texts, const SpecialPolicy& policy,
                                Utf8Policy utf8) const;

  // encode_batch (gpu null) or encode_batch_gpu, packed as uint16 with `separator` (< 0:
  // none) after every text. On the GPU with no allowed specials the ids are narrowed and
  // spaced while they are copied out of pinned memory (GpuOutput); otherwise the int32
  // result is packed (pack_uint16). Throws IdRangeError for an id outside [0, 65535].
  PackedResult encode_batch_packed(GpuEncoder* gpu, Algorithm algorithm,
                                   const std::vector<TextInput>& texts, const SpecialPolicy& policy,
                                   Utf8Policy utf8, int32_t separator, int num_threads) const;

  // One text: the latency path, on the calling thread with no scheduling structures, or cut
  // into parts across the cores when it is long (CallSplit, encoder_pool.cpp).
  void encode_one(const TextInput& text, const SpecialPolicy& policy, Utf8Policy utf8,
                  IdVector& out) const;

 private:
  static constexpr size_t kChunkBytes = 64 * 1024;  // long texts split here (and for the GPU)
  static constexpr size_t kItemBytes = 32 * 1024;   // work per scheduling item
  struct Unit;
  struct Prepared;
  const std::string* special_text(int32_t id) const;  // a special token's text, or null
  static size_t invalid_at(const TextInput& text, size_t ti, Utf8Policy utf8);
  bool encode_plain(const TextInput& text, const SpecialPolicy& policy, Utf8Policy utf8,
                    IdVector& out) const;
  void prepare(const std::vector<TextInput>& texts, const SpecialPolicy& policy, Utf8Policy utf8,
               Prepared& p) const;
  // The prepared units of n_texts texts on up to `threads` threads, in items of about
  // item_bytes; the ids never depend on the thread count or the item size.
  EncodeResult encode_units(const Prepared& p, size_t n_texts, size_t threads,
                            size_t item_bytes) const;
  EncodeResult encode_units_inline(const Prepared& p, size_t n_texts, PieceCache* cache) const;
  // fn(i) for i in [0, n) on the shared pool (one caller at a time), or inline.
  void run_parallel(size_t n, size_t threads, const std::function<void(size_t)>& fn) const;
  // How a call of `bytes` bytes on `threads` threads runs (encoder_pool.cpp): `part` > 0, cut
  // into parts of about that many bytes across the pool; 0, on the calling thread. A long
  // call always splits; a mid-size one only when the pool is awake (its last job, or the last
  // mid-size call, ended within the spin window: a stream of calls), and stamps its own end
  // when this goes out of scope.
  struct CallSplit {
    // one_text: a call of encode_one (a batch call's mid-size range starts higher).
    CallSplit(const Encoder* e, size_t bytes, size_t threads, bool one_text);
    ~CallSplit();
    const Encoder* enc = nullptr;  // set for a mid-size call
    size_t part = 0;
  };
  std::shared_ptr<PieceCache> cache() const;  // this call's snapshot (null: disabled)
  void seed(PieceCache& cache) const;
  void encode_segment(PieceCache* cache, std::string_view text, IdVector& out) const;

  std::shared_ptr<const Vocab> vocab_;
  std::shared_ptr<PieceCache> cache_;  // read and replaced with std::atomic_load/store
  mutable PoolPtr pool_;
  mutable std::mutex pool_mu_;
  std::atomic<unsigned> spin_us_{kDefaultSpinUs};  // the pool's; written under pool_mu_
  // steady-clock ns: the pool's last job's end, and the last mid-size one-text call's
  mutable std::atomic<int64_t> pool_job_end_ns_{INT64_MIN / 2}, one_text_end_ns_{INT64_MIN / 2};
};

}  // namespace gputok
