// Snappy decompression of Parquet pages on the device (kernels.cuh: launch_snappy_*; host side
// in gpu_encoder.cu, GpuEncoder::decompress_pages; CPU twin: parquet.cpp, snappy_decompress,
// and snappy_scan in types.h for the fragment starts).
//
// Snappy is sequential twice over: a tag's position depends on every tag before it, and a
// copy reads what earlier tags wrote. Google's snappy (Arrow's) compresses 64 KiB blocks
// independently, so once it is known where each 64 KiB of output starts in the input, the
// fragments decode in parallel, one warp each, in shared memory. Finding those starts is the
// tag walk, which costs as much as decompressing on a CPU (6.4 vs 7.6 ms for 6 MB on the dev
// VM). One GPU thread walking a 6 MB page took ~0.4 s (the first version: 82 s for 2.7 GB of
// the bench corpus, H200 x2, 2026-11-23). So the walk is split:
//   1. segments: every 4 KiB of input is walked by its own thread as if a tag started there;
//      it records, at each position it visits, the output bytes so far (`cum`), and where
//      its walk leaves the segment. Walks from a wrong start usually fall in step with the
//      true tags within a few tags, like any variable-length code.
//   1b. extend: each walk goes on past its exit until it meets a position a later walk
//      visited, so that walks chain without gaps.
//   2. chain: one thread per stream follows the true tags from segment to segment: where the
//      true position is one the segment's walk visited, it jumps to that walk's (extended)
//      exit in one step; elsewhere it parses one tag. It records each fragment's nearest
//      known (input, output) position before its start.
//   3. starts: one thread per fragment walks from there to the exact start.
//   4. decode: one warp per fragment, into shared memory, then copied out coalesced.
// A stream whose tags or copies cross the 64 KiB fragments (another encoder) is decoded by one
// warp in global memory from start to end (snappy_decode_sequential_kernel): slower, exact.
//
// Within a warp every lane parses the same tag (loads broadcast) and the lanes copy its bytes
// in parallel: byte i of a copy is out[op - offset + i % offset], which reads only bytes
// earlier tags wrote, so overlapping copies need no inner loop; __syncwarp orders one tag's
// stores before the next tag's loads.
//
// Performance notes (2 x H200, 32-core host, 2026-11-23, docs/benchmarks.md "Parquet pages on
// the GPU"): one call of 10-13 MB compressed (5 pages, 300-410 fragments of the bench corpus)
// takes 12.9-16.8 ms from launch to sync: segment walks 1.0 ms, extension 0.04, chain 5.2-8.6,
// fragment starts 0.55, decode 5.1-5.4. A process reads 1.09 GB/s of text this way (Arrow on
// one core: 0.51) at 0.42 CPU s per GB (Arrow: 1.95); corpus workers, 4 per GPU: 1.18 GB/s on
// one GPU, 2.18 on two, against 3.49 for the Arrow path on this host, hence not the default.
// Both the chain (one thread per page, ~4-6 us per hop) and the decode (~450 cycles per tag
// per warp, 1-2 warps per SM) are latency-bound; lane-parallel tag parsing and a
// pointer-jumping chain are the next steps.
#include <cuda_runtime.h>

#include "common.cuh"
#include "kernels.cuh"

namespace gputok {
namespace cuda_detail {

namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;

__device__ __forceinline__ uint32_t find_job(const SnappyJob* jobs, uint32_t n_jobs, uint32_t x,
                                             bool by_seg) {
  uint32_t lo = 0, hi = n_jobs;  // last job whose first index <= x
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) >> 1;
    if ((by_seg ? jobs[mid].seg0 : jobs[mid].frag0) <= x)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// 1. One thread per 4 KiB input segment.
__global__ void snappy_segments_kernel(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                                       uint32_t n_segs, uint32_t* cum, uint32_t* seg_exit,
                                       uint32_t* seg_total) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= n_segs) return;
  const SnappyJob job = jobs[find_job(jobs, n_jobs, g, true)];
  const uint8_t* in = src + job.src;
  const size_t n = job.src_size;
  const size_t s = size_t(job.ip) + size_t(g - job.seg0) * kSnappySegment;
  const size_t e = min(s + kSnappySegment, n);
  uint32_t* c = cum + job.src;  // cum is indexed like the chunk
  size_t p = s;
  uint32_t out = 0;
  while (p < e) {
    c[p] = out;
    SnappyTag t;
    if (!snappy_tag(in, p, n, t)) {
      seg_exit[g] = kNone;  // no usable walk: the chain parses this segment tag by tag
      return;
    }
    p += t.size + (t.offset == 0 ? t.len : 0);
    out += t.len;
  }
  seg_exit[g] = uint32_t(min(p, size_t(0xFFFFFFFEu)));
  seg_total[g] = out;
}

