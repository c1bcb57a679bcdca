// The batch encoder. Work flows as: texts -> units (ordinary byte ranges, cut at safe
// split points into <= kChunkBytes, and special tokens) -> items (runs of units of about
// kItemBytes) -> threads. Items write their own id buffers; one final pass concatenates
// them and derives each text's offsets, so the result never depends on the thread count.
// On one thread the units write the result directly.
//
// Performance notes. On the bench corpus 30% of pieces are one byte, 43% whole tokens, the
// rest pieces that merge_piece splits; every piece of up to 128 bytes is looked up in the
// shared pretoken cache first, whose slots hold bytes and whole tokens too. Callgrind (2-core
// dev machine, bench/results/2026-11-25-cpu-path-2.md): ~151 instructions a warm piece
// (scanning 46). A warm batch pass waits on memory more than it executes: one random cache
// line a piece. What moved it (2-core dev VM, 2026-11-27, one thread, CPU time, best of 4-6
// alternated runs; bench/results/2026-11-27-cpu-path-3.md): huge pages for the tables and
// no store-forwarding stall on the key, then one probe a piece (tokens in the cache) and
// 32-byte slots at 70% load (734K entries in 64 MiB, was 256K): warm 10 MB of the bench
// corpus 118 -> 177 MB/s, the whole 85 MB 60 -> 159, 10 MB of stdlib code 149 -> 215. Then
// one-byte pieces in the cache and a pipelined block loop: encoder_segment.cpp.
#include "encoder.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "huge_pages.h"
#include "narrow.h"
#include "piece_cache.h"
#include "pretokenize.h"

namespace gputok {

namespace {

// Output id buffers from this size on are advised onto transparent huge pages before their
// first write (huge_pages.h): measured below in the performance note of encode_units_inline.
constexpr size_t kOutputHugeBytes = size_t(8) << 20;

}  // namespace

// ---------------------------------------------------------------------------
struct Encoder::Unit {
  uint32_t text;
  int32_t special;  // -1 for ordinary text
  std::string_view bytes;
};

struct Encoder::Prepared {
  // Repaired texts (errors="replace"); unique_ptr keeps views valid as the vector grows.
  std::vector<std::unique_ptr<std::string>> storage;
  std::vector<Unit> units;
  size_t chunk_bytes = kChunkBytes;  // ordinary text is cut into units of about this
};

Encoder::Encoder(std::shared_ptr<const Vocab> vocab) : vocab_(std::move(vocab)) {
  set_piece_cache_bytes(kDefaultPieceCacheBytes);
}
Encoder::~Encoder() = default;

std::shared_ptr<PieceCache> Encoder::cache() const { return std::atomic_load(&cache_); }

void Encoder::set_piece_cache_bytes(size_t bytes) {
  // Ids of a vocabulary of at most 65,536 fit the cache's 16-bit inline form.
  const bool narrow = vocab_->n_vocab() <= 65536;
  std::shared_ptr<PieceCache> cache = bytes ? std::make_shared<PieceCache>(bytes, narrow) : nullptr;
  if (cache) seed(*cache);
  std::atomic_store(&cache_, std::move(cache));
}

// Every token goes into a new cache as its own piece, with the id a miss would find for it (the
// token index's), so a first pass finds whole tokens in one probe, as a warm one does. Only
// where a whole piece that is a token is that token (whole_piece_lookup: tiktoken's rule), only
// while the tokens fill at most half of what the cache holds, and only into slots faulted in
// at build (huge_alloc): 50K inserts into a larger, lazy cache would touch most of its pages.
// Cost at build: a new 64 MiB cache took 4.9 ms against 2.8 unseeded (dev VM, best of 7; 10.8
// without the prefetches below). Measured (bench/bench_encoder_ab.py, one
// thread, 10 MB, 6 alternated rounds, 2-core dev VM, 2026-11-27): first pass on the bench
// corpus 74.9 -> 80.4 MB/s, code 176.4 -> 186.6 (medians); warm passes the same.
void Encoder::seed(PieceCache& cache) const {
  const Vocab& voc = *vocab_;
  const PieceCacheStats st = cache.stats();
  if (!voc.whole_piece_lookup() || 2 * voc.tokens().size() > st.max_entries ||
      st.capacity_bytes - st.arena_bytes > kPopulateMaxBytes)
    return;
  // Keys and hashes first, then the inserts with each slot prefetched 16 tokens ahead: the
  // slots are random lines of tens of MiB.
  struct Entry {
    PieceKey key;
    uint64_t h;
    const uint8_t* p;
  };
  std::vector<Entry> entries;
  entries.reserve(voc.tokens().size());
  for (const std::string& t : voc.tokens()) {
    if (t.empty() || t.size() > PieceCache::kMaxPiece) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(t.data());
    const PieceKey key = make_key(p, t.size(), t.size());
    entries.push_back(Entry{key, key_hash(key), p});
  }
  constexpr size_t kAhead = 16;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i + kAhead < entries.size()) {
      cache.prefetch(entries[i + kAhead].h);
      voc.prefetch_token(entries[i + kAhead].h, entries[i + kAhead].key.len);
    }
    const Entry& e = entries[i];
    const int32_t id = voc.find_token(e.key, e.p, e.h);
    if (id >= 0) cache.insert(e.key, e.p, e.h, &id, 1);
  }
}

