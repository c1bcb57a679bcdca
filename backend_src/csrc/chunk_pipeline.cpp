// Chunk planning, the lanes' driver and stitching (chunk_pipeline.h).
#include "chunk_pipeline.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <mutex>
#include <string>

#include "encoder.h"
#include "huge_pages.h"
#include "narrow.h"
#include "types.h"

namespace gputok {

namespace {

// fn(lo, hi) over [0, count) elements of `elem` bytes, in slices on the pool when large.
template <typename Fn>
void parallel_slices(ThreadPool* pool, size_t count, size_t elem, Fn&& fn) {
  const size_t nt = copy_threads_for(pool, count * elem);
  if (nt <= 1) {
    fn(size_t(0), count);
    return;
  }
  pool->parallel_for(nt, nt, [&](size_t t) { fn(count * t / nt, count * (t + 1) / nt); });
}

// Makes room for `size` elements, keeping the first `keep`. A vector that outgrows its
// capacity moves its elements on one thread into fresh pages: for the ids of a 64 MB chunk
// (112 MB) that is tens of ms, the cliff that large calls had. Here the move is spread over
// the pool and the capacity at least doubles.
// With `huge`, a block of 32 MB or more is advised to use transparent huge pages before any
// page of it is touched: its first writes then fault once per 2 MiB instead of once per
// 4 KiB (a 1 GB call's 1.8 GB of ids: 900 faults instead of 460,000, taken by the copy
// threads at once).
template <typename Vec>
void grow(ThreadPool* pool, Vec& v, size_t size, size_t keep, bool huge) {
  if (size <= v.capacity()) return;
  Vec fresh;
  fresh.reserve(std::max(size, v.capacity() * 2));
  using T = typename Vec::value_type;
  if (huge) advise_huge_pages(fresh, size_t(32) << 20);
  fresh.resize(keep);  // UninitAllocator: no writes
  parallel_slices(pool, keep, sizeof(T), [&](size_t lo, size_t hi) {
    std::memcpy(fresh.data() + lo, v.data() + lo, (hi - lo) * sizeof(T));
  });
  v.swap(fresh);
}

// Bytes of the first unit that could end a chunk starting at `pos`: the last safe split at
// or before pos + chunk, else the first after it, else the segment's end.
size_t cut_at(const uint8_t* t, size_t len, size_t pos, size_t chunk) {
  for (size_t i = pos + chunk; i > pos; --i)
    if (is_safe_split(t, i)) return i;
  for (size_t i = pos + chunk + 1; i < len; ++i)
    if (is_safe_split(t, i)) return i;
  return len;
}

}  // namespace

// One thread per 256 KB, none below 1 MB; at most 8 below 16 MB (a corpus worker's 4.5 MB
// calls ran the same with 1 and 8) and all of the pool above. Large calls (H100,
// 2026-11-25, bench/bench_envelope.py): 16 threads instead of 8 took a 1 GB call from
// 4.1-4.8 to 5.0-5.8 GB/s; the host copies (staging, copy-out) are its bound.
size_t copy_threads_for(const ThreadPool* pool, size_t bytes) {
  if (!pool || bytes < (size_t(1) << 20)) return 1;
  const size_t cap = bytes >= (size_t(16) << 20) ? pool->size() : std::min<size_t>(pool->size(), 8);
  return std::min(cap, (bytes >> 18) + 1);
}

size_t ChunkPlan::chunk_bytes(size_t k) const {
  size_t b = 0;
  for (size_t u = first[k]; u < first[k + 1]; ++u) b += units[u].end - units[u].begin;
  return b;
}

ChunkPlan plan_chunks(const std::vector<std::string_view>& segments, size_t chunk_bytes) {
  ChunkPlan p;
  chunk_bytes = std::max<size_t>(chunk_bytes, 1);
  p.units.reserve(segments.size());
  for (size_t s = 0; s < segments.size(); ++s) {
    const auto* t = reinterpret_cast<const uint8_t*>(segments[s].data());
    const size_t len = segments[s].size();
    size_t pos = 0;
    while (len - pos > chunk_bytes) {
      const size_t cut = cut_at(t, len, pos, chunk_bytes);
      if (cut >= len) break;
      p.units.push_back(ChunkUnit{s, pos, cut, false});
      pos = cut;
    }
    p.units.push_back(ChunkUnit{s, pos, len, true});
    p.total_bytes += len;
  }
  size_t bytes = 0;
  for (size_t u = 0; u < p.units.size(); ++u) {
    const size_t ul = p.units[u].end - p.units[u].begin;
    if (u > p.first.back() && bytes + ul > chunk_bytes) {
      p.first.push_back(u);
      bytes = 0;
    }
    bytes += ul;
  }
  if (!p.units.empty()) p.first.push_back(p.units.size());
  for (size_t k = 0; k < p.chunks(); ++k) {
    p.max_chunk_bytes = std::max(p.max_chunk_bytes, p.chunk_bytes(k));
    p.max_chunk_units = std::max(p.max_chunk_units, p.first[k + 1] - p.first[k]);
  }
  return p;
}

void reserve_output(ThreadPool* pool, GpuOutput& out, size_t bytes, int64_t last_shift, bool huge) {
  const size_t want =
      size_t(out.tokens) + bytes / 2 + 64 + size_t(std::max<int64_t>(last_shift, 0));
  if (out.ids32)
    grow(pool, *out.ids32, want, out.ids32->size(), huge);
  else if (out.ids16)
    grow(pool, *out.ids16, want, out.ids16->size(), huge);
}

void stitch_chunk(ThreadPool* pool, const ChunkIds& r, const ChunkUnit* units, size_t n_units,
                  GpuOutput& out, std::vector<int64_t>& ends, bool huge) {
  const int64_t base = out.tokens;
  const uint32_t total = r.total;
  const int32_t* src = r.ids;
  if (out.ids32) {
    IdVector& ids = *out.ids32;
    grow(pool, ids, size_t(base) + total, ids.size(), huge);
    ids.resize(size_t(base) + total);
    int32_t* dst = ids.data() + base;
    parallel_slices(pool, total, 4, [&](size_t lo, size_t hi) {
      std::memcpy(dst + lo, src + lo, (hi - lo) * sizeof(int32_t));
    });
  } else {
    U16Vector& ids = *out.ids16;
    auto shift_of = [&](size_t u) { return out.shift ? out.shift[units[u].seg] : int64_t(0); };
    if (n_units) {
      const size_t size =
          std::max<size_t>(ids.size(), size_t(base + total + shift_of(n_units - 1)));
      grow(pool, ids, size, ids.size(), huge);
      ids.resize(size);
    }
    uint16_t* dst = ids.data() + base;
    const uint32_t* unit_ends = r.unit_ends;
    std::mutex bad_mu;
    parallel_slices(pool, total, 4, [&](size_t lo, size_t hi) {
      // The units overlapping [lo, hi): unit u's ids are [unit_ends[u - 1], unit_ends[u]).
      size_t u = size_t(std::upper_bound(unit_ends, unit_ends + n_units, uint32_t(lo)) - unit_ends);
      for (size_t a = lo; a < hi && u < n_units; ++u) {
        const size_t b = std::min<size_t>(hi, unit_ends[u]);
        if (b <= a) continue;
        const int64_t bad = narrow_uint16(src + a, b - a, dst + a + shift_of(u));
        if (bad >= 0) {
          std::lock_guard<std::mutex> lock(bad_mu);
          const int64_t at = base + int64_t(a) + bad;
          if (out.first_bad < 0 || at < out.first_bad) {
            out.first_bad = at;
            out.bad_value = src[a + size_t(bad)];
          }
        }
        a = b;
      }
    });
  }
  out.tokens += total;
  for (size_t u = 0; u < n_units; ++u)
    if (units[u].last) ends.push_back(base + int64_t(r.unit_ends[u]));
}

void run_chunks(const ChunkPlan& plan, size_t lanes, const ChunkStages& stages, ThreadPool* pool,
                GpuOutput& out, std::vector<int64_t>& ends, bool huge) {
  const size_t n = plan.chunks();
  lanes = std::clamp<size_t>(lanes, 1, std::max<size_t>(n, 1));
  auto finish = [&](size_t k) {
    const ChunkIds r = stages.collect(k % lanes, k);
    if (r.total > plan.chunk_bytes(k))
      throw CudaError("GPU encoder produced more tokens than bytes");
    const size_t u0 = plan.first[k];
    stitch_chunk(pool, r, plan.units.data() + u0, plan.first[k + 1] - u0, out, ends, huge);
  };
  size_t done = 0;
  try {
    for (size_t k = 0; k < n; ++k) {
      if (k >= lanes) finish(done++);
      stages.submit(k % lanes, k);
    }
    while (done < n) finish(done++);
  } catch (...) {
    // Work still in flight must end before its buffers may be reused or freed.
    if (stages.drain) stages.drain();
    throw;
  }
}

void encode_chunked_cpu(const Encoder& encoder, const std::vector<std::string_view>& segments,
                        size_t chunk_bytes, size_t lanes, GpuOutput& out,
                        std::vector<int64_t>& ends) {
  const ChunkPlan plan = plan_chunks(segments, chunk_bytes);
  lanes = std::clamp<size_t>(lanes, 1, 8);
  struct Lane {
    std::future<EncodeResult> job;
    EncodeResult result;
    std::vector<uint32_t> unit_ends;
    size_t chunk = 0;
  };
  std::vector<Lane> lane(lanes);
  ChunkStages st;
  st.submit = [&](size_t l, size_t k) {
    std::vector<TextInput> in;
    for (size_t u = plan.first[k]; u < plan.first[k + 1]; ++u) {
      const ChunkUnit& U = plan.units[u];
      in.push_back(TextInput{segments[U.seg].substr(U.begin, U.end - U.begin), true});
    }
    lane[l].chunk = k;
    lane[l].job = std::async(std::launch::async, [&encoder, in = std::move(in)] {
      return encoder.encode_batch(in, SpecialPolicy{}, Utf8Policy::kStrict, 1);
    });
  };
  st.collect = [&](size_t l, size_t k) {
    Lane& L = lane[l];
    if (L.chunk != k) throw CudaError("chunk pipeline: lane holds another chunk");
    L.result = L.job.get();
    L.unit_ends.assign(L.result.offsets.begin() + 1, L.result.offsets.end());
    return ChunkIds{L.result.ids.data(), uint32_t(L.result.ids.size()), L.unit_ends.data()};
  };
  st.drain = [&] {
    for (Lane& L : lane)
      if (L.job.valid()) L.job.wait();
  };
  reserve_output(nullptr, out, plan.total_bytes, 0, true);
  run_chunks(plan, lanes, st, nullptr, out, ends, true);
}

}  // namespace gputok
