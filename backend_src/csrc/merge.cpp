// BPE merge on the CPU, tiktoken's semantics: merge the lowest-ranked adjacent pair,
// leftmost on ties, until nothing merges. Ranks come from the pair table (types.h),
// whose every-split construction makes a pair probe equal to tiktoken's lookup of the
// concatenated bytes.
//
// Performance notes (2-core dev machine): pieces average ~4.5 bytes and most are whole
// tokens, handled before this file by one hash probe (encoder.cpp). Pieces that do merge
// take the array scan below (~60 ns for 8 bytes). Past kHeapThreshold bytes the scan's
// O(n^2) would dominate (1 MB of "a": hours), so a heap with lazy invalidation takes over:
// 1 MB of one letter merges in ~0.2 s, O(n log n).
#include "merge.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace gputok {

namespace {

constexpr size_t kHeapThreshold = 128;

inline uint64_t probe(VocabView v, int32_t left, int32_t right) {
  return pair_lookup(v.pairs, uint32_t(left), uint32_t(right));
}

inline uint32_t rank_of(uint64_t value) { return value == kEmptyKey ? kNoRank : pair_rank(value); }

void merge_scan(VocabView v, const uint8_t* piece, size_t n, std::vector<int32_t>& out,
                MergeScratch& s) {
  s.ids.resize(n);
  s.ranks.resize(n);
  int32_t* ids = s.ids.data();
  uint32_t* ranks = s.ranks.data();
  for (size_t i = 0; i < n; ++i) ids[i] = v.byte_token[piece[i]];
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = rank_of(probe(v, ids[i], ids[i + 1]));
  size_t count = n;
  while (count > 1) {
    size_t best = 0;
    uint32_t best_rank = ranks[0];
    for (size_t i = 1; i + 1 < count; ++i) {
      if (ranks[i] < best_rank) {
        best_rank = ranks[i];
        best = i;
      }
    }
    if (best_rank == kNoRank) break;
    ids[best] = int32_t(pair_merged(probe(v, ids[best], ids[best + 1])));
    // Erase part best+1 and the rank of the pair it started.
    std::memmove(ids + best + 1, ids + best + 2, (count - best - 2) * sizeof(int32_t));
    std::memmove(ranks + best + 1, ranks + best + 2,
                 (count > best + 2 ? count - best - 2 : 0) * sizeof(uint32_t));
    --count;
    if (best + 1 < count) ranks[best] = rank_of(probe(v, ids[best], ids[best + 1]));
    if (best > 0) ranks[best - 1] = rank_of(probe(v, ids[best - 1], ids[best]));
  }
  out.insert(out.end(), ids, ids + count);
}

// Heap of (rank << 32 | position) with lazy deletion: an entry is live when its position
// still starts a part whose pair with the next part has that rank. Every change of a pair
// pushes a fresh entry, so the smallest live entry is the leftmost lowest-ranked pair.
void merge_heap(VocabView v, const uint8_t* piece, size_t n, std::vector<int32_t>& out,
                MergeScratch& s) {
  s.ids.resize(n);
  s.ranks.resize(n);
  s.next.resize(n);
  s.prev.resize(n);
  s.heap.clear();
  int32_t* ids = s.ids.data();
  uint32_t* ranks = s.ranks.data();  // rank of the pair starting here; kNoRank if none/dead
  int32_t* next = s.next.data();
  int32_t* prev = s.prev.data();
  auto& heap = s.heap;
  const std::greater<uint64_t> cmp;
  for (size_t i = 0; i < n; ++i) {
    ids[i] = v.byte_token[piece[i]];
    next[i] = i + 1 < n ? int32_t(i + 1) : -1;
    prev[i] = int32_t(i) - 1;
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    ranks[i] = rank_of(probe(v, ids[i], ids[i + 1]));
    if (ranks[i] != kNoRank) heap.push_back((uint64_t(ranks[i]) << 32) | i);
  }
  ranks[n - 1] = kNoRank;
  std::make_heap(heap.begin(), heap.end(), cmp);
  auto refresh = [&](int32_t at) {
    const int32_t nx = next[at];
    ranks[at] = nx < 0 ? kNoRank : rank_of(probe(v, ids[at], ids[nx]));
    if (ranks[at] != kNoRank) {
      heap.push_back((uint64_t(ranks[at]) << 32) | uint32_t(at));
      std::push_heap(heap.begin(), heap.end(), cmp);
    }
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const uint64_t top = heap.back();
    heap.pop_back();
    const int32_t at = int32_t(top & 0xFFFFFFFFu);
    const uint32_t rank = uint32_t(top >> 32);
    if (ranks[at] != rank) continue;  // stale
    const int32_t nx = next[at];
    ids[at] = int32_t(pair_merged(probe(v, ids[at], ids[nx])));
    ranks[nx] = kNoRank;
    next[at] = next[nx];
    if (next[nx] >= 0) prev[next[nx]] = at;
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
    merge_scan(v, piece, n, out, scratch);
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
      const uint32_t r = rank_of(probe(v, parts[i], parts[i + 1]));
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
