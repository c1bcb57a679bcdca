// Device copies of the tables every kernel reads: the merge (pair) hash table, the
// byte -> token map and the two-stage Unicode class table. Built once per GpuEncoder from
// the very arrays the CPU path probes (Vocab::pair_slots(), unicode_table()),
// so both sides run the same probe code (types.h) over the same layout. Owned here, passed
// to kernels as views by value.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common.cuh"
#include "kernels.cuh"
#include "merge.h"
#include "pretokenize.h"
#include "vocab.h"

namespace gputok {
namespace cuda_detail {

class DeviceTables {
 public:
  DeviceTables() = default;
  DeviceTables(const DeviceTables&) = delete;
  DeviceTables& operator=(const DeviceTables&) = delete;
  ~DeviceTables() { release(); }

  // `sparser`: the device copy of the pair table gets 2^sparser times the CPU table's slots
  // (the same hash and probing, keys re-inserted), so a lookup of an absent pair, most of the
  // lookups of a warp pass, ends after fewer probes: each probe is a dependent round trip on
  // the merge loops' critical path.
  void build(const Vocab& vocab, uint64_t& allocs, int sparser = 0, size_t learned_bytes = 0) {
    const std::vector<uint64_t> slots = respread(vocab, sparser);
    const size_t cap = slots.size() / 2;
    if (cap == 0 || (cap & (cap - 1)) != 0)
      throw CudaError("pair table capacity must be a nonzero power of two");
    const size_t s1 = unicode_stage1_size(), s2 = unicode_stage2_size();
    const size_t bytes =
        2 * cap * sizeof(uint64_t) + 256 * sizeof(int32_t) + s1 * sizeof(uint16_t) + s2 + 4 * 256;
    GPUTOK_CUDA(cudaMalloc(&block_, bytes));
    ++allocs;
    bytes_ = bytes;
    char* p = static_cast<char*>(block_);
    auto* d_slots = reinterpret_cast<uint64_t*>(p);
    auto* d_bytes = reinterpret_cast<int32_t*>(d_slots + 2 * cap);
    auto* d_s1 = reinterpret_cast<uint16_t*>(d_bytes + 256);
    auto* d_s2 = reinterpret_cast<uint8_t*>(d_s1 + s1);
    const UnicodeTableView host_uni = unicode_table();
    GPUTOK_CUDA(
        cudaMemcpy(d_slots, slots.data(), 2 * cap * sizeof(uint64_t), cudaMemcpyHostToDevice));
    GPUTOK_CUDA(
        cudaMemcpy(d_bytes, vocab.byte_token(), 256 * sizeof(int32_t), cudaMemcpyHostToDevice));
    GPUTOK_CUDA(cudaMemcpy(d_s1, host_uni.stage1, s1 * sizeof(uint16_t), cudaMemcpyHostToDevice));
    GPUTOK_CUDA(cudaMemcpy(d_s2, host_uni.stage2, s2, cudaMemcpyHostToDevice));
    vocab_ = VocabView{PairTableView{d_slots, uint32_t(cap - 1)}, d_bytes};
    uni_ = UnicodeTableView{d_s1, d_s2};
    build_cache(vocab, allocs);
    build_learned(learned_bytes, allocs);
  }

  // The learned cache (learned_cache.cuh) in one buffer of `bytes` (0: none; at least 64 KiB):
  // its counter, a quarter of it as slots (a power of two of 16 bytes each), the rest as blob.
  // The counter and the slots are zeroed; the blob is filled with 0xFF, so that a find that
  // read bytes no insert wrote would miss every time, which tests/gpu/test_learned_cache.py's
  // repeats see (a fresh allocation is often zero, which would hide it).
  void build_learned(size_t bytes, uint64_t& allocs) {
    if (bytes == 0) return;
    bytes = std::max<size_t>(bytes, size_t(64) << 10);
    size_t slots = 1024;
    while (slots * 2 * 16 <= bytes / 4) slots <<= 1;
    const size_t head = 256, blob = bytes - head - slots * 16;
    GPUTOK_CUDA(cudaMalloc(&learned_block_, bytes));
    ++allocs;
    char* p = static_cast<char*>(learned_block_);
    GPUTOK_CUDA(cudaMemset(p, 0, head + slots * 16));
    GPUTOK_CUDA(cudaMemset(p + head + slots * 16, 0xFF, blob));
    // cudaMemset returns before it is done, and the calls' streams do not wait for the default
    // stream (cudaStreamNonBlocking): the first call's kernels must not see the table unset.
    GPUTOK_CUDA(cudaStreamSynchronize(nullptr));
    LearnedCacheView& lc = cache_.learned;
    lc.used = reinterpret_cast<unsigned long long*>(p);
    lc.slots = reinterpret_cast<unsigned long long*>(p + head);
    lc.blob = reinterpret_cast<uint8_t*>(p + head + slots * 16);
    lc.blob_bytes = blob;
    lc.mask = uint32_t(slots - 1);
  }