// 1b. One thread per segment: a walk that started on a true tag stays on the true tags, but the
// next segment's walk may fall in step only some tags after the true chain enters it. So each
// walk is extended, tag by tag, from its exit until it reaches a position some later walk
// visited (or the end): the chain then jumps from walk to walk without parsing any tag
// itself. The parsing happens here, in parallel (a few tags per segment), not in the chain.
__global__ void snappy_extend_kernel(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                                     uint32_t n_segs, const uint32_t* cum, uint32_t* seg_exit,
                                     uint32_t* seg_total) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= n_segs) return;
  uint32_t p = seg_exit[g];
  if (p == kNone) return;
  const SnappyJob job = jobs[find_job(jobs, n_jobs, g, true)];
  const uint8_t* in = src + job.src;
  const uint32_t* c = cum + job.src;
  const size_t n = job.src_size;
  uint32_t extra = 0;
  // Bounded: a walk that does not meet another within 64 tags is left where it was (the
  // chain parses on from there).
  for (int k = 0; k < 64 && p < n && c[p] == kNone; ++k) {
    SnappyTag t;
    if (!snappy_tag(in, p, n, t)) return;
    const uint64_t next = uint64_t(p) + t.size + (t.offset == 0 ? t.len : 0);
    if (next > n) return;
    p = uint32_t(next);
    extra += t.len;
  }
  if (p < n && c[p] == kNone) return;
  seg_exit[g] = p;
  seg_total[g] += extra;
}

// 2. One thread per stream. Marks the job corrupt, or records for every fragment f the
// known position (frag_q[f] input, frag_op[f] output) nearest before its start.
__global__ void snappy_chain_kernel(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                                    const uint32_t* cum, const uint32_t* seg_exit,
                                    const uint32_t* seg_total, uint32_t* frag_q, uint32_t* frag_op,
                                    int32_t* status) {
  const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n_jobs) return;
  const SnappyJob job = jobs[j];
  const uint8_t* in = src + job.src;
  const uint32_t* c = cum + job.src;
  const size_t n = job.src_size;
  size_t q = job.ip;
  uint64_t op = 0;
  uint32_t next_frag = 0;  // the first fragment whose start is not yet placed
  const uint32_t n_frags = (job.out_len + kSnappyFragment - 1) / kSnappyFragment;
  while (q < n) {
    const uint32_t g = job.seg0 + uint32_t((q - job.ip) / kSnappySegment);
    const uint32_t ex = seg_exit[g];
    size_t q2;
    uint64_t op2;
    const uint32_t cq = ex != kNone ? c[q] : kNone;
    // c[q] is only meaningful where segment g's walk visited q; a stale value from another
    // call is ruled out because cum is reset per call (the host memsets it).
    if (cq != kNone) {
      q2 = ex;
      op2 = op + (seg_total[g] - cq);
    } else {
      SnappyTag t;
      if (!snappy_tag(in, q, n, t) || (t.offset == 0 && q + t.size + uint64_t(t.len) > n)) {
        status[j] = kSnappyCorrupt;
        return;
      }
      q2 = q + t.size + (t.offset == 0 ? t.len : 0);
      op2 = op + t.len;
    }
    if (op2 > job.out_len || q2 > n) {
      status[j] = kSnappyCorrupt;
      return;
    }
    // Fragments starting in [op, op2) start at or after (q, op).
    while (next_frag < n_frags && uint64_t(next_frag) * kSnappyFragment < op2) {
      frag_q[job.frag0 + next_frag] = uint32_t(q);
      frag_op[job.frag0 + next_frag] = uint32_t(op);
      ++next_frag;
    }
    q = q2;
    op = op2;
  }
  status[j] = op == job.out_len ? kSnappyFragmented : kSnappyCorrupt;
}

