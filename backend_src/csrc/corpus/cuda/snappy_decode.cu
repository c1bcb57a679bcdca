// The decode of the GPU snappy path (the overview: parquet.cu): once every 64 KiB fragment's
// first tag is known (snappy_walks.cu), one warp decodes each fragment, by default with its
// lanes parsing 32 input bytes at once into shared memory ("windowed"); "tagwise" and
// "global" are the ablations. A stream whose tags cross the fragments is decoded from start
// to end by one warp (snappy_decode_sequential_kernel, launch_snappy_sequential).
#include <cuda_runtime.h>

#include "cuda/common.cuh"
#include "snappy_stages.cuh"

namespace gputok {
namespace cuda_detail {

namespace {

// The block's fragment (blockIdx.x) of the call: its job's index, its input, where its first
// tag starts in it (ip), and its output range (out, len). False when the block is past the
// last fragment or the job is not decoded by fragments (corrupt, or left to the sequential
// kernel).
struct FragmentOf {
  uint32_t j, len;
  const uint8_t* in;  // the job's snappy stream, in_n bytes
  uint64_t in_n, ip;
  uint8_t* out;  // where the fragment's output goes
};
__device__ __forceinline__ bool fragment_of(const uint8_t* src, uint8_t* dst, const SnappyJob* jobs,
                                            uint32_t n_jobs, uint32_t n_frags,
                                            const uint32_t* frag_ip, const int32_t* status,
                                            FragmentOf& fr) {
  const uint32_t f = blockIdx.x;
  if (f >= n_frags) return false;
  fr.j = find_job(jobs, n_jobs, f, false);
  if (status[fr.j] != kSnappyFragmented) return false;
  const SnappyJob job = jobs[fr.j];
  const uint32_t first = (f - job.frag0) * kSnappyFragment;
  fr.len = min(kSnappyFragment, job.out_len - first);
  fr.in = src + job.src;
  fr.in_n = job.src_size;
  fr.out = dst + job.dst + first;
  fr.ip = frag_ip[f];
  return true;
}

// 4. One warp per fragment, decoded in shared memory. Staging the fragment's compressed bytes
// in shared memory too (44 KiB) made a wave of fragments 3.3 -> 2.6 ms, but
// two blocks fit an SM instead of three, so a call of 300-400 fragments took two waves: 5.0
// ms instead of 3.3 (H200, 2026-11-23). The input is read through L1 instead.
constexpr uint32_t kSnappyDecodeSmem = kSnappyFragment;

// One tag's bytes, written by the 32 lanes of a warp at `out`: a literal's `len` bytes from
// `lit` (offset 0), or a copy from `offset` bytes back. A copy that overlaps its own output
// (offset < len) repeats the `offset` bytes before it, as snappy means: lane reads of
// from[i % offset] all lie before `out`, so no lane waits for another's write. The caller
// syncs the warp before the next tag. The input is read-only in these kernels, hence __ldg.
// (Shared by the three decode kernels: tagwise, windowed for its serial tags, sequential.)
__device__ __forceinline__ void warp_copy_tag(uint8_t* out, const uint8_t* lit, uint32_t len,
                                              uint32_t offset, uint32_t lane) {
  if (offset == 0) {
    for (uint32_t i = lane; i < len; i += 32) out[i] = __ldg(lit + i);
  } else if (offset >= len) {
    const uint8_t* from = out - offset;
    for (uint32_t i = lane; i < len; i += 32) out[i] = from[i];
  } else {
    const uint8_t* from = out - offset;
    for (uint32_t i = lane; i < len; i += 32) out[i] = from[i % offset];
  }
}

__global__ void snappy_decode_tagwise_kernel(const uint8_t* src, uint8_t* dst,
                                             const SnappyJob* jobs, uint32_t n_jobs,
                                             uint32_t n_frags, const uint32_t* frag_ip,
                                             int32_t* status) {
  extern __shared__ uint8_t frag_buf[];  // the fragment's output
  const uint32_t lane = threadIdx.x;
  FragmentOf fr;
  if (!fragment_of(src, dst, jobs, n_jobs, n_frags, frag_ip, status, fr)) return;
  const uint8_t* in = fr.in;
  const size_t in_n = fr.in_n;
  const uint32_t len = fr.len;
  size_t ip = fr.ip;
  uint32_t op = 0;
  bool ok = true;
  // The next tag is parsed before this one's bytes are copied: its loads (input only) then
  // overlap the copy's instead of waiting behind them (one warp per SM partition hides no
  // latency otherwise).
  SnappyTag t;
  bool have = len > 0 && ip < in_n && snappy_tag(in, ip, in_n, t);
  while (op < len) {
    if (!have || op + t.len > len || (t.offset == 0 && ip + t.size + uint64_t(t.len) > in_n) ||
        t.offset > op) {
      ok = false;  // crosses the fragment (or is malformed): the sequential decoder decides
      break;
    }
    const size_t ip_next = ip + t.size + (t.offset == 0 ? t.len : 0);
    SnappyTag next{};
    const bool have_next =
        op + t.len < len && ip_next < in_n && snappy_tag(in, ip_next, in_n, next);
    warp_copy_tag(frag_buf + op, in + ip + t.size, t.len, t.offset, lane);
    ip = ip_next;
    op += t.len;
    t = next;
    have = have_next;
    __syncwarp();
  }
  if (!ok) {
    if (lane == 0) status[fr.j] = kSnappySequential;
    return;
  }
  for (uint32_t i = lane; i < len; i += 32) fr.out[i] = frag_buf[i];
}

// 4b. The same, with the lanes parsing in parallel ("windowed", the default): each lane parses
// the tag that would start at its byte of the next 32 input bytes; the true tags among them
// are a chain from lane 0 (one shuffle per tag, not a dependent load), along which their
// output offsets are summed. Then each lane copies its own tag when that is a literal or a copy
// that reads only bytes of earlier windows, up to kSnappyLaneBytes bytes; the rest (long tags,
// copies reading this window's output) go one at a time across the warp, in order. A copy reads
// only bytes before its own output, so every byte it reads is final when it runs: earlier
// windows are complete (__syncwarp), lane copies read only those, and the in-order tags come
// after the lane copies and after each other. kSnappyLaneBytes against 8: 7% slower decode,
// 32 the same, 64: 3% slower (H200, bench_parquet.py, 2026-11-24).
constexpr uint32_t kSnappyLaneBytes = 16;

template <bool kInShared>
__global__ void snappy_decode_windowed_kernel(const uint8_t* src, uint8_t* dst,
                                              const SnappyJob* jobs, uint32_t n_jobs,
                                              uint32_t n_frags, const uint32_t* frag_ip,
                                              int32_t* status) {
  extern __shared__ uint8_t frag_smem[];
  constexpr unsigned kAll = 0xFFFFFFFFu;
  const uint32_t lane = threadIdx.x;
  FragmentOf fr;
  if (!fragment_of(src, dst, jobs, n_jobs, n_frags, frag_ip, status, fr)) return;
  const uint8_t* in = fr.in;
  const uint64_t in_n = fr.in_n;
  // The fragment's output: in shared memory (64 KiB a block, so 3 blocks an SM), or straight
  // in the pages' buffer, where copies read it back through L1/L2 but any number of
  // fragments decode at once (PageDecoderOptions::decode "global").
  uint8_t* frag_buf = kInShared ? frag_smem : fr.out;
  const uint32_t len = fr.len;
  uint64_t ip = fr.ip;
  uint32_t op = 0;
  bool ok = true;
  while (op < len) {
    const uint64_t p = ip + lane;
    uint64_t w = 0;  // the 5 bytes from p: independent loads, all in flight at once
#pragma unroll
    for (uint32_t b = 0; b < 5; ++b)
      if (p + b < in_n) w |= uint64_t(__ldg(in + p + b)) << (8 * b);
    SnappyTag t{};
    const bool parsed = p < in_n && snappy_tag_of(w, in_n - p, t);
    // Input bytes from this lane's tag to the next tag (a literal's data included); kept
    // below 2^32 - 64 so that lane + step cannot wrap.
    const uint32_t step =
        parsed ? uint32_t(min(uint64_t(t.size) + (t.offset == 0 ? t.len : 0), uint64_t(1) << 31))
               : 64;
    const uint32_t next = lane + step;
    // The chain from lane 0, one shuffle per tag, warp-uniform: its tags (`chain`), its exit
    // (`at`), and each tag's output offset in the fragment as it goes (`acc`; each length
    // capped at 2^16 + 1, which no tag of a fragment can exceed, so the sum cannot wrap).
    // (A prefix sum after the walk instead: 7% slower decode, H200, 2026-11-24.)
    const uint32_t cap = parsed ? min(t.len, kSnappyFragment + 1) : 0;
    uint32_t chain = 0, at = 0, acc = op, my_op = 0;
    while (at < 32) {
      chain |= 1u << at;
      const uint32_t nx = __shfl_sync(kAll, next, at);
      const uint32_t ln = __shfl_sync(kAll, cap, at);
      if (lane == at) my_op = acc;
      acc += ln;
      at = nx;
    }
    const bool on = (chain >> lane) & 1u;
    const uint32_t at_op = my_op;         // this tag's output offset in the fragment
    const bool live = on && at_op < len;  // on the chain and in this fragment
    // A tag past the fragment's end, straddling it, reaching before its start, or malformed:
    // the sequential decoder decides (it also reports corruption).
    const bool bad = live && (!parsed || at_op + t.len > len ||
                              (t.offset == 0 ? p + t.size + t.len > in_n : t.offset > at_op));
    if (__ballot_sync(kAll, bad)) {
      ok = false;
      break;
    }
    const uint32_t window_op = op;
    // The live tags are a prefix of the chain, and one past the end starts where the last live
    // one ends (else that one straddles the end: bad), so the window's output ends at:
    op = min(acc, len);
    ip += at;  // the chain's exit (used only when the fragment goes on)
    bool later = false;
    if (live) {
      const uint32_t n = t.len;
      const bool literal = t.offset == 0;
      if (n > kSnappyLaneBytes || (!literal && at_op - t.offset + min(n, t.offset) > window_op)) {
        later = true;  // long, or reads this window's output
      } else {
        // One pointer for literals (the input) and copies (the output), through generic
        // loads. No overlap: all loads, then all stores, unrolled, so one load latency
        // instead of n (8% faster decode than a byte loop; loading literal and copy bytes by
        // separate paths was 17% slower; H200, 2026-11-24). A copy that overlaps its own
        // output (offset < length) goes byte by byte, reading what the loop wrote, which
        // repeats the pattern as snappy means.
        const uint8_t* from = literal ? in + p + t.size : frag_buf + at_op - t.offset;
        uint8_t* to = frag_buf + at_op;
        if (literal || t.offset >= n) {
          uint8_t b[kSnappyLaneBytes];
#pragma unroll
          for (uint32_t i = 0; i < kSnappyLaneBytes; ++i) b[i] = i < n ? from[i] : 0;
#pragma unroll
          for (uint32_t i = 0; i < kSnappyLaneBytes; ++i)
            if (i < n) to[i] = b[i];
        } else {
          for (uint32_t i = 0; i < n; ++i) to[i] = from[i];
        }
      }
    }
    uint32_t todo = __ballot_sync(kAll, later);
    const uint64_t lit_at = p + t.size;
    __syncwarp();
    while (todo) {
      const uint32_t s = __ffs(todo) - 1;
      todo &= todo - 1;
      const uint32_t s_op = __shfl_sync(kAll, at_op, s);
      const uint32_t s_len = __shfl_sync(kAll, t.len, s);
      const uint32_t s_off = __shfl_sync(kAll, t.offset, s);
      const uint64_t s_lit = __shfl_sync(kAll, (unsigned long long)lit_at, s);
      warp_copy_tag(frag_buf + s_op, in + s_lit, s_len, s_off, lane);
      __syncwarp();
    }
  }
  if (!ok) {
    if (lane == 0) status[fr.j] = kSnappySequential;
    return;
  }
  if (kInShared)
    for (uint32_t i = lane; i < len; i += 32) fr.out[i] = frag_buf[i];
}

// The fallback: one warp decodes a whole stream in global memory, for jobs marked
// kSnappySequential (their fragments' output, if any, is overwritten).
__global__ void snappy_decode_sequential_kernel(const uint8_t* src, uint8_t* dst,
                                                const SnappyJob* jobs, uint32_t n_jobs,
                                                int32_t* status) {
  const uint32_t j = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const uint32_t lane = threadIdx.x & 31;
  if (j >= n_jobs || status[j] != kSnappySequential) return;
  const SnappyJob job = jobs[j];
  const uint8_t* in = src + job.src;
  uint8_t* out = dst + job.dst;
  const size_t n = job.src_size;
  size_t ip = job.ip;
  uint32_t op = 0;
  while (op < job.out_len) {
    SnappyTag t;
    if (ip >= n || !snappy_tag(in, ip, n, t) || uint64_t(op) + t.len > job.out_len ||
        (t.offset == 0 && ip + t.size + uint64_t(t.len) > n) || t.offset > op) {
      if (lane == 0) status[j] = kSnappyCorrupt;
      return;
    }
    warp_copy_tag(out + op, in + ip + t.size, t.len, t.offset, lane);
    ip += t.size + (t.offset == 0 ? t.len : 0);
    op += t.len;
    __syncwarp();
  }
  if (lane == 0) status[j] = ip == n ? kSnappyFragmented : kSnappyCorrupt;
}

}  // namespace

void launch_snappy_decode(const uint8_t* src, uint8_t* dst, const SnappyJob* jobs, uint32_t n_jobs,
                          uint32_t n_frags, const SnappyScratch& s, SnappyDecode mode,
                          cudaStream_t stream) {
  // Over 48 KiB of dynamic shared memory needs the opt-in; cheap, so set on every call (the
  // attribute is per device, and an encoder may be on any).
  if (mode == SnappyDecode::kGlobal) {
    snappy_decode_windowed_kernel<false>
        <<<n_frags, 32, 0, stream>>>(src, dst, jobs, n_jobs, n_frags, s.frag_ip, s.status);
    GPUTOK_LAUNCHED("snappy_decode_windowed_kernel<global>");
  } else {
    auto decode = mode == SnappyDecode::kWindowed ? snappy_decode_windowed_kernel<true>
                                                  : snappy_decode_tagwise_kernel;
    GPUTOK_CUDA(cudaFuncSetAttribute(decode, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(kSnappyDecodeSmem)));
    decode<<<n_frags, 32, kSnappyDecodeSmem, stream>>>(src, dst, jobs, n_jobs, n_frags, s.frag_ip,
                                                       s.status);
    GPUTOK_LAUNCHED(mode == SnappyDecode::kWindowed ? "snappy_decode_windowed_kernel"
                                                    : "snappy_decode_tagwise_kernel");
  }
}

int launch_snappy_sequential(const uint8_t* src, uint8_t* dst, const SnappyJob* jobs,
                             uint32_t n_jobs, int32_t* status, cudaStream_t stream) {
  if (n_jobs == 0) return 0;
  constexpr uint32_t kWarps = 4;  // per block
  snappy_decode_sequential_kernel<<<(n_jobs + kWarps - 1) / kWarps, kWarps * 32, 0, stream>>>(
      src, dst, jobs, n_jobs, status);
  GPUTOK_LAUNCHED("snappy_decode_sequential_kernel");
  return 1;
}

}  // namespace cuda_detail
}  // namespace gputok
