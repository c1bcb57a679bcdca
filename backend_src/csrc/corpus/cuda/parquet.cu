// Snappy decompression of Parquet pages on the device (snappy_kernels.cuh: launch_snappy_*; host
// side in gpu_page_decoder.cu, GpuPageDecoder::decompress; CPU twin: parquet.cpp,
// snappy_decompress, which the tests hold the GPU's output to, byte for byte).
//
// Snappy is sequential twice over: a tag's position depends on every tag before it, and a
// copy reads what earlier tags wrote. Google's snappy (Arrow's) compresses 64 KiB blocks
// independently, so once it is known where each 64 KiB of output starts in the input, the
// fragments decode in parallel, one warp each, in shared memory. Finding those starts is the
// tag walk, which costs as much as decompressing on a CPU (6.4 vs 7.6 ms for 6 MB on the dev
// VM). One GPU thread walking a 6 MB page took ~0.4 s (the first version: 82 s for 2.7 GB of
// the bench corpus, H200 x2, 2026-11-23). So the walk is split:
//   1. segments: every 512 bytes of input (2^SnappyOptions::seg_shift) is walked by its own
//      thread as if a tag started there; it records, at each position it visits, the output
//      bytes so far (`cum`), and where its walk leaves the segment. Walks from a wrong start
//      usually fall in step with the true tags within a few tags, like any variable-length code.
//   1b. extend: each walk goes on past its exit until it meets a position a later walk
//      visited, so that walks chain without gaps.
//   2. chain: pointer jumping over the walks finds the true chain from segment to segment
//      (a serial chain, one thread per stream, is the fallback) and places each fragment's
//      nearest known (input, output) position before its start.
//   3. starts: one thread per fragment walks from there to the exact start.
//   4. decode: one warp per fragment, into shared memory, then copied out coalesced. The
//      lanes parse 32 input bytes at once ("windowed", below); the older decode, every lane
//      on the same tag, and one straight into the output are kept as the ablations
//      PageDecoderOptions::decode "tagwise" and "global".
// A stream whose tags or copies cross the 64 KiB fragments (another encoder) is decoded by one
// warp in global memory from start to end (snappy_decode_sequential_kernel): slower, exact.
//
// Performance notes (H200, 2026-11-24, bench/bench_parquet.py, PageDecoderOptions::profile; one
// call of 9-13 MB compressed, 5 pages, 285-414 fragments of the bench corpus;
// bench/results/2026-11-25-benchmarks-history.md "snappy on the GPU, windowed and concurrent"):
// launch to sync 2.6-3.8 ms, from 6.5-9.6 (2026-11-23):
//   - segments of 512 bytes instead of 4 KiB: walks 1.0 -> 0.15 ms, extension 0.7 -> 0.15,
//     fragment starts 0.7 -> 0.1 (jumps 0.06 -> 0.08); 1 KiB and 2 KiB lie between;
//   - the windowed decode: 3.15 -> 1.25-1.29 ms for ~300 fragments (5.3 -> 2.3 for 414, two
//     waves at three 64 KiB blocks per SM). Its first version took 1.94: the branch-free tag
//     parse (snappy_tag_of) and one copy path for every kind of tag halved the warp's
//     divergence (1.49); output offsets summed during the chain walk and unrolled lane copies
//     took it to 1.25-1.29.
//     Per warp it is still latency-bound (ncu: 7.5 cycles per issued instruction, 2 warps per
//     SM; a call has only ~300 fragments), so decodes from different threads run at once on
//     streams of their own (gpu_page_decoder.cu, DecodeSlot). Decoding straight into the output
//     instead of shared memory (PageDecoderOptions::decode "global": no limit of 3 blocks an SM)
//     made a fragment slower (1.9 ms for ~300 against 1.5, before the last two changes) and the
//     corpus the same (3.46 vs 3.41 GB/s).
// One process (85 MB of text in 4 files): 2.4-2.9 GB/s at 0.35-0.43 CPU s per GB (Arrow on
// one core: 0.40-0.54). Corpus workers, 4 per GPU, one H200 and its 16-core host, 2.7 GB in 128
// shards: 3.31-3.46 GB/s with the pages decoded on the GPU against 2.22-2.34 with the page
// reader on the CPU (61-67% against 73% of the host busy), which is why GPU workers decode on
// the GPU by default ("auto"). The GPU is then the bound.
#include <cuda_runtime.h>

