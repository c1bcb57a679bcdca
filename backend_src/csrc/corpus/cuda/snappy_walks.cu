// The tag walk of the GPU snappy decode (the overview: parquet.cu): where each 64 KiB fragment
// of a stream's output starts in its input, found by parallel walks from every 512-byte
// segment (1, 1b), chained by pointer jumping (2; the serial chain, 2b, where it cannot), then
// walked to each fragment's first tag (3).
#include <cuda_runtime.h>

#include "cuda/common.cuh"
#include "snappy_stages.cuh"

namespace gputok {
namespace cuda_detail {

namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;
// A job whose walks do not chain (pointer jumping found a gap): the serial chain decides.
constexpr int32_t kSnappyChainPending = 2;

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

constexpr uint32_t kThreads = 128;

}  // namespace

void launch_snappy_segments(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                            uint32_t n_segs, uint32_t seg_shift, const SnappyScratch& s,
                            cudaStream_t stream) {
  snappy_segments_kernel<<<(n_segs + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      src, jobs, n_jobs, n_segs, seg_shift, s.cum, s.seg_exit, s.seg_total);
  GPUTOK_LAUNCHED("snappy_segments_kernel");
}

void launch_snappy_extend(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                          uint32_t n_segs, const SnappyScratch& s, cudaStream_t stream) {
  snappy_extend_kernel<<<(n_segs + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      src, jobs, n_jobs, n_segs, s.cum, s.seg_exit, s.seg_total);
  GPUTOK_LAUNCHED("snappy_extend_kernel");
}

void launch_snappy_jumps(const SnappyJob* jobs, uint32_t n_jobs, uint32_t n_segs, uint32_t levels,
                         uint32_t seg_shift, const SnappyScratch& s, cudaStream_t stream) {
  const uint32_t seg_blocks = (n_segs + kThreads - 1) / kThreads;
  snappy_jump_init_kernel<<<seg_blocks, kThreads, 0, stream>>>(
      jobs, n_jobs, n_segs, seg_shift, s.cum, s.seg_exit, s.seg_total, s.jump, s.weight, s.valid);
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
}

void launch_snappy_chain(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                         uint32_t seg_shift, const SnappyScratch& s, cudaStream_t stream) {
  snappy_chain_kernel<<<(n_jobs + 31) / 32, 32, 0, stream>>>(
      src, jobs, n_jobs, seg_shift, s.cum, s.seg_exit, s.seg_total, s.frag_q, s.frag_op, s.status);
  GPUTOK_LAUNCHED("snappy_chain_kernel");
}

void launch_snappy_starts(const uint8_t* src, const SnappyJob* jobs, uint32_t n_jobs,
                          uint32_t n_frags, const SnappyScratch& s, cudaStream_t stream) {
  snappy_starts_kernel<<<(n_frags + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      src, jobs, n_jobs, n_frags, s.frag_q, s.frag_op, s.frag_ip, s.status);
  GPUTOK_LAUNCHED("snappy_starts_kernel");
}

}  // namespace cuda_detail
}  // namespace gputok