PieceCacheStats Encoder::piece_cache_stats() const {
  const auto c = cache();
  return c ? c->stats() : PieceCacheStats{};
}

// The offset of a text's first invalid UTF-8 byte (its size where there is none, or where the
// text is known valid); under Utf8Policy::kStrict an invalid byte throws Utf8Error naming text
// `ti`. prepare() repairs what is returned; encode_plain() leaves it to prepare().
size_t Encoder::invalid_at(const TextInput& text, size_t ti, Utf8Policy utf8) {
  const std::string_view bytes = text.bytes;
  if (text.known_valid) return bytes.size();
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t bad = utf8_first_invalid(data, bytes.size());
  if (bad < bytes.size() && utf8 == Utf8Policy::kStrict) throw Utf8Error(ti, bad, data[bad]);
  return bad;
}

const std::string* Encoder::special_text(int32_t id) const {
  for (const auto& s : vocab_->specials())
    if (s.id == id) return &s.text;
  return nullptr;
}

void Encoder::prepare(const std::vector<TextInput>& texts, const SpecialPolicy& policy,
                      Utf8Policy utf8, Prepared& p) const {
  const auto& specials = vocab_->specials();
  std::vector<const std::string*> allowed, disallowed;
  for (int32_t id : policy.allowed)
    if (const auto* t = special_text(id)) allowed.push_back(t);
  for (int32_t id : policy.disallowed)
    if (const auto* t = special_text(id)) disallowed.push_back(t);

  p.units.reserve(texts.size());
  for (size_t ti = 0; ti < texts.size(); ++ti) {
    std::string_view text = texts[ti].bytes;
    if (invalid_at(texts[ti], ti, utf8) < text.size()) {
      const auto* data = reinterpret_cast<const uint8_t*>(text.data());
      p.storage.push_back(std::make_unique<std::string>(utf8_replace_invalid(data, text.size())));
      text = *p.storage.back();
    }
    for (const std::string* d : disallowed)
      if (text.find(*d) != std::string_view::npos) throw DisallowedSpecialError(ti, *d);

    auto emit_ordinary = [&](std::string_view seg) {
      const auto* data = reinterpret_cast<const uint8_t*>(seg.data());
      size_t start = 0;
      while (seg.size() - start > p.chunk_bytes) {
        size_t cut = start + p.chunk_bytes;
        while (cut < seg.size() && !is_safe_split(data, cut)) ++cut;
        if (cut >= seg.size()) break;
        p.units.push_back(Unit{uint32_t(ti), -1, seg.substr(start, cut - start)});
        start = cut;
      }
      if (start < seg.size()) p.units.push_back(Unit{uint32_t(ti), -1, seg.substr(start)});
    };
    size_t start = 0;
    while (!allowed.empty()) {
      size_t best = std::string_view::npos;
      const std::string* best_tok = nullptr;
      for (const std::string* a : allowed) {
        const size_t at = text.find(*a, start);
        if (at < best) {
          best = at;
          best_tok = a;
        }
      }
      if (best == std::string_view::npos) break;
      if (best > start) emit_ordinary(text.substr(start, best - start));
      int32_t id = -1;
      for (const auto& s : specials)
        if (&s.text == best_tok) id = s.id;
      p.units.push_back(Unit{uint32_t(ti), id, std::string_view()});
      start = best + best_tok->size();
    }
    if (start < text.size()) emit_ordinary(text.substr(start));
  }
}

