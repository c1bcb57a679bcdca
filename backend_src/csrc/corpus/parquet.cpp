// Parquet text column chunks (parquet.h): page headers (Thrift compact protocol), snappy on
// the CPU, and the values' spans (PLAIN, dictionary indices, definition levels).
//
// Performance notes (2026-11-23, the bench corpus in pyarrow 25's default layout, snappy,
// bench/bench_parquet.py): the tag walk is snappy's cost (walking the tags of a 6 MB page
// without copying took 6.4 ms, Arrow's whole decompression 7.6, dev VM). With the fast paths
// in snappy_decompress this reader takes 1.70-1.77 CPU s per GB of text against Arrow's
// 1.99-2.19 (2.24-2.38 before them); it builds no Arrow arrays. On the H200 x2 host's corpus
// run, two GPUs: 4.44 GB/s of text with it, 3.69 with Arrow
// (bench/results/2026-11-25-benchmarks-history.md).
#include "parquet.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

#include "parquet_thrift.h"
#include "snappy.h"

namespace gputok {

namespace {
using namespace parquet_detail;

const char* encoding_name(int32_t e) {
  switch (e) {
    case 0:
      return "PLAIN";
    case 2:
      return "PLAIN_DICTIONARY";
    case 3:
      return "RLE";
    case 4:
      return "BIT_PACKED";
    case 5:
      return "DELTA_BINARY_PACKED";
    case 6:
      return "DELTA_LENGTH_BYTE_ARRAY";
    case 7:
      return "DELTA_BYTE_ARRAY";
    case 8:
      return "RLE_DICTIONARY";
    case 9:
      return "BYTE_STREAM_SPLIT";
    default:
      return "an unknown encoding";
  }
}

// The RLE / bit-packed hybrid (definition levels, dictionary indices) of data[0, n), read a
// run at a time: a repeated run of any length costs one step, so a 9 KB page that repeats one
// index 2^28 times is checked in microseconds and handed on a batch at a time.
class RleHybrid {
 public:
  void reset(const uint8_t* data, size_t n, uint32_t bit_width, int64_t count) {
    if (bit_width > 32) corrupt("bit width above 32");
    data_ = data;
    n_ = n;
    p_ = 0;
    bw_ = bit_width;
    value_bytes_ = (bit_width + 7) / 8;
    mask_ = bit_width == 32 ? 0xFFFFFFFFull : ((uint64_t(1) << bit_width) - 1);
    count_ = count;
    left_ = 0;
  }
  // The next value and how many equal values follow from it on (a repeated run's rest, else
  // 1). Only while values are left of `count`.
  void peek(uint32_t& value, int64_t& k) {
    if (left_ == 0) load();
    if (!packed_) {
      value = value_;
      k = left_;
      return;
    }
    // bw_ bits from bit bit_ on of the run, least significant bit first; bytes past the page
    // (a last run cut after the values in use) read as 0.
    const uint64_t first = run_ + bit_ / 8;
    uint64_t raw = 0;
    for (size_t j = 0; j <= value_bytes_ && first + j < n_; ++j)
      raw |= uint64_t(data_[first + j]) << (8 * j);
    value = uint32_t((raw >> (bit_ % 8)) & mask_);
    k = 1;
  }
  void skip(int64_t k) {  // k <= what peek gave
    left_ -= k;
    count_ -= k;
    if (packed_) bit_ += uint64_t(k) * bw_;
  }

