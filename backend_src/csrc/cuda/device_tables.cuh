// Device copies of the tables every kernel reads: the merge (pair) hash table, the
// byte -> token map and the two-stage Unicode class table. Built once per GpuEncoder from
// the very arrays the CPU path probes (Vocab::pair_keys()/pair_values(), unicode_table()),
// so both sides run the same probe code (types.h) over the same layout. Owned here, passed
// to kernels as views by value.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common.cuh"
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

  void build(const Vocab& vocab, uint64_t& allocs) {
    const auto& keys = vocab.pair_keys();
    const auto& values = vocab.pair_values();
    const size_t cap = keys.size();
    if (cap == 0 || (cap & (cap - 1)) != 0 || values.size() != cap)
      throw CudaError("pair table capacity must be a nonzero power of two");
    const size_t s1 = unicode_stage1_size(), s2 = unicode_stage2_size();
    const size_t bytes = 2 * cap * sizeof(uint64_t) + 256 * sizeof(int32_t) +
                         s1 * sizeof(uint16_t) + s2 + 4 * 256;
    GPUTOK_CUDA(cudaMalloc(&block_, bytes));
    ++allocs;
    bytes_ = bytes;
    char* p = static_cast<char*>(block_);
    auto* d_keys = reinterpret_cast<uint64_t*>(p);
    auto* d_values = d_keys + cap;
    auto* d_bytes = reinterpret_cast<int32_t*>(d_values + cap);
    auto* d_s1 = reinterpret_cast<uint16_t*>(d_bytes + 256);
    auto* d_s2 = reinterpret_cast<uint8_t*>(d_s1 + s1);
    const UnicodeTableView host_uni = unicode_table();
    GPUTOK_CUDA(cudaMemcpy(d_keys, keys.data(), cap * sizeof(uint64_t), cudaMemcpyHostToDevice));
    GPUTOK_CUDA(cudaMemcpy(d_values, values.data(), cap * sizeof(uint64_t), cudaMemcpyHostToDevice));
    GPUTOK_CUDA(cudaMemcpy(d_bytes, vocab.byte_token(), 256 * sizeof(int32_t), cudaMemcpyHostToDevice));
    GPUTOK_CUDA(cudaMemcpy(d_s1, host_uni.stage1, s1 * sizeof(uint16_t), cudaMemcpyHostToDevice));
    GPUTOK_CUDA(cudaMemcpy(d_s2, host_uni.stage2, s2, cudaMemcpyHostToDevice));
    vocab_ = VocabView{PairTableView{d_keys, d_values, uint32_t(cap - 1)}, d_bytes};
    uni_ = UnicodeTableView{d_s1, d_s2};
  }
  void release() {
    if (block_) cudaFree(block_);
    block_ = nullptr;
  }
  VocabView vocab() const { return vocab_; }
  UnicodeTableView unicode() const { return uni_; }
  size_t bytes() const { return bytes_; }

 private:
  void* block_ = nullptr;
  size_t bytes_ = 0;
  VocabView vocab_{};
  UnicodeTableView uni_{};
};

}  // namespace cuda_detail
}  // namespace gputok
