// How a large GPU call is cut into chunks and put back together, in plain C++ so that the
// same code runs under a CPU twin (encode_chunked_cpu) in tests on machines with no GPU.
//
//   plan_chunks   segments -> units (a segment longer than a chunk is cut at is_safe_split
//                 positions, which keeps every piece and therefore every id) -> chunks of at
//                 most `chunk_bytes` bytes of whole units
//   run_chunks    drives the chunks through `lanes` in flight: chunk k is submitted (staged,
//                 uploaded, launched) while chunk k - lanes is collected and stitched, so one
//                 chunk's host work overlaps the others' transfers and kernels
//   stitch_chunk  appends a chunk's ids to the call's output and the ends of the segments
//                 the chunk closes
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "gpu_encoder.h"

namespace gputok {

class ThreadPool;
class Encoder;

struct ChunkUnit {
  size_t seg;
  size_t begin, end;  // byte range inside the segment
  bool last;          // closes its segment
};

struct ChunkPlan {
  std::vector<ChunkUnit> units;
  std::vector<size_t> first{0};  // chunk k is units[first[k], first[k + 1])
  size_t total_bytes = 0;
  size_t max_chunk_bytes = 0;  // the largest chunk's bytes and units: what a lane must hold
  size_t max_chunk_units = 0;
  size_t chunks() const { return first.size() - 1; }
  size_t chunk_bytes(size_t k) const;
};

// Cuts `segments` into chunks of at most `chunk_bytes` bytes (a unit with no safe split
// within reach may exceed it; it then is a chunk of its own). Every segment yields at least
// one unit, the last of which has `last` set, so empty segments still get their end.
ChunkPlan plan_chunks(const std::vector<std::string_view>& segments, size_t chunk_bytes);

// A collected chunk: its `total` ids and, per unit, the ids before the unit's end.
struct ChunkIds {
  const int32_t* ids = nullptr;
  uint32_t total = 0;
  const uint32_t* unit_ends = nullptr;
};

// Appends chunk `r` (of units[0, n_units)) to `out` (int32, or uint16 with the segments'
// shifts: GpuOutput) and pushes the end of every segment it closes to `ends`. The output
// grows by parallel copies when it must (a vector's own growth moves the ids on one thread);
// `huge`: a new block of 32 MB or more is advised to use transparent huge pages.
void stitch_chunk(ThreadPool* pool, const ChunkIds& r, const ChunkUnit* units, size_t n_units,
                  GpuOutput& out, std::vector<int64_t>& ends, bool huge);

// Room in `out` for about `bytes` more bytes of text (half an id per byte: GPT-2 text is
// 0.2-0.45), so that a call's later chunks do not move its earlier ids.
void reserve_output(ThreadPool* pool, GpuOutput& out, size_t bytes, int64_t last_shift, bool huge);

// Threads for one host copy of `bytes` on `pool` (1: the caller alone).
size_t copy_threads_for(const ThreadPool* pool, size_t bytes);

struct ChunkStages {
  std::function<void(size_t lane, size_t chunk)> submit;       // lane is free
  std::function<ChunkIds(size_t lane, size_t chunk)> collect;  // waits for that chunk
  std::function<void()> drain;  // on an error: waits for everything in flight
};

// Runs every chunk of `plan` through submit/collect with up to `lanes` in flight (1: one
// at a time), stitching them in order into `out` and `ends`.
void run_chunks(const ChunkPlan& plan, size_t lanes, const ChunkStages& stages, ThreadPool* pool,
                GpuOutput& out, std::vector<int64_t>& ends, bool huge);

// The CPU twin of GpuEncoder::encode: the same plan, lanes (each a thread) and stitching,
// each chunk's units encoded by the CPU encoder. Tests compare it with a whole-text encode.
void encode_chunked_cpu(const Encoder& encoder, const std::vector<std::string_view>& segments,
                        size_t chunk_bytes, size_t lanes, GpuOutput& out,
                        std::vector<int64_t>& ends);

}  // namespace gputok
