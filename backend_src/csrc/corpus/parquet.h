// Parquet column chunks of text -> one buffer of decompressed pages + a [start, end) span per
// row, for the corpus reader. Only what a text column needs is read here: a flat BYTE_ARRAY
// column (no repetition), PLAIN or dictionary-encoded values, data pages v1 and v2,
// uncompressed or snappy. Anything else raises ParquetUnsupported and the caller reads the
// chunk with Arrow instead.
//
// Why not Arrow: on the corpus hosts Parquet decoding was ~60% of a GPU worker's host CPU
// (2.9 of ~5 CPU s per GB of text, H200 host, 2026-11-23), snappy alone ~1.2 s of it. Here the
// pages can be decompressed on the GPU (GpuPageDecoder, gpu_page_decoder.h), and the values are
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

// Runs a decode's copies of buf[0, size) into out[0, out_size): the GPU's page decoder
// (gpu_page_decoder.h) is one. Throws ParquetCorrupt for a malformed stream.
class PageDecompressor {
 public:
  virtual ~PageDecompressor() = default;
  virtual void decompress(const uint8_t* buf, size_t size, const std::vector<PageCopy>& copies,
                          uint8_t* out, size_t out_size) = 0;
};

// The whole of it, for one or more column chunks lying in buf[0, size): plan, decompress (on
// `gpu` when given, all chunks' pages in one call, else on this thread), and check every row's
// value (lengths, dictionary indices, definition levels) without keeping its span: a file
// that fails does so here, before any row is handed on. Spans then come a batch at a time
// (ParquetSpanCursor), so that memory is bounded per batch, not per row group: a 9 KB file
// whose RLE run repeats one dictionary index 2^28 times holds 2^28 rows at 16 bytes each.
struct ParquetChunkRef {
  int64_t offset, size, rows;  // where the chunk lies in the buffer; its num_values
};
struct ParquetValues {
  std::shared_ptr<uint8_t[]> data;  // the decompressed pages (not zero-filled first)
  size_t size = 0;
  std::vector<ParquetPlan> plans;  // one per chunk, offsets into data (ParquetPage::out)
  int max_def = 0;
  int64_t rows = 0;  // all chunks' rows
};
// `max_out`: the most bytes of decompressed pages the caller allows (the page headers claim
// the sizes; a larger claim raises ParquetUnsupported before anything is allocated).
ParquetValues parquet_decode(const uint8_t* buf, size_t size,
                             const std::vector<ParquetChunkRef>& chunks, ParquetCodec codec,
                             int max_def, int64_t max_out, PageDecompressor* gpu);