// 3. One thread per fragment: from the known position to the tag that starts the fragment.
__global__ void snappy_starts_kernel(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                                     uint32_t n_frags, const uint32_t* frag_q,
                                     const uint32_t* frag_op, uint32_t* frag_ip, int32_t* status) {
  const uint32_t f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= n_frags) return;
  const uint32_t j = find_job(jobs, n_jobs, f, false);
  if (status[j] != kSnappyFragmented) return;
  const SnappyJob job = jobs[j];
  const uint8_t* in = src + job.src;
  const size_t n = job.src_size;
  const uint64_t start = uint64_t(f - job.frag0) * kSnappyFragment;
  size_t q = frag_q[f];
  uint64_t op = frag_op[f];
  while (op < start) {
    SnappyTag t;
    if (q >= n || !snappy_tag(in, q, n, t)) {
      status[j] = kSnappyCorrupt;
      return;
    }
    q += t.size + (t.offset == 0 ? t.len : 0);
    op += t.len;
  }
  if (op != start) {
    status[j] = kSnappySequential;  // a tag straddles the fragment boundary
    return;
  }
  frag_ip[f] = uint32_t(q);
}

// 4. One warp per fragment, decoded in shared memory: the fragment's compressed bytes are
// staged there too (up to kSnappyStage bytes, coalesced), so the tag walk reads shared memory
// instead of waiting on global loads. Per wave of fragments 3.3 -> 2.6 ms, but two blocks fit
// an SM instead of three, so a call's decode time stayed about the same (H200, 2026-11-23).
constexpr uint32_t kSnappyStage = 44u << 10;
constexpr uint32_t kSnappyDecodeSmem = kSnappyFragment + kSnappyStage;

__global__ void snappy_decode_fragments_kernel(const uint8_t* src, uint8_t* dst,
                                               const SnappyJob* jobs, uint32_t n_jobs,
                                               uint32_t n_frags, const uint32_t* frag_ip,
                                               int32_t* status) {
  extern __shared__ uint8_t frag_buf[];  // [0, 64 KiB) output, then the staged input
  uint8_t* staged = frag_buf + kSnappyFragment;
  const uint32_t f = blockIdx.x;
  const uint32_t lane = threadIdx.x;
  if (f >= n_frags) return;
  const uint32_t j = find_job(jobs, n_jobs, f, false);
  if (status[j] != kSnappyFragmented) return;
  const SnappyJob job = jobs[j];
  const size_t n = job.src_size;
  const uint32_t k = f - job.frag0;
  const uint32_t first = k * kSnappyFragment;
  const uint32_t len = min(kSnappyFragment, job.out_len - first);
  const uint32_t n_job_frags = (job.out_len + kSnappyFragment - 1) / kSnappyFragment;
  const size_t ip0 = frag_ip[f];
  const size_t ip_end = k + 1 < n_job_frags ? size_t(frag_ip[f + 1]) : n;
  // The walk reads in[ip0 - base + ...]: staged bytes when they fit, else global memory.
  const uint8_t* in;
  size_t base, in_n;
  if (ip_end > ip0 && ip_end - ip0 <= kSnappyStage) {
    const uint8_t* g = src + job.src + ip0;
    for (uint32_t i = lane; i < ip_end - ip0; i += 32) staged[i] = g[i];
    __syncwarp();
    in = staged;
    base = ip0;
    in_n = ip_end - ip0;
  } else {
    in = src + job.src;
    base = 0;
    in_n = n;
  }
  size_t ip = ip0 - base;
  uint32_t op = 0;
  bool ok = true;
  while (op < len) {
    SnappyTag t;
    if (ip >= in_n || !snappy_tag(in, ip, in_n, t) || op + t.len > len ||
        (t.offset == 0 && ip + t.size + uint64_t(t.len) > in_n) || t.offset > op) {
      ok = false;  // crosses the fragment (or is malformed): the sequential decoder decides
      break;
    }
    if (t.offset == 0) {
      const uint8_t* lit = in + ip + t.size;
      for (uint32_t i = lane; i < t.len; i += 32) frag_buf[op + i] = lit[i];
      ip += t.size + t.len;
    } else {
      const uint32_t from = op - t.offset;
      if (t.offset >= t.len) {
        for (uint32_t i = lane; i < t.len; i += 32) frag_buf[op + i] = frag_buf[from + i];
      } else {
        for (uint32_t i = lane; i < t.len; i += 32)
          frag_buf[op + i] = frag_buf[from + i % t.offset];
      }
      ip += t.size;
    }
    op += t.len;
    __syncwarp();
  }
  if (!ok) {
    if (lane == 0) status[j] = kSnappySequential;
    return;
  }
  uint8_t* out = dst + job.dst + first;
  for (uint32_t i = lane; i < len; i += 32) out[i] = frag_buf[i];
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
    if (t.offset == 0) {
      const uint8_t* lit = in + ip + t.size;
      for (uint32_t i = lane; i < t.len; i += 32) out[op + i] = lit[i];
      ip += t.size + t.len;
    } else {
      const uint8_t* from = out + op - t.offset;
      if (t.offset >= t.len) {
        for (uint32_t i = lane; i < t.len; i += 32) out[op + i] = from[i];
      } else {
        for (uint32_t i = lane; i < t.len; i += 32) out[op + i] = from[i % t.offset];
      }
      ip += t.size;
    }
    op += t.len;
    __syncwarp();
  }
  if (lane == 0) status[j] = ip == n ? kSnappyFragmented : kSnappyCorrupt;
}

}  // namespace