 private:
  void load() {
    if (count_ <= 0) corrupt("RLE values past the page's count");
    uint64_t h = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ >= n_ || shift > 63) corrupt("RLE run header runs past the page");
      h |= uint64_t(data_[p_] & 0x7F) << shift;
      if (!(data_[p_++] & 0x80)) break;
    }
    if ((h >> 1) > (uint64_t(1) << 31)) corrupt("RLE run too long");
    packed_ = h & 1;
    if (packed_) {  // (h >> 1) groups of 8 values
      const uint64_t values = (h >> 1) * 8, bytes = (h >> 1) * bw_;
      const uint64_t take = std::min<uint64_t>(values, uint64_t(count_));
      // Writers pad the last run to 8 values; a run cut after the values in use is accepted.
      const uint64_t used = (take * bw_ + 7) / 8;
      if (std::min<uint64_t>(bytes, used) > n_ - p_) corrupt("bit-packed run runs past the page");
      if (take == 0) corrupt("empty bit-packed run");
      run_ = p_;
      bit_ = 0;
      p_ += size_t(std::min<uint64_t>(bytes, n_ - p_));
      left_ = int64_t(take);
    } else {  // a run of one value
      const uint64_t run = h >> 1;
      if (value_bytes_ > n_ - p_) corrupt("RLE run runs past the page");
      uint64_t v = 0;
      for (size_t j = 0; j < value_bytes_; ++j) v |= uint64_t(data_[p_ + j]) << (8 * j);
      p_ += value_bytes_;
      if (run == 0) corrupt("empty RLE run");
      value_ = uint32_t(v & mask_);
      left_ = int64_t(std::min<uint64_t>(run, uint64_t(count_)));
    }
  }

  const uint8_t* data_ = nullptr;
  size_t n_ = 0, p_ = 0, run_ = 0, value_bytes_ = 0;
  uint32_t bw_ = 0, value_ = 0;
  uint64_t mask_ = 0, bit_ = 0;
  int64_t count_ = 0, left_ = 0;  // values still to give: in all, in the current run
  bool packed_ = false;
};

}  // namespace

ParquetPlan parquet_plan(const uint8_t* chunk, size_t size, ParquetCodec codec, int64_t rows) {
  ParquetPlan plan;
  const uint8_t* p = chunk;
  const uint8_t* end = chunk + size;
  int64_t values = 0;
  while (p < end && values < rows) {
    Thrift t(p, end);
    const Header h = read_header(t);
    p = t.pos();
    if (h.type < 0 || h.compressed < 0 || h.uncompressed < 0) corrupt("page header lacks sizes");
    // A page's type and its type header must agree: a DATA_PAGE carrying only a v2 header
    // was read here as the v2 page it held, while Arrow read it as no rows at all.
    if ((h.type == 0 && h.sub != 5) || (h.type == 2 && h.sub != 7) || (h.type == 3 && h.sub != 8))
      corrupt("page type " + std::to_string(h.type) + " without its header");
    if (h.compressed > end - p) corrupt("page body runs past the chunk");
    const uint8_t* body = p;
    p += h.compressed;
    if (h.type == 1) continue;  // index page: nothing for us
    if (h.type != 0 && h.type != 2 && h.type != 3)
      throw ParquetUnsupported("page type " + std::to_string(h.type));
    if (h.num_values < 0) corrupt("page header lacks num_values");
    ParquetPage pg;
    pg.type = h.type;
    pg.encoding = h.encoding;
    pg.num_values = h.num_values;
    pg.body = body - chunk;
    pg.body_size = h.compressed;
    pg.out = plan.out_size;
    pg.out_size = h.uncompressed;
    if (h.type == 2) {
      if (!plan.pages.empty()) corrupt("dictionary page after the first page");
      if (h.encoding != 0 && h.encoding != 2)
        throw ParquetUnsupported(std::string("dictionary page encoding ") +
                                 encoding_name(h.encoding));
    } else {
      if (h.encoding != 0 && h.encoding != 2 && h.encoding != 8)
        throw ParquetUnsupported(std::string("value encoding ") + encoding_name(h.encoding));
      if (h.type == 0 && h.def_encoding != -1 && h.def_encoding != 3)
        throw ParquetUnsupported(std::string("definition level encoding ") +
                                 encoding_name(h.def_encoding));
      if (h.type == 3) {
        if (h.rep_len != 0) throw ParquetUnsupported("repetition levels (a nested column)");
        if (h.def_len < 0 || h.def_len > h.compressed || h.def_len > h.uncompressed)
          corrupt("level lengths exceed the page");
        pg.levels = h.def_len;
        pg.num_nulls = h.num_nulls;
      }
      values += h.num_values;
    }
    pg.compressed = codec == ParquetCodec::kSnappy && (h.type != 3 || h.is_compressed);
    if (!pg.compressed && h.compressed != h.uncompressed)
      corrupt("an uncompressed page's sizes differ");
    // Snappy expands at most ~21x (a 3-byte tag copies 64 bytes): a larger claim is a corrupt
    // header, refused before the output buffer is allocated for it.
    if (pg.compressed && int64_t(h.uncompressed) > 24 * int64_t(h.compressed) + 64)
      corrupt("uncompressed size " + std::to_string(h.uncompressed) + " is impossible");
    plan.out_size += pg.out_size;
    plan.pages.push_back(pg);
  }
  if (values != rows)
    corrupt("the pages hold " + std::to_string(values) + " values, the metadata says " +
            std::to_string(rows));
  plan.rows = rows;
  return plan;
}

