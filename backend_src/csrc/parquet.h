// Parquet column chunks of text -> one buffer of decompressed pages + a [start, end) span per
// row, for the corpus reader. Only what a text column needs is read here: a flat BYTE_ARRAY
// column (no repetition), PLAIN or dictionary-encoded values, data pages v1 and v2,
// uncompressed or snappy. Anything else raises ParquetUnsupported and the caller reads the
// chunk with Arrow instead.
//
// Why not Arrow: on the corpus hosts Parquet decoding was ~60% of a GPU worker's host CPU
// (2.9 of ~5 CPU s per GB of text, H200 host, 2026-11-23), snappy alone ~1.2 s of it. Here the
// pages can be decompressed on the GPU (GpuEncoder::decompress_pages), and the values are
// never copied: the spans point into the decompressed pages, which the tokenizer reads as
// they are (a dictionary-encoded row points into the dictionary page).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gputok {

class ParquetUnsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ParquetCorrupt : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A null value in row `row` of the chunk.
class ParquetNull : public std::runtime_error {
 public:
  ParquetNull(int64_t row_, const std::string& what) : std::runtime_error(what), row(row_) {}
  int64_t row;
};

enum class ParquetCodec { kUncompressed, kSnappy };

struct ParquetPage {
  int32_t type = 0;        // 0 data v1, 2 dictionary, 3 data v2 (index pages are skipped)
  int32_t encoding = 0;    // of the values: 0 PLAIN, 2 PLAIN_DICTIONARY, 8 RLE_DICTIONARY
  int32_t num_values = 0;  // rows (nulls included)
  int32_t num_nulls = -1;  // v2 only
  int32_t levels = 0;      // v2: level bytes, stored uncompressed before the values
  bool compressed = false;
  int64_t body = 0;       // offset of the page body in the chunk
  int64_t body_size = 0;  // compressed_page_size
  int64_t out = 0;        // offset of the decompressed page in the output buffer
  int64_t out_size = 0;   // uncompressed_page_size
};

// The chunk's pages, in order, and the output buffer's size. Reads only the page headers.
struct ParquetPlan {
  std::vector<ParquetPage> pages;
  int64_t out_size = 0;
  int64_t rows = 0;
};

// `chunk` holds the whole column chunk (from the dictionary page, or the first data page,
// for total_compressed_size bytes); `rows` is the chunk's num_values from the metadata.
ParquetPlan parquet_plan(const uint8_t* chunk, size_t size, ParquetCodec codec, int64_t rows);

// A piece of work for the decompressor: src[0, src_size) -> dst[0, dst_size), raw snappy
// (with its length varint) or a plain copy. Offsets are into the chunk and the output.
struct PageCopy {
  int64_t src, src_size, dst, dst_size;
  bool snappy;
};
std::vector<PageCopy> parquet_copies(const ParquetPlan& plan);

// Runs `copies` of buf[0, size) into `out` on this thread (the CPU path, and the GPU
// kernels' twin).
void parquet_decompress_cpu(const uint8_t* buf, size_t size, const std::vector<PageCopy>& copies,
                            uint8_t* out);

// Sequential snappy decoder: src (with the length varint) -> dst of exactly dst_size bytes.
void snappy_decompress(const uint8_t* src, size_t n, uint8_t* dst, size_t dst_size);

// [start, end) of every row's value in `out` (the decompressed pages), 2 per row. max_def is
// the column's maximum definition level (0: required, 1: optional); a null raises ParquetNull.
std::vector<int64_t> parquet_spans(const ParquetPlan& plan, const uint8_t* out, int max_def);

// The whole of it, for one or more column chunks lying in buf[0, size): plan, decompress (on
// `gpu` when given, all chunks' pages in one call, else on this thread), spans (the chunks'
// rows in order). `data` holds the pages.
class GpuEncoder;
struct ParquetChunkRef {
  int64_t offset, size, rows;  // where the chunk lies in the buffer; its num_values
};
struct ParquetValues {
  std::unique_ptr<uint8_t[]> data;  // the decompressed pages (not zero-filled first)
  size_t size = 0;
  std::vector<int64_t> spans;  // 2 per row, into data
};
ParquetValues parquet_decode(const uint8_t* buf, size_t size,
                             const std::vector<ParquetChunkRef>& chunks, ParquetCodec codec,
                             int max_def, GpuEncoder* gpu);

}  // namespace gputok