int launch_snappy_fragments(const uint8_t* src, uint8_t* dst, const SnappyJob* jobs,
                            uint32_t n_jobs, uint32_t n_segs, uint32_t n_frags,
                            const SnappyScratch& s, cudaStream_t stream, cudaEvent_t* marks) {
  if (n_jobs == 0) return 0;
  constexpr uint32_t kThreads = 128;
  int mark = 0;
  auto stamp = [&] {
    if (marks) GPUTOK_CUDA(cudaEventRecord(marks[mark++], stream));
  };
  stamp();
  snappy_segments_kernel<<<(n_segs + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      src, jobs, n_jobs, n_segs, s.cum, s.seg_exit, s.seg_total);
  GPUTOK_LAUNCHED("snappy_segments_kernel");
  stamp();
  snappy_extend_kernel<<<(n_segs + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      src, jobs, n_jobs, n_segs, s.cum, s.seg_exit, s.seg_total);
  GPUTOK_LAUNCHED("snappy_extend_kernel");
  stamp();
  snappy_chain_kernel<<<(n_jobs + 31) / 32, 32, 0, stream>>>(
      src, jobs, n_jobs, s.cum, s.seg_exit, s.seg_total, s.frag_q, s.frag_op, s.status);
  GPUTOK_LAUNCHED("snappy_chain_kernel");
  stamp();
  snappy_starts_kernel<<<(n_frags + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      src, jobs, n_jobs, n_frags, s.frag_q, s.frag_op, s.frag_ip, s.status);
  GPUTOK_LAUNCHED("snappy_starts_kernel");
  stamp();
  // Over 48 KiB of dynamic shared memory needs the opt-in; cheap, so set on every call (the
  // attribute is per device, and an encoder may be on any).
  GPUTOK_CUDA(cudaFuncSetAttribute(snappy_decode_fragments_kernel,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(kSnappyDecodeSmem)));
  snappy_decode_fragments_kernel<<<n_frags, 32, kSnappyDecodeSmem, stream>>>(
      src, dst, jobs, n_jobs, n_frags, s.frag_ip, s.status);
  GPUTOK_LAUNCHED("snappy_decode_fragments_kernel");
  stamp();
  return 5;
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