std::vector<PageCopy> parquet_copies(const ParquetPlan& plan) {
  std::vector<PageCopy> copies;
  copies.reserve(plan.pages.size() + 1);
  for (const ParquetPage& pg : plan.pages) {
    if (pg.levels)  // v2 levels: stored as they are
      copies.push_back({pg.body, pg.levels, pg.out, pg.levels, false});
    copies.push_back({pg.body + pg.levels, pg.body_size - pg.levels, pg.out + pg.levels,
                      pg.out_size - pg.levels, pg.compressed});
  }
  return copies;
}

void snappy_decompress(const uint8_t* src, size_t n, uint8_t* dst, size_t dst_size) {
  uint32_t length = 0, hdr = 0;
  if (!snappy_length(src, n, length, hdr)) corrupt("bad snappy length");
  if (length != dst_size)
    corrupt("snappy length " + std::to_string(length) + " differs from the page's " +
            std::to_string(dst_size));
  size_t ip = hdr, op = 0;
  while (ip < n) {
    // Fast paths for the common tags, away from both buffers' ends: fixed-size copies the
    // compiler turns into a few wide loads and stores, writing past the tag's output (later
    // tags overwrite it). A literal of up to 16 bytes copies 16, up to 60 copies 64; a copy
    // with offset >= 8 goes 8 bytes at a time, each 8 reading only bytes already final. The
    // page reader's CPU cost per GB of text: 2.24 -> 1.66 s (Arrow: 2.0), 2-core dev VM,
    // bench/bench_parquet.py, 2026-11-23.
    const uint32_t tag = src[ip];
    if (ip + 65 <= n && op + 80 <= dst_size) {
      if ((tag & 3) == 0 && tag < (60 << 2)) {  // a literal of 1-60 bytes: 16 or 64 copied
        const uint32_t len = (tag >> 2) + 1;
        if (len <= 16)
          std::memcpy(dst + op, src + ip + 1, 16);
        else
          std::memcpy(dst + op, src + ip + 1, 64);
        ip += 1 + len;
        op += len;
        continue;
      }
      if ((tag & 3) != 0 && (tag & 3) != 3) {
        uint32_t len, off;
        if ((tag & 3) == 1) {
          len = 4 + ((tag >> 2) & 7);
          off = ((tag >> 5) << 8) | src[ip + 1];
        } else {
          len = (tag >> 2) + 1;
          off = uint32_t(src[ip + 1]) | (uint32_t(src[ip + 2]) << 8);
        }
        if (off >= 8 && off <= op) {
          uint8_t* d = dst + op;
          for (uint32_t k = 0; k < len; k += 8) std::memcpy(d + k, d + k - off, 8);
          ip += (tag & 3) == 1 ? 2 : 3;
          op += len;
          continue;
        }
      }
    }
    SnappyTag t;
    if (!snappy_tag(src, ip, n, t)) corrupt("bad snappy tag");
    if (op + t.len > dst_size) corrupt("snappy output overruns the page");
    if (t.offset == 0) {
      if (ip + t.size + size_t(t.len) > n) corrupt("snappy literal overruns the input");
      std::memcpy(dst + op, src + ip + t.size, t.len);
      ip += t.size + t.len;
    } else {
      if (t.offset > op) corrupt("snappy copy before the start");
      uint8_t* d = dst + op;
      const uint8_t* s = d - t.offset;
      if (t.offset >= t.len) {
        std::memcpy(d, s, t.len);
      } else {
        for (uint32_t i = 0; i < t.len; ++i) d[i] = s[i];  // overlapping: a repeating pattern
      }
      ip += t.size;
    }
    op += t.len;
  }
  if (op != dst_size) corrupt("snappy output is short");
}

