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
// Steps 1-3 are in snappy_walks.cu, 4 and the sequential decode in snappy_decode.cu; this file
// runs them in order (launch_snappy_fragments), with the profile's marks between them.
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
#include "snappy_stages.cuh"

namespace gputok {
namespace cuda_detail {

int launch_snappy_fragments(const uint8_t* src, uint8_t* dst, const SnappyJob* jobs,
                            uint32_t n_jobs, uint32_t n_segs, uint32_t n_frags, uint32_t levels,
                            const SnappyScratch& s, SnappyOptions o, cudaStream_t stream,
                            cudaEvent_t* marks) {
  if (n_jobs == 0) return 0;
  int mark = 0;
  auto stamp = [&] {
    if (marks) GPUTOK_CUDA(cudaEventRecord(marks[mark++], stream));
  };
  stamp();
  if (n_segs == 0) {  // only streams with no tags: the serial chain reports them
    for (int k = 0; k < 3; ++k) stamp();
    launch_snappy_chain(src, jobs, n_jobs, o.seg_shift, s, stream);
    for (int k = 0; k < 3; ++k) stamp();
    return 1;
  }
  launch_snappy_segments(src, jobs, n_jobs, n_segs, o.seg_shift, s, stream);
  stamp();
  launch_snappy_extend(src, jobs, n_jobs, n_segs, s, stream);
  stamp();
  launch_snappy_jumps(jobs, n_jobs, n_segs, levels, o.seg_shift, s, stream);
  stamp();
  launch_snappy_chain(src, jobs, n_jobs, o.seg_shift, s, stream);
  stamp();
  launch_snappy_starts(src, jobs, n_jobs, n_frags, s, stream);
  stamp();
  launch_snappy_decode(src, dst, jobs, n_jobs, n_frags, s, o.decode, stream);
  stamp();
  return 7 + 2 * int(levels);
}

}  // namespace cuda_detail
}  // namespace gputok