#include "cuda/common.cuh"
#include "snappy_kernels.cuh"

namespace gputok {
namespace cuda_detail {

namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;
// A job whose walks do not chain (pointer jumping found a gap): the serial chain decides.
constexpr int32_t kSnappyChainPending = 2;

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

// 1. One thread per input segment (2^seg_shift bytes).
__global__ void snappy_segments_kernel(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                                       uint32_t n_segs, uint32_t seg_shift, uint32_t* cum,
                                       uint32_t* seg_exit, uint32_t* seg_total) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= n_segs) return;
  const SnappyJob job = jobs[find_job(jobs, n_jobs, g, true)];
  const uint8_t* in = src + job.src;
  const size_t n = job.src_size;
  const size_t s = size_t(job.ip) + (size_t(g - job.seg0) << seg_shift);
  const size_t e = min(s + (size_t(1) << seg_shift), n);
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
  // Unbounded: a walk left short of the next one leaves a gap that sends the whole page to
  // the serial chain (with a 64-tag bound every page went there: bench corpus, H200,
  // 2026-11-23). The walks that need many tags are few, and they run in parallel.
  while (p < n && c[p] == kNone) {
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

// 2. The chain by pointer jumping. Node g stands for the (extended) exit x_g of segment g's
// walk. Where the true chain enters a segment at a position its walk visited, it next reaches
// that walk's exit; and every exit lies on a position a later walk visited (extend). So from
// the first walk on (which starts on the true first tag), the true chain is the path
// g -> seg_of(x_g) -> ..., with weight (output bytes) total[h] - cum[x_g] per hop. Doubling
// gives every node its output to the end of the stream in log2(segments) rounds; the nodes
// reachable from the first one are marked top-down; each marked node then places the
// fragments that start within its hop. A gap (a walk that failed, an exit no walk visited)
// leaves the job to the serial chain (2b).
__global__ void snappy_jump_init_kernel(const SnappyJob* jobs, uint32_t n_jobs, uint32_t n_segs,
                                        uint32_t seg_shift, const uint32_t* cum,
                                        const uint32_t* seg_exit, const uint32_t* seg_total,
                                        uint32_t* jump, uint32_t* weight, uint8_t* valid) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= n_segs) return;
  const SnappyJob job = jobs[find_job(jobs, n_jobs, g, true)];
  const uint32_t x = seg_exit[g];
  uint32_t next = kNone, w = 0;
  bool ok = x != kNone && x <= job.src_size;
  if (ok && x < job.src_size) {
    const uint32_t h = job.seg0 + ((x - job.ip) >> seg_shift);
    const uint32_t cx = cum[job.src + x];
    ok = cx != kNone && seg_exit[h] != kNone;
    if (ok) {
      next = h;
      w = seg_total[h] - cx;
    }
  }
  jump[g] = ok ? next : kNone;
  weight[g] = ok ? w : 0;
  valid[g] = ok;
}

// One doubling round: level r from level r - 1 (arrays of n_segs per level).
__global__ void snappy_jump_double_kernel(uint32_t n_segs, uint32_t* jump, uint32_t* weight,
                                          uint8_t* valid, uint32_t r) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= n_segs) return;
  const size_t a = size_t(r - 1) * n_segs, b = size_t(r) * n_segs;
  const uint32_t nx = jump[a + g];
  if (nx == kNone) {
    jump[b + g] = kNone;
    weight[b + g] = weight[a + g];
    valid[b + g] = valid[a + g];
  } else {
    jump[b + g] = jump[a + nx];
    weight[b + g] = weight[a + g] + weight[a + nx];
    valid[b + g] = valid[a + g] & valid[a + nx];
  }
}

// One thread per job: is the path from the first walk's exit whole and of the right length?
__global__ void snappy_jump_check_kernel(const SnappyJob* jobs, uint32_t n_jobs, uint32_t n_segs,
                                         uint32_t levels, const uint32_t* seg_exit,
                                         const uint32_t* seg_total, const uint32_t* weight,
                                         const uint8_t* valid, uint8_t* on, int32_t* status) {
  const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n_jobs) return;
  const SnappyJob job = jobs[j];
  const uint32_t segs = j + 1 < n_jobs ? jobs[j + 1].seg0 - job.seg0 : n_segs - job.seg0;
  const uint32_t g0 = job.seg0;
  const size_t top = size_t(levels) * n_segs;
  const bool ok = segs > 0 && seg_exit[g0] != kNone && valid[top + g0] &&
                  uint64_t(seg_total[g0]) + weight[top + g0] == job.out_len;
  status[j] = ok ? kSnappyFragmented : kSnappyChainPending;
  if (ok) on[g0] = 1;
}