void parquet_decompress_cpu(const uint8_t* buf, size_t size, const std::vector<PageCopy>& copies,
                            uint8_t* out) {
  for (const PageCopy& c : copies) {
    if (c.src < 0 || c.src + c.src_size > int64_t(size)) corrupt("page body outside the chunk");
    if (c.snappy)
      snappy_decompress(buf + c.src, size_t(c.src_size), out + c.dst, size_t(c.dst_size));
    else
      std::memcpy(out + c.dst, buf + c.src, size_t(c.src_size));
  }
}

// ------------------------------------------------------------------ the rows' spans

struct ParquetSpanCursor::State {
  explicit State(const ParquetValues& v_) : v(v_) {}
  const ParquetValues& v;
  size_t plan = 0, page = 0;  // the next page to open
  int64_t row = 0, left = 0;  // rows handed on; values left in the open page
  bool has_dict = false, dict_values = false;
  std::vector<uint32_t> dict;  // [start, end) per entry, from the dictionary page's start
  int64_t dict_base = 0;
  const uint8_t* page_data = nullptr;  // PLAIN: the values, from `base` in the pages
  size_t page_n = 0, page_p = 0;
  int64_t base = 0;
  RleHybrid idx;

  void read_dictionary(const ParquetPage& pg) {
    const uint8_t* d = v.data.get() + pg.out;
    const size_t n = size_t(pg.out_size);
    dict.clear();
    size_t p = 0;
    for (int32_t i = 0; i < pg.num_values; ++i) {  // 8 bytes per entry of >= 4 bytes
      const uint32_t len = plain_value(d, n, p);
      dict.push_back(uint32_t(p - len));
      dict.push_back(uint32_t(p));
    }
    dict_base = pg.out;
    has_dict = true;
  }

  // Definition levels: all must be max_def (a null is an error for a text corpus). Returns
  // the bytes they take before the values.
  size_t check_levels(const ParquetPage& pg, const uint8_t* page, size_t n) {
    if (v.max_def == 0) {
      if (pg.type == 3 && pg.num_nulls > 0) corrupt("nulls in a required column");
      return pg.type == 3 ? size_t(pg.levels) : 0;
    }
    const uint8_t* levels = page;
    size_t levels_n, skip;
    if (pg.type == 3) {
      levels_n = skip = size_t(pg.levels);
    } else {
      if (n < 4) corrupt("definition levels' length runs past the page");
      levels_n = load_u32(page);
      if (levels_n > n - 4) corrupt("definition levels run past the page");
      levels += 4;
      skip = 4 + levels_n;
    }
    RleHybrid lv;
    lv.reset(levels, levels_n, 1, pg.num_values);
    for (int64_t i = 0; i < pg.num_values;) {
      uint32_t value;
      int64_t k;
      lv.peek(value, k);
      if (value != 1) throw ParquetNull(row + i, "row " + std::to_string(row + i) + " is null");
      k = std::min<int64_t>(k, pg.num_values - i);
      lv.skip(k);
      i += k;
    }
    return skip;
  }

  // Opens the next data page with values; false at the end of the last chunk.
  bool open_page() {
    while (plan < v.plans.size()) {
      const ParquetPlan& pl = v.plans[plan];
      if (page >= pl.pages.size()) {
        ++plan;
        page = 0;
        has_dict = false;
        continue;
      }
      const ParquetPage& pg = pl.pages[page++];
      if (pg.type == 2) {
        read_dictionary(pg);
        continue;
      }
      const uint8_t* d = v.data.get() + pg.out;
      size_t n = size_t(pg.out_size);
      const size_t skip = check_levels(pg, d, n);
      d += skip;
      n -= skip;
      dict_values = pg.encoding != 0;
      if (dict_values) {
        if (!has_dict) corrupt("dictionary-encoded values without a dictionary page");
        if (n < 1) corrupt("dictionary indices lack their bit width");
        idx.reset(d + 1, n - 1, d[0], pg.num_values);
      }
      page_data = d;
      page_n = n;
      page_p = 0;
      base = pg.out + int64_t(skip);
      left = pg.num_values;
      if (left > 0) return true;
    }
    return false;
  }

