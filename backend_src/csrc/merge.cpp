// BPE merge on the CPU, tiktoken's semantics: merge the lowest-ranked adjacent pair,
// leftmost on ties, until nothing merges. Ranks come from the pair table (types.h),
// whose every-split construction makes a pair probe equal to tiktoken's lookup of the
// concatenated bytes.
//
// Performance notes (2-core dev machine, callgrind on 2.9 MB of the ci corpus): pieces
// average ~4.5 bytes and most are whole tokens, handled before this file by one probe of
// the vocabulary index (encoder.cpp); the rest hit the per-thread pretoken cache or come
// here. Merging is then ~26% of all instructions, most of it CJK and Cyrillic runs that are
// long and unique. Below kHeapThreshold bytes an array scan is cheapest; above it the
// scan's O(n^2) loses to a heap with lazy invalidation (threshold 128 -> 32 cut merge
// instructions 88M -> 64M), and it keeps 1 MB of one letter at ~0.25 s, O(n log n).
#include "merge.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace gputok {

namespace {

constexpr size_t kHeapThreshold = 32;

inline uint64_t probe(VocabView v, int32_t left, int32_t right) {
  return pair_lookup(v.pairs, uint32_t(left), uint32_t(right));
}

// The packed value of the pair of bytes (a, b): from the L2-resident byte table when the
// view has one, else from the hash table.
inline uint64_t probe_bytes(VocabView v, uint8_t a, uint8_t b) {
  return v.byte_pairs ? v.byte_pairs[(uint32_t(a) << 8) | b]
                      : probe(v, v.byte_token[a], v.byte_token[b]);
}

// A packed value's rank; kEmptyKey's low half is kNoRank, so misses need no branch.
inline uint32_t rank_of(uint64_t value) { return uint32_t(value); }

// tiktoken's loop over two arrays kept contiguous: each pass scans the live pairs for the
// lowest rank (leftmost wins ties), merges, closes the gap and re-probes the two pairs it
// changed. vals[i] is the packed value of the pair (ids[i], ids[i + 1]), so the merged id
// comes with the rank and a merge costs no extra probe. The arrays live on the stack (n <
// kHeapThreshold): the linked list over the scratch vectors this replaced resized three
// vectors a piece and walked its scan through dependent `next` loads.
// Measured (bench/bench_encoder_ab.py HEAD TREE --rounds 5, one thread, 10 MB, MB/s of CPU
// time, medians; 2-core dev VM, Xeon, 2026-12-02): a cold pass (every piece merged once)
// bench corpus 81.6 -> 87.2, code 201.3 -> 208.1; warm passes unchanged (263 / 315-323).
void merge_scan(VocabView v, const uint8_t* piece, size_t n, std::vector<int32_t>& out) {
  int32_t ids[kHeapThreshold];
  uint64_t vals[kHeapThreshold];
  for (size_t i = 0; i + 1 < n; ++i) {
    ids[i] = v.byte_token[piece[i]];
    vals[i] = probe_bytes(v, piece[i], piece[i + 1]);
  }
  ids[n - 1] = v.byte_token[piece[n - 1]];
  vals[n - 1] = kEmptyKey;  // the last part starts no pair
  size_t m = n;             // live parts; vals[0, m - 1) are live
  while (m > 1) {
    size_t best = 0;
    uint32_t best_rank = rank_of(vals[0]);
    for (size_t i = 1; i + 1 < m; ++i) {
      const uint32_t r = rank_of(vals[i]);
      if (r < best_rank) {
        best_rank = r;
        best = i;
      }
    }
    if (best_rank == kNoRank) break;
    ids[best] = int32_t(pair_merged(vals[best]));
    for (size_t i = best + 1; i + 1 < m; ++i) {  // part best + 1 is gone
      ids[i] = ids[i + 1];
      vals[i] = vals[i + 1];
    }
    --m;
    if (best + 1 < m) vals[best] = probe(v, ids[best], ids[best + 1]);
    if (best > 0) vals[best - 1] = probe(v, ids[best - 1], ids[best]);
  }
  out.insert(out.end(), ids, ids + m);
}

// Heap of (rank << 32 | position) with lazy deletion: an entry is live when its position
// still starts a part whose pair with the next part has that rank. Every change of a pair
// pushes a fresh entry, so the smallest live entry is the leftmost lowest-ranked pair.
void merge_heap(VocabView v, const uint8_t* piece, size_t n, std::vector<int32_t>& out,
                MergeScratch& s) {
  s.ids.resize(n);
  s.vals.resize(n);
  s.next.resize(n);
  s.prev.resize(n);
  s.heap.clear();
  int32_t* ids = s.ids.data();
  uint64_t* vals = s.vals.data();  // packed value of the pair starting here; kEmptyKey if none
  int32_t* next = s.next.data();
  int32_t* prev = s.prev.data();
  auto& heap = s.heap;
  const std::greater<uint64_t> cmp;
  for (size_t i = 0; i < n; ++i) {
    ids[i] = v.byte_token[piece[i]];
    next[i] = i + 1 < n ? int32_t(i + 1) : -1;
    prev[i] = int32_t(i) - 1;
    vals[i] = i + 1 < n ? probe_bytes(v, piece[i], piece[i + 1]) : kEmptyKey;
    if (rank_of(vals[i]) != kNoRank) heap.push_back((uint64_t(rank_of(vals[i])) << 32) | i);
  }
  std::make_heap(heap.begin(), heap.end(), cmp);
  auto refresh = [&](int32_t at) {
    const int32_t nx = next[at];
    vals[at] = nx < 0 ? kEmptyKey : probe(v, ids[at], ids[nx]);
    if (rank_of(vals[at]) != kNoRank) {
      heap.push_back((uint64_t(rank_of(vals[at])) << 32) | uint32_t(at));
      std::push_heap(heap.begin(), heap.end(), cmp);
    }
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const uint64_t top = heap.back();
    heap.pop_back();
    const int32_t at = int32_t(top & 0xFFFFFFFFu);
    if (rank_of(vals[at]) != uint32_t(top >> 32)) continue;  // stale
    const int32_t gone = next[at];
    ids[at] = int32_t(pair_merged(vals[at]));
    vals[gone] = kEmptyKey;
    next[at] = next[gone];
    if (next[gone] >= 0) prev[next[gone]] = at;
    refresh(at);
    if (prev[at] >= 0) refresh(prev[at]);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
}

}  // namespace

void merge_piece(VocabView v, const uint8_t* piece, size_t n, std::vector<int32_t>& out,
                 MergeScratch& scratch) {
  if (n == 1) {
    out.push_back(v.byte_token[piece[0]]);
  } else if (n < kHeapThreshold) {
    merge_scan(v, piece, n, out);
  } else {
    merge_heap(v, piece, n, out, scratch);
  }
}

void merge_piece_reference(VocabView v, const uint8_t* piece, size_t n, std::vector<int32_t>& out) {
  std::vector<int32_t> parts(piece, piece + n);
  for (auto& p : parts) p = v.byte_token[uint8_t(p)];
  for (;;) {
    uint32_t best_rank = kNoRank;
    size_t best = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const uint32_t r = rank_of(probe(v, parts[i], parts[i + 1]));  // the hash table only
      if (r < best_rank) {
        best_rank = r;
        best = i;
      }
    }
    if (best_rank == kNoRank) break;
    parts[best] = int32_t(pair_merged(probe(v, parts[best], parts[best + 1])));
    parts.erase(parts.begin() + long(best) + 1);
  }
  out.insert(out.end(), parts.begin(), parts.end());
}

}  // namespace gputok