void Encoder::encode_one(const TextInput& text, const SpecialPolicy& policy, Utf8Policy utf8,
                         IdVector& out) const {
  const size_t threads = hardware_threads();
  const size_t size = text.bytes.size();
  Prepared p;
  const CallSplit split(this, size, threads, true);
  if (split.part) {
    p.chunk_bytes = split.part;
    prepare({text}, policy, utf8, p);
    out = std::move(encode_units(p, 1, threads, split.part).ids);
    return;
  }
  if (encode_plain(text, policy, utf8, out)) return;
  prepare({text}, policy, utf8, p);
  // encode_segment grows `out` by a unit's bytes (<= kChunkBytes) and trims it back: room
  // for about two ids a byte past that, so a typical text never reallocates.
  out.reserve(size / 2 + std::min(size, kChunkBytes) + 4);
  advise_huge_pages(out, kOutputHugeBytes);
  const auto cache_ref = cache();
  for (const Unit& u : p.units) {
    if (u.special >= 0)
      out.push_back(u.special);
    else
      encode_segment(cache_ref.get(), u.bytes, out);
  }
}

// One text that prepare() would make one ordinary unit (no special token allowed, at most
// kChunkBytes, valid UTF-8), encoded with the same checks in the same order and no allocation
// of its own: through prepare(), a 64-token call allocated two or three times (the text's
// vector, its units, the disallowed tokens' texts), ~2% of its time (perf, dev VM,
// 2026-11-27). False where prepare() must run instead: a special token allowed, a longer
// text, or UTF-8 to repair.
bool Encoder::encode_plain(const TextInput& text, const SpecialPolicy& policy, Utf8Policy utf8,
                           IdVector& out) const {
  const std::string_view bytes = text.bytes;
  if (!policy.allowed.empty() || bytes.size() > kChunkBytes) return false;
  if (invalid_at(text, 0, utf8) < bytes.size()) return false;
  for (int32_t id : policy.disallowed)
    if (const std::string* d = special_text(id))
      if (bytes.find(*d) != std::string_view::npos) throw DisallowedSpecialError(0, *d);
  if (bytes.empty()) return true;
  out.reserve(out.size() + bytes.size() / 2 + bytes.size() + 4);
  const auto cache_ref = cache();
  encode_segment(cache_ref.get(), bytes, out);
  return true;
}

EncodeResult Encoder::encode_batch(const std::vector<TextInput>& texts, const SpecialPolicy& policy,
                                   Utf8Policy utf8, int num_threads) const {
  const size_t threads = resolve_threads(num_threads);  // throws before any work
  Prepared p;
  // A call of fewer than about two items per thread is cut as one text is (encode_one), so
  // that one text of 16-64 KB, or a few, no longer runs on one thread: H200 host, 2026-11-29,
  // `encode_batch_flat([text])` of 39 KB 166 us on one thread against 55 us split (the same
  // text through encode_to_numpy).
  size_t bytes = 0;
  for (const TextInput& t : texts) bytes += t.bytes.size();
  const bool few_items = bytes < 2 * threads * kItemBytes;
  const CallSplit split(this, few_items ? bytes : 0, threads, false);  // 0 bytes: never split
  if (split.part) p.chunk_bytes = split.part;
  prepare(texts, policy, utf8, p);
  return encode_units(p, texts.size(), threads, split.part ? split.part : kItemBytes);
}

// One thread: every unit straight into the result, with no per-item buffers to copy. The
// result's pages are fresh: on 4 KiB pages their first writes took one fault each (perf on
// the 2-core dev VM: clear_page and page faults 5-19% of the driver's run). Advised onto
// huge pages (kOutputHugeBytes and up), one thread, warm, 10 MB, CPU time, alternated with
// the tree before (2026-11-27, bench/bench_encoder_ab.py, dev VM under load): code 231 ->
// 276 MB/s, bench corpus 196 -> 223; cold 150 -> 167 and 65 -> 70.
EncodeResult Encoder::encode_units_inline(const Prepared& p, size_t n_texts,
                                          PieceCache* cache) const {
  EncodeResult r;
  r.offsets.assign(n_texts + 1, 0);
  size_t bytes = 0;
  for (const Unit& unit : p.units) bytes += unit.bytes.size();
  r.ids.reserve(bytes / 2 + std::min(bytes, kChunkBytes) + 8);  // as in encode_one
  advise_huge_pages(r.ids, kOutputHugeBytes);
  for (const Unit& unit : p.units) {
    if (unit.special >= 0)
      r.ids.push_back(unit.special);
    else
      encode_segment(cache, unit.bytes, r.ids);
    r.offsets[unit.text + 1] = int64_t(r.ids.size());
  }
  for (size_t t = 0; t < n_texts; ++t)  // texts with no units end where the one before did
    if (r.offsets[t + 1] < r.offsets[t]) r.offsets[t + 1] = r.offsets[t];
  return r;
}