// Marks the nodes 2^r hops on from every marked node (levels from the top down: every node
// on the path gets marked; a node marked early within a round only marks more path nodes).
__global__ void snappy_jump_mark_kernel(uint32_t n_segs, const uint32_t* jump, uint8_t* on,
                                        uint32_t r) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= n_segs || !on[g]) return;
  const uint32_t nx = jump[size_t(r) * n_segs + g];
  if (nx != kNone) on[nx] = 1;
}

// Each marked node: the fragments starting within its hop [op(x_g), op(x_g) + weight) start
// at or after (x_g, op(x_g)); the first node also places those before its exit (from ip).
__global__ void snappy_jump_assign_kernel(const SnappyJob* jobs, uint32_t n_jobs, uint32_t n_segs,
                                          uint32_t levels, const uint32_t* seg_exit,
                                          const uint32_t* seg_total, const uint32_t* weight,
                                          const uint8_t* on, const int32_t* status,
                                          uint32_t* frag_q, uint32_t* frag_op) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= n_segs || !on[g]) return;
  const uint32_t j = find_job(jobs, n_jobs, g, true);
  if (status[j] != kSnappyFragmented) return;
  const SnappyJob job = jobs[j];
  const uint64_t op = uint64_t(job.out_len) - weight[size_t(levels) * n_segs + g];
  const uint64_t end = op + weight[g];
  const uint32_t n_frags = (job.out_len + kSnappyFragment - 1) / kSnappyFragment;
  auto place = [&](uint64_t lo, uint64_t hi, uint32_t q, uint32_t at) {
    for (uint64_t k = (lo + kSnappyFragment - 1) / kSnappyFragment;
         k < n_frags && k * kSnappyFragment < hi; ++k) {
      frag_q[job.frag0 + k] = q;
      frag_op[job.frag0 + k] = at;
    }
  };
  place(op, end, seg_exit[g], uint32_t(op));
  if (g == job.seg0) place(0, seg_total[g], job.ip, 0);
}

