// One ordinary segment's pieces -> ids on the calling thread (Encoder::encode_segment,
// encoder.h): the scanner, the shared pretoken cache, the token index and the merge.
#include "encoder.h"
#include "merge.h"
#include "piece_cache.h"
#include "pretokenize.h"

namespace gputok {

namespace {

// Per-thread merge scratch: thread_local, so no call takes a lock to get one.
MergeScratch& thread_scratch() {
  static thread_local MergeScratch scratch;
  return scratch;
}

}  // namespace

// Pieces go through in blocks of 32-64, software-pipelined one block deep: cut block k+1
// (next_many reads a 64-byte window's boundaries at once), key and hash its pieces and
// prefetch their pretoken-cache slots, then look up block k's pieces in order. The cache
// answers every piece it has seen, one-byte pieces and whole tokens included, so a warm piece
// is one probe with no branch on its length (a one-byte piece's own branch mispredicted: 30%
// of pieces, in no pattern). A miss takes a byte's token, the token index, or the merge, and
// inserts the answer. A segment's ids are at most its bytes, so `out` grows once per segment
// and the ids are stored through a pointer (no capacity check per piece). The key's words are
// stored one by one: a 16-byte copy of a key just built in two 8-byte registers stalled on
// store forwarding, once a piece.
// Measured (bench/bench_encoder_ab.py, one thread, 10 MB, CPU time, 5 alternated rounds,
// warm median, 2026-11-27), against one-byte pieces outside the cache and blocks of 16-32
// looked up right after their prefetch: 2-core dev VM (EPYC) code 280 -> 307 MB/s, bench
// corpus 223 -> 256; H100 host (Xeon) bench 161 -> 182, code 183 -> 205 (8 rounds). Blocks of 64
// against 32: +2-3% (dev VM); prefetching into L2, or one prefetch per looked-up piece
// instead of the block's burst: slower.
void Encoder::encode_segment(PieceCache* cache, std::string_view text, IdVector& out) const {
  constexpr size_t kBlock = 64;
  struct Block {
    const uint8_t* start;  // the block's first piece
    size_t m;              // its pieces
    uint32_t lens[kBlock];
    PieceKey keys[kBlock];
    uint64_t h[kBlock];
  };
  const UnicodeTableView uni = unicode_table();
  const Vocab& voc = *vocab_;
  const VocabView v = voc.view();
  const bool whole = voc.whole_piece_lookup();
  MergeScratch& scratch = thread_scratch();
  const auto* data = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  PieceScanner scanner(uni, data, n);
  const size_t at = out.size();
  // ids <= bytes, plus the cache's slack; IdVector leaves the new ids uninitialized
  out.resize(at + n + PieceCache::kSlackIds);
  int32_t* w = out.data() + at;
  size_t pos = 0;
  auto scan = [&](Block& b) {
    b.start = data + pos;
    size_t m = 0;
    while (m < kBlock / 2 && pos < n) {
      const size_t k = scanner.next_many(pos, b.lens + m, kBlock - m);
      for (const size_t end = m + k; m < end; ++m) {
        const size_t len = b.lens[m];
        const PieceKey key = make_key(data + pos, len, n - pos);
        b.keys[m].w0 = key.w0;
        b.keys[m].w1 = key.w1;
        b.keys[m].len = key.len;
        b.h[m] = key_hash(key);
        if (cache)
          cache->prefetch(b.h[m]);
        else if (whole)
          voc.prefetch_token(b.h[m], len);
        pos += len;
      }
    }
    b.m = m;
  };
  auto resolve = [&](const Block& b) {
    const uint8_t* piece = b.start;
    for (size_t k = 0; k < b.m; piece += b.lens[k], ++k) {
      const size_t len = b.lens[k];
      // A piece over kMaxPiece misses (find) and is not stored (insert): no length test here.
      if (cache) {
        if (const size_t got = cache->find(b.keys[k], piece, b.h[k], w)) {
          w += got;
          continue;
        }
      }
      // A miss: a byte's token, a whole token, or the merge.
      const int32_t id = len == 1 ? v.byte_token[piece[0]]
                         : whole  ? voc.find_token(b.keys[k], piece, b.h[k])
                                  : -1;
      if (id >= 0) {
        *w++ = id;
        if (cache) cache->insert(b.keys[k], piece, b.h[k], &id, 1);
        continue;
      }
      scratch.out.clear();
      merge_piece(v, piece, len, scratch.out, scratch);
      if (cache) cache->insert(b.keys[k], piece, b.h[k], scratch.out.data(), scratch.out.size());
      for (const int32_t id : scratch.out) *w++ = id;
    }
  };
  Block blocks[2];
  scan(blocks[0]);
  for (int cur = 0; blocks[cur].m > 0; cur ^= 1) {
    scan(blocks[cur ^ 1]);  // empty (m = 0) at the segment's end
    resolve(blocks[cur]);
  }
  out.resize(size_t(w - out.data()));
}

}  // namespace gputok