// The rows' [start, end) spans into ParquetValues::data, in order, a batch at a time. Holds
// `v` by reference: the caller keeps it alive.
class ParquetSpanCursor {
 public:
  explicit ParquetSpanCursor(const ParquetValues& v);
  ~ParquetSpanCursor();
  ParquetSpanCursor(const ParquetSpanCursor&) = delete;
  ParquetSpanCursor& operator=(const ParquetSpanCursor&) = delete;
  // Appends 2 entries per row to `spans`: at most `max_rows` rows, and no more once their
  // text reaches `max_bytes` (at least one row when any is left). False when none was left.
  bool next(int64_t max_rows, int64_t max_bytes, std::vector<int64_t>& spans);
  int64_t row() const;  // rows handed on so far
  // Reads every row left without keeping its span (the decode's check); returns their count.
  int64_t check_rest();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// One column chunk's metadata, read from the file's footer (FileMetaData, Thrift compact),
// for row group `row_group` and leaf column `leaf`. Parsed here rather than through pyarrow's
// ColumnChunkMetaData: for a footer whose column says REQUIRED where its pages carry levels,
// pyarrow 25 throws parquet::ParquetException through a noexcept accessor and the process
// aborts.
struct ParquetColumnChunkMeta {
  int64_t rg_rows = 0, rg_bytes = 0;  // the row group's num_rows, total_byte_size
  int32_t codec = -1;                 // CompressionCodec: 0 UNCOMPRESSED, 1 SNAPPY, ...
  int32_t type = -1;                  // physical type: 6 BYTE_ARRAY
  int64_t num_values = -1, compressed = -1, data_page_offset = -1;
  int64_t dictionary_page_offset = -1;  // -1: none
  std::string path;                     // path_in_schema joined with "."
};
struct ParquetFooter {
  int64_t num_rows = 0;
  std::vector<ParquetColumnChunkMeta> chunks;  // one per row group, column `leaf`
};
// What the footer's schema says of one top-level column, for a reader that opens a file
// without pyarrow (corpus/parquet.py): the top-level names (a missing column's message lists
// them) and, where `column` is a top-level leaf, its leaf index and its element's fields.
struct ParquetColumnSchema {
  std::vector<std::string> names;  // the root's children, in order
  int32_t leaf = -1;               // `column`'s index among the schema's leaves; -1: none
  int32_t type = -1;               // its physical type (6: BYTE_ARRAY)
  int32_t repetition = -1;         // 0 REQUIRED, 1 OPTIONAL, 2 REPEATED
  int32_t converted = -1;          // ConvertedType (0: UTF8); -1: none
  int32_t logical = -1;            // LogicalType's member (1: STRING); -1: none
};
// ParquetCorrupt for a footer or schema that cannot be read (a child count past the list).
ParquetColumnSchema parquet_schema(const uint8_t* footer, size_t n, const std::string& column);
// A column the page reader takes without asking pyarrow: a top-level BYTE_ARRAY leaf, REQUIRED
// or OPTIONAL, with no converted or logical type but UTF8 / STRING (others, DECIMAL or JSON
// say, are what pyarrow's schema decides on).
bool parquet_plain_string(const ParquetColumnSchema& s);

// One Parquet file's column `column` through the page reader in one call (parquet_file.cpp):
// read (`values`, the file's size, the rows its footer claims, its row groups' total_byte_size)
// where the footer says a plain string column whose chunks (one codec it reads, inside the
// file, at most `group_limit` compressed bytes in all) the page reader takes, with `max_out`
// bytes for compressed and decompressed pages together, and a footer claiming at most
// `max_rows` rows (-1: any); else not read (`read` false: the caller's own reader decides, and
// names what is wrong). ParquetNull for a null value.
struct ParquetFileRead {
  bool read = false;
  ParquetValues values;
  int64_t size = 0, rows_claimed = 0, rg_bytes = 0;
};
ParquetFileRead parquet_read_file(const std::string& path, const std::string& column,
                                  int64_t group_limit, int64_t max_out, int64_t max_rows);

// What a page header claims, for a caller that only bounds a column chunk it hands to Arrow
// (any codec, any encoding): Arrow allocates what a header claims and materialises a record
// batch of dictionary values before either can be measured, so a 462-byte zstd file (one
// 512 KB dictionary value, 100,000 rows) took 3.0-3.5 GiB.
struct ParquetPageHeader {
  int32_t type = -1, uncompressed = -1, compressed = -1;
  int32_t num_values = -1, encoding = -1;  // -1 where the page's type header lacks them
  int64_t header_size = 0;                 // bytes of buf the header took
};
// The page header at buf[0, n). ParquetCorrupt when it is not one or runs past n bytes.
ParquetPageHeader parquet_page_header(const uint8_t* buf, size_t n);
// The longest value of a decompressed PLAIN BYTE_ARRAY page of `num_values` values (a
// dictionary page); ParquetCorrupt when one runs past the page.
int64_t parquet_plain_max_length(const uint8_t* page, size_t n, int64_t num_values);

// `footer`: the FileMetaData bytes (before the 4-byte length and "PAR1"). Raises
// ParquetCorrupt for a footer that cannot be read, ParquetUnsupported for an encrypted or
// external column chunk.
ParquetFooter parquet_footer(const uint8_t* footer, size_t n, int leaf);

}  // namespace gputok