  // Up to max_rows rows (and, max_bytes > 0, until their text reaches it); appended to `out`
  // unless it is null. Returns the rows taken.
  int64_t take(int64_t max_rows, int64_t max_bytes, std::vector<int64_t>* out) {
    int64_t got = 0, bytes = 0;
    while (got < max_rows && (max_bytes <= 0 || bytes < max_bytes)) {
      if (left == 0 && !open_page()) break;
      if (!dict_values) {
        const uint32_t len = plain_value(page_data, page_n, page_p);
        if (out) {
          out->push_back(base + int64_t(page_p - len));
          out->push_back(base + int64_t(page_p));
        }
        bytes += len;
        --left;
        ++got;
        ++row;
        continue;
      }
      uint32_t value;
      int64_t k;
      idx.peek(value, k);
      if (value >= dict.size() / 2) corrupt("dictionary index out of range");
      const int64_t a = dict_base + dict[2 * size_t(value)];
      const int64_t len = int64_t(dict[2 * size_t(value) + 1]) - int64_t(dict[2 * size_t(value)]);
      k = std::min({k, left, max_rows - got});
      if (max_bytes > 0 && len > 0) k = std::min(k, (max_bytes - bytes + len - 1) / len);
      if (out)
        for (int64_t i = 0; i < k; ++i) {
          out->push_back(a);
          out->push_back(a + len);
        }
      idx.skip(k);
      bytes += k * len;
      left -= k;
      got += k;
      row += k;
    }
    return got;
  }
};

ParquetSpanCursor::ParquetSpanCursor(const ParquetValues& v) : s_(new State(v)) {}
ParquetSpanCursor::~ParquetSpanCursor() = default;
int64_t ParquetSpanCursor::row() const { return s_->row; }
int64_t ParquetSpanCursor::check_rest() { return s_->take(INT64_MAX, 0, nullptr); }

bool ParquetSpanCursor::next(int64_t max_rows, int64_t max_bytes, std::vector<int64_t>& spans) {
  if (max_rows < 1) throw std::invalid_argument("max_rows must be >= 1");
  return s_->take(max_rows, max_bytes, &spans) > 0;
}

ParquetValues parquet_decode(const uint8_t* buf, size_t size,
                             const std::vector<ParquetChunkRef>& chunks, ParquetCodec codec,
                             int max_def, int64_t max_out, PageDecompressor* gpu) {
  if (max_def < 0 || max_def > 1) throw ParquetUnsupported("a nested column");
  // One plan per chunk, its offsets moved to where the chunk lies in `buf` and its pages'
  // output after the previous chunks'; one decompression call for all of them.
  ParquetValues v;
  v.max_def = max_def;
  int64_t out_size = 0;
  for (const ParquetChunkRef& c : chunks) {
    if (c.offset < 0 || c.size < 0 || c.rows < 0 || c.offset > int64_t(size) ||
        c.size > int64_t(size) - c.offset)
      throw ParquetCorrupt("corrupt Parquet page: a chunk lies outside the buffer");
    ParquetPlan plan = parquet_plan(buf + c.offset, size_t(c.size), codec, c.rows);
    for (ParquetPage& pg : plan.pages) {
      pg.body += c.offset;
      pg.out += out_size;
    }
    // Each chunk's pages are at most ~25x its bytes, so the sum stays far from overflow
    // while it is checked after every chunk.
    out_size += plan.out_size;
    if (max_out >= 0 && out_size > max_out)
      throw ParquetUnsupported("the pages decompress to over " + std::to_string(max_out) +
                               " bytes, the reader's budget");
    v.rows += plan.rows;
    v.plans.push_back(std::move(plan));
  }
  v.size = size_t(out_size);
  v.data.reset(new uint8_t[v.size ? v.size : 1]);
  std::vector<PageCopy> copies;
  for (const ParquetPlan& plan : v.plans) {
    const std::vector<PageCopy> c = parquet_copies(plan);
    copies.insert(copies.end(), c.begin(), c.end());
  }
  if (gpu && codec == ParquetCodec::kSnappy)
    gpu->decompress(buf, size, copies, v.data.get(), v.size);
  else
    parquet_decompress_cpu(buf, size, copies, v.data.get());
  // Every row checked now, none kept: a malformed page fails here, before a batch is handed
  // on (the caller can still read the chunks with Arrow instead), and in O(runs) for RLE.
  ParquetSpanCursor(v).check_rest();
  return v;
}

}  // namespace gputok