  // Blob bytes the learned cache holds (what was handed out, up to its size; 0 without one).
  size_t learned_used() const {
    const LearnedCacheView& lc = cache_.learned;
    if (!lc.used) return 0;
    unsigned long long used = 0;
    GPUTOK_CUDA(cudaMemcpy(&used, lc.used, sizeof used, cudaMemcpyDeviceToHost));
    return size_t(std::min<unsigned long long>(used, lc.blob_bytes));
  }

  static std::vector<uint64_t> respread(const Vocab& vocab, int sparser) {
    const auto& src = vocab.pair_slots();
    if (sparser <= 0) return std::vector<uint64_t>(src.begin(), src.end());
    const size_t cap = vocab.pair_capacity() << sparser;
    std::vector<uint64_t> out(2 * cap, kEmptyKey);
    for (size_t i = 0; i < src.size(); i += 2) {
      if (src[i] == kEmptyKey) continue;
      uint32_t slot = pair_hash(src[i]) & uint32_t(cap - 1);
      while (out[2 * size_t(slot)] != kEmptyKey) slot = (slot + 1) & uint32_t(cap - 1);
      out[2 * size_t(slot)] = src[i];
      out[2 * size_t(slot) + 1] = src[i + 1];
    }
    return out;
  }

  // The whole-piece cache (kernels.cuh): every token of 2..kShortPiece bytes whose own BPE
  // is itself, keyed by piece_hash; bytes verified on every hit.
  void build_cache(const Vocab& vocab, uint64_t& allocs) {
    const auto& toks = vocab.tokens();
    std::vector<uint32_t> chosen;
    std::vector<int32_t> out;
    size_t blob_bytes = 0;
    for (size_t id = 0; id < toks.size() && id < (1u << 24); ++id) {
      const std::string& t = toks[id];
      if (t.size() < 2 || t.size() > size_t(kShortPiece)) continue;
      out.clear();
      merge_piece_reference(vocab.view(), reinterpret_cast<const uint8_t*>(t.data()), t.size(),
                            out);
      if (out.size() != 1 || out[0] != int32_t(id)) continue;
      chosen.push_back(uint32_t(id));
      blob_bytes += t.size();
    }
    size_t slots = 1024;
    while (slots < chosen.size() * 3) slots <<= 1;
    std::vector<uint64_t> kv(2 * slots, 0);  // PieceCacheView: key, value side by side
    std::vector<uint8_t> blob;
    blob.reserve(blob_bytes);
    for (uint32_t id : chosen) {
      const std::string& t = toks[id];
      uint64_t h = kPieceHashSeed;
      for (unsigned char b : t) h = piece_hash_step(h, b);
      h = piece_hash_finish(h, uint32_t(t.size()));
      size_t slot = size_t(h) & (slots - 1);
      while (kv[2 * slot] != 0) slot = (slot + 1) & (slots - 1);
      uint64_t bytes_or_offset = 0;
      if (t.size() <= size_t(kCacheInlineBytes)) {
        for (size_t j = 0; j < t.size(); ++j)
          bytes_or_offset |= uint64_t(static_cast<unsigned char>(t[j])) << (8 * j);
      } else {
        bytes_or_offset = blob.size();
        blob.insert(blob.end(), t.begin(), t.end());
      }
      kv[2 * slot] = h;
      kv[2 * slot + 1] = (bytes_or_offset << 32) | (uint64_t(t.size()) << 24) | id;
    }
    const size_t bytes = slots * 16 + blob.size() + 16;
    GPUTOK_CUDA(cudaMalloc(&cache_block_, bytes));
    ++allocs;
    auto* dkv = static_cast<uint64_t*>(cache_block_);
    auto* db = reinterpret_cast<uint8_t*>(dkv + 2 * slots);
    GPUTOK_CUDA(cudaMemcpy(dkv, kv.data(), slots * 16, cudaMemcpyHostToDevice));
    if (!blob.empty())
      GPUTOK_CUDA(cudaMemcpy(db, blob.data(), blob.size(), cudaMemcpyHostToDevice));
    cache_ = PieceCacheView{dkv, db, uint32_t(slots - 1), cache_.learned};
    cache_entries_ = chosen.size();
  }
  void release() {
    if (block_) cudaFree(block_);
    block_ = nullptr;
    if (cache_block_) cudaFree(cache_block_);
    cache_block_ = nullptr;
    if (learned_block_) cudaFree(learned_block_);
    learned_block_ = nullptr;
  }
  PieceCacheView cache() const { return cache_; }
  size_t cache_entries() const { return cache_entries_; }
  VocabView vocab() const { return vocab_; }
  UnicodeTableView unicode() const { return uni_; }
  size_t bytes() const { return bytes_; }

 private:
  void* block_ = nullptr;
  void* cache_block_ = nullptr;
  void* learned_block_ = nullptr;
  size_t bytes_ = 0;
  size_t cache_entries_ = 0;
  PieceCacheView cache_{nullptr, nullptr, 0};
  VocabView vocab_{};
  UnicodeTableView uni_{};
};

}  // namespace cuda_detail
}  // namespace gputok