EncodeResult Encoder::encode_units(const Prepared& p, size_t n_texts, size_t threads,
                                   size_t item_bytes) const {
  // Items: runs of consecutive units of about kItemBytes.
  std::vector<size_t> item_start{0};
  size_t acc = 0;
  for (size_t u = 0; u < p.units.size(); ++u) {
    acc += p.units[u].bytes.size() + 1;
    if (acc >= item_bytes && u + 1 < p.units.size()) {
      item_start.push_back(u + 1);
      acc = 0;
    }
  }
  item_start.push_back(p.units.size());
  const size_t n_items = item_start.size() - 1;

  struct ItemOut {
    IdVector ids;
    std::vector<size_t> unit_end;
  };
  std::vector<ItemOut> outs(n_items);
  std::exception_ptr error;
  std::mutex error_mu;
  const auto cache_ref = cache();
  auto run_item = [&](size_t it) {
    try {
      ItemOut& o = outs[it];
      size_t bytes = 0;
      for (size_t u = item_start[it]; u < item_start[it + 1]; ++u) bytes += p.units[u].bytes.size();
      o.ids.reserve(bytes + 8);  // encode_segment grows it by each unit's bytes: no realloc
      for (size_t u = item_start[it]; u < item_start[it + 1]; ++u) {
        const Unit& unit = p.units[u];
        if (unit.special >= 0)
          o.ids.push_back(unit.special);
        else
          encode_segment(cache_ref.get(), unit.bytes, o.ids);
        o.unit_end.push_back(o.ids.size());
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  };

  if (threads <= 1 || n_items <= 1) return encode_units_inline(p, n_texts, cache_ref.get());
  run_parallel(n_items, threads, run_item);
  if (error) std::rethrow_exception(error);

  // Concatenate: offsets first (cheap, sequential), then the copies in parallel so the
  // output's fresh pages are faulted by several threads.
  EncodeResult r;
  std::vector<size_t> base(n_items + 1, 0);
  for (size_t it = 0; it < n_items; ++it) base[it + 1] = base[it] + outs[it].ids.size();
  r.ids.resize(base[n_items]);
  advise_huge_pages(r.ids, kOutputHugeBytes);
  r.offsets.assign(n_texts + 1, 0);
  for (size_t it = 0; it < n_items; ++it) {
    const ItemOut& o = outs[it];
    for (size_t k = 0; k < o.unit_end.size(); ++k)
      r.offsets[p.units[item_start[it] + k].text + 1] = int64_t(base[it] + o.unit_end[k]);
  }
  run_parallel(n_items, threads, [&](size_t it) {
    const auto& ids = outs[it].ids;
    if (!ids.empty()) std::memcpy(r.ids.data() + base[it], ids.data(), ids.size() * 4);
  });
  // Texts with no units (empty) end where the previous text ended.
  for (size_t t = 0; t < n_texts; ++t)
    if (r.offsets[t + 1] < r.offsets[t]) r.offsets[t + 1] = r.offsets[t];
  return r;
}

EncodeResult Encoder::encode_batch_gpu(GpuEncoder& gpu, Algorithm algorithm,
                                       const std::vector<TextInput>& texts,
                                       const SpecialPolicy& policy, Utf8Policy utf8) const {
  Prepared p;
  prepare(texts, policy, utf8, p);
  std::vector<std::string_view> segments;
  bool any_special = false;
  for (const Unit& u : p.units) {
    if (u.special >= 0)
      any_special = true;
    else
      segments.push_back(u.bytes);
  }
  IdVector ids;
  std::vector<int64_t> ends;
  EncodeResult r;
  GpuOutput out;
  out.ids32 = &ids;
  r.kernel_ms = segments.empty() ? 0.0f : gpu.encode(segments, algorithm, out, ends);
  if (!segments.empty() && ends.size() != segments.size())
    throw CudaError("GPU encoder returned " + std::to_string(ends.size()) + " segment ends for " +
                    std::to_string(segments.size()) + " segments");
  r.offsets.assign(texts.size() + 1, 0);
  if (!any_special) {
    r.ids = std::move(ids);
    for (size_t k = 0; k < p.units.size(); ++k) r.offsets[p.units[k].text + 1] = ends[k];
  } else {
    r.ids.reserve(ids.size() + p.units.size());
    size_t seg = 0;
    for (const Unit& u : p.units) {
      if (u.special >= 0) {
        r.ids.push_back(u.special);
      } else {
        const int64_t b = seg == 0 ? 0 : ends[seg - 1];
        r.ids.insert(r.ids.end(), ids.begin() + b, ids.begin() + ends[seg]);
        ++seg;
      }
      r.offsets[u.text + 1] = int64_t(r.ids.size());
    }
  }
  for (size_t t = 0; t < texts.size(); ++t)
    if (r.offsets[t + 1] < r.offsets[t]) r.offsets[t + 1] = r.offsets[t];
  return r;
}

PackedResult Encoder::encode_batch_packed(GpuEncoder* gpu, Algorithm algorithm,
                                          const std::vector<TextInput>& texts,
                                          const SpecialPolicy& policy, Utf8Policy utf8,
                                          int32_t separator, int num_threads) const {
  resolve_threads(num_threads);  // the same bound on every path, the GPU's included
  const size_t n = texts.size();
  const int64_t seps = separator >= 0 ? int64_t(n) : 0;
  size_t bytes = 0;
  for (const TextInput& t : texts) bytes += t.bytes.size();
  PackedResult r;
  r.ends.resize(n);
  // Allowed specials are stitched in between the GPU's segments (encode_batch_gpu), and the
  // CPU path's result is packed after the fact.
  if (!gpu || !policy.allowed.empty()) {
    EncodeResult e = gpu ? encode_batch_gpu(*gpu, algorithm, texts, policy, utf8)
                         : encode_batch(texts, policy, utf8, num_threads);
    r.kernel_ms = e.kernel_ms;
    r.ids.resize(e.ids.size() + size_t(seps));
    advise_huge_pages(r.ids, kOutputHugeBytes);
    const int64_t bad =
        pack_uint16(e.ids.data(), e.offsets.data(), n, separator, r.ids.data(), r.ends.data());
    if (bad >= 0) {
      const auto at = std::upper_bound(e.offsets.begin(), e.offsets.end(), bad);
      throw IdRangeError(size_t(at - e.offsets.begin()) - 1, e.ids[size_t(bad)]);
    }
    return r;
  }
  Prepared p;
  prepare(texts, policy, utf8, p);  // with no allowed specials, every unit is ordinary text
  std::vector<std::string_view> segments;
  std::vector<int64_t> shift;  // text t's ids follow the separators of texts 0..t-1
  segments.reserve(p.units.size());
  shift.reserve(p.units.size());
  for (const Unit& u : p.units) {
    segments.push_back(u.bytes);
    shift.push_back(seps ? int64_t(u.text) : 0);
  }
  r.ids.reserve(bytes + size_t(seps));  // at most one id per byte: no reallocation below
  GpuOutput out;
  out.ids16 = &r.ids;
  out.shift = shift.data();
  std::vector<int64_t> seg_ends;
  r.kernel_ms = segments.empty() ? 0.0f : gpu->encode(segments, algorithm, out, seg_ends);
  if (seg_ends.size() != segments.size())
    throw CudaError("GPU encoder returned " + std::to_string(seg_ends.size()) +
                    " segment ends for " + std::to_string(segments.size()) + " segments");
  if (out.first_bad >= 0) {
    const auto at = std::upper_bound(seg_ends.begin(), seg_ends.end(), out.first_bad);
    throw IdRangeError(p.units[size_t(at - seg_ends.begin())].text, out.bad_value);
  }
  // Each text's end in tokens (an empty text ends where the one before it did), then the
  // separators, which the copy-out left room for.
  std::vector<int64_t> tok_end(n, -1);
  for (size_t k = 0; k < p.units.size(); ++k) tok_end[p.units[k].text] = seg_ends[k];
  int64_t prev = 0;
  for (size_t t = 0; t < n; ++t) {
    if (tok_end[t] < 0) tok_end[t] = prev;
    prev = tok_end[t];
  }
  r.ids.resize(size_t(prev + seps));
  for (size_t t = 0; t < n; ++t) {
    if (seps) r.ids[size_t(tok_end[t]) + t] = uint16_t(separator);
    r.ends[t] = tok_end[t] + (seps ? int64_t(t) + 1 : 0);
  }
  return r;
}

}  // namespace gputok