// 2b. One thread per job that pointer jumping left pending. Marks the job corrupt, or
// records for every fragment f the known position (frag_q[f] input, frag_op[f] output)
// nearest before its start, hopping walk to walk where it can and parsing tags where not.
__global__ void snappy_chain_kernel(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                                    uint32_t seg_shift, const uint32_t* cum,
                                    const uint32_t* seg_exit, const uint32_t* seg_total,
                                    uint32_t* frag_q, uint32_t* frag_op, int32_t* status) {
  const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n_jobs || status[j] != kSnappyChainPending) return;
  const SnappyJob job = jobs[j];
  const uint8_t* in = src + job.src;
  const uint32_t* c = cum + job.src;
  const size_t n = job.src_size;
  size_t q = job.ip;
  uint64_t op = 0;
  uint32_t next_frag = 0;  // the first fragment whose start is not yet placed
  const uint32_t n_frags = (job.out_len + kSnappyFragment - 1) / kSnappyFragment;
  while (q < n) {
    const uint32_t g = job.seg0 + uint32_t((q - job.ip) >> seg_shift);
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

int launch_snappy_fragments(const uint8_t* src, uint8_t* dst, const SnappyJob* jobs,
                            uint32_t n_jobs, uint32_t n_segs, uint32_t n_frags, uint32_t levels,
                            const SnappyScratch& s, SnappyOptions o, cudaStream_t stream,
                            cudaEvent_t* marks) {
  if (n_jobs == 0) return 0;
  constexpr uint32_t kThreads = 128;
  int mark = 0;
  auto stamp = [&] {
    if (marks) GPUTOK_CUDA(cudaEventRecord(marks[mark++], stream));
  };
  stamp();
  if (n_segs == 0) {  // only streams with no tags: the serial chain reports them
    for (int k = 0; k < 3; ++k) stamp();
    snappy_chain_kernel<<<(n_jobs + 31) / 32, 32, 0, stream>>>(src, jobs, n_jobs, o.seg_shift,
                                                               s.cum, s.seg_exit, s.seg_total,
                                                               s.frag_q, s.frag_op, s.status);
    GPUTOK_LAUNCHED("snappy_chain_kernel");
    for (int k = 0; k < 3; ++k) stamp();
    return 1;
  }
  snappy_segments_kernel<<<(n_segs + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      src, jobs, n_jobs, n_segs, o.seg_shift, s.cum, s.seg_exit, s.seg_total);
  GPUTOK_LAUNCHED("snappy_segments_kernel");
  stamp();
  snappy_extend_kernel<<<(n_segs + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      src, jobs, n_jobs, n_segs, s.cum, s.seg_exit, s.seg_total);
  GPUTOK_LAUNCHED("snappy_extend_kernel");
  stamp();
  const uint32_t seg_blocks = (n_segs + kThreads - 1) / kThreads;
  snappy_jump_init_kernel<<<seg_blocks, kThreads, 0, stream>>>(
      jobs, n_jobs, n_segs, o.seg_shift, s.cum, s.seg_exit, s.seg_total, s.jump, s.weight, s.valid);
  GPUTOK_LAUNCHED("snappy_jump_init_kernel");
  for (uint32_t r = 1; r <= levels; ++r) {
    snappy_jump_double_kernel<<<seg_blocks, kThreads, 0, stream>>>(n_segs, s.jump, s.weight,
                                                                   s.valid, r);
    GPUTOK_LAUNCHED("snappy_jump_double_kernel");
  }
  snappy_jump_check_kernel<<<(n_jobs + 31) / 32, 32, 0, stream>>>(
      jobs, n_jobs, n_segs, levels, s.seg_exit, s.seg_total, s.weight, s.valid, s.on, s.status);
  GPUTOK_LAUNCHED("snappy_jump_check_kernel");
  for (uint32_t r = levels; r-- > 0;) {
    snappy_jump_mark_kernel<<<seg_blocks, kThreads, 0, stream>>>(n_segs, s.jump, s.on, r);
    GPUTOK_LAUNCHED("snappy_jump_mark_kernel");
  }
  snappy_jump_assign_kernel<<<seg_blocks, kThreads, 0, stream>>>(
      jobs, n_jobs, n_segs, levels, s.seg_exit, s.seg_total, s.weight, s.on, s.status, s.frag_q,
      s.frag_op);
  GPUTOK_LAUNCHED("snappy_jump_assign_kernel");
  stamp();
  snappy_chain_kernel<<<(n_jobs + 31) / 32, 32, 0, stream>>>(src, jobs, n_jobs, o.seg_shift, s.cum,
                                                             s.seg_exit, s.seg_total, s.frag_q,
                                                             s.frag_op, s.status);
  GPUTOK_LAUNCHED("snappy_chain_kernel");
  stamp();
  snappy_starts_kernel<<<(n_frags + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      src, jobs, n_jobs, n_frags, s.frag_q, s.frag_op, s.frag_ip, s.status);
  GPUTOK_LAUNCHED("snappy_starts_kernel");
  stamp();
  // Over 48 KiB of dynamic shared memory needs the opt-in; cheap, so set on every call (the
  // attribute is per device, and an encoder may be on any).
  if (o.decode == SnappyDecode::kGlobal) {
    snappy_decode_windowed_kernel<false>
        <<<n_frags, 32, 0, stream>>>(src, dst, jobs, n_jobs, n_frags, s.frag_ip, s.status);
    GPUTOK_LAUNCHED("snappy_decode_windowed_kernel<global>");
  } else {
    auto decode = o.decode == SnappyDecode::kWindowed ? snappy_decode_windowed_kernel<true>
                                                      : snappy_decode_tagwise_kernel;
    GPUTOK_CUDA(cudaFuncSetAttribute(decode, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(kSnappyDecodeSmem)));
    decode<<<n_frags, 32, kSnappyDecodeSmem, stream>>>(src, dst, jobs, n_jobs, n_frags, s.frag_ip,
                                                       s.status);
    GPUTOK_LAUNCHED(o.decode == SnappyDecode::kWindowed ? "snappy_decode_windowed_kernel"
                                                        : "snappy_decode_tagwise_kernel");
  }
  stamp();
  return 7 + 2 * int(levels);
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
