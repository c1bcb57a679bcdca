// Parquet text column chunks (parquet.h): page headers (Thrift compact protocol), snappy on
// the CPU, and the values' spans (PLAIN, dictionary indices, definition levels).
//
// Performance notes (2026-11-23, the bench corpus in pyarrow 25's default layout, snappy,
// bench/bench_parquet.py): the tag walk is snappy's cost (walking the tags of a 6 MB page
// without copying took 6.4 ms, Arrow's whole decompression 7.6, dev VM). With the fast paths
// in snappy_decompress this reader takes 1.70-1.77 CPU s per GB of text against Arrow's
// 1.99-2.19 (2.24-2.38 before them); it builds no Arrow arrays. On the H200 x2 host's corpus
// run, two GPUs: 4.44 GB/s of text with it, 3.69 with Arrow (docs/benchmarks.md).
#include "parquet.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

#include "gpu_encoder.h"
#include "types.h"

namespace gputok {

namespace {

[[noreturn]] void corrupt(const std::string& what) {
  throw ParquetCorrupt("corrupt Parquet page: " + what);
}

// Thrift compact protocol: just enough to read PageHeader and skip what it does not need.
class Thrift {
 public:
  Thrift(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}
  const uint8_t* pos() const { return p_; }

  uint8_t byte() {
    if (p_ >= end_) corrupt("page header runs past the chunk");
    return *p_++;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = byte();
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    corrupt("varint too long");
  }
  int64_t zigzag() {
    const uint64_t v = varint();
    return int64_t(v >> 1) ^ -int64_t(v & 1);
  }
  // Next field of the current struct: false at its end. `type` is the compact type id.
  bool field(int16_t& id, int& type) {
    const uint8_t h = byte();
    if (h == 0) return false;
    type = h & 0x0F;
    const int delta = h >> 4;
    id = delta ? int16_t(last_ + delta) : int16_t(zigzag());
    last_ = id;
    return true;
  }
  // Structs nest: the field ids restart inside and resume after.
  int16_t enter() {
    const int16_t saved = last_;
    last_ = 0;
    return saved;
  }
  void leave(int16_t saved) { last_ = saved; }

  int64_t integer(int type) {
    if (type < 3 || type > 6) corrupt("expected an integer field");
    return type == 3 ? int64_t(int8_t(byte())) : zigzag();
  }
  void skip(int type, int depth = 0) {
    if (depth > 32) corrupt("nesting too deep");
    switch (type) {
      case 1:  // bool true / false: the value is in the type
      case 2:
        return;
      case 3:
        byte();
        return;
      case 4:
      case 5:
      case 6:
        varint();
        return;
      case 7:
        advance(8);
        return;
      case 8:
        advance(varint());
        return;
      case 9:  // list, set
      case 10: {
        const uint8_t h = byte();
        uint64_t n = h >> 4;
        if (n == 15) n = varint();
        for (uint64_t i = 0; i < n; ++i) skip_element(h & 0x0F, depth);
        return;
      }
      case 11: {  // map
        const uint64_t n = varint();
        if (n == 0) return;
        const uint8_t kv = byte();
        for (uint64_t i = 0; i < n; ++i) {
          skip_element(kv >> 4, depth);
          skip_element(kv & 0x0F, depth);
        }
        return;
      }
      case 12: {
        const int16_t saved = enter();
        int16_t id;
        int t;
        while (field(id, t)) skip(t, depth + 1);
        leave(saved);
        return;
      }
      default:
        corrupt("unknown Thrift type " + std::to_string(type));
    }
  }

 private:
  void skip_element(int type, int depth) {
    if (type == 1 || type == 2) {  // bools inside lists are one byte each
      byte();
      return;
    }
    skip(type, depth + 1);
  }
  void advance(uint64_t n) {
    if (n > uint64_t(end_ - p_)) corrupt("page header runs past the chunk");
    p_ += n;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  int16_t last_ = 0;
};

struct Header {
  int32_t type = -1, uncompressed = -1, compressed = -1;
  int32_t num_values = -1, encoding = -1, def_encoding = -1, num_nulls = -1;
  int32_t def_len = 0, rep_len = 0;
  bool is_compressed = true;
};

int32_t int32_field(Thrift& t, int type) {
  const int64_t v = t.integer(type);
  if (v < INT32_MIN || v > INT32_MAX) corrupt("integer out of range");
  return int32_t(v);
}

// DataPageHeader (5), DictionaryPageHeader (7) or DataPageHeaderV2 (8).
void read_page_header(Thrift& t, int16_t which, Header& h) {
  const int16_t saved = t.enter();
  int16_t id;
  int type;
  while (t.field(id, type)) {
    if (id == 1 && type != 12) {
      h.num_values = int32_field(t, type);
    } else if (which == 5 && id == 2) {
      h.encoding = int32_field(t, type);
    } else if (which == 5 && id == 3) {
      h.def_encoding = int32_field(t, type);
    } else if (which == 7 && id == 2) {
      h.encoding = int32_field(t, type);
    } else if (which == 8 && id == 2) {
      h.num_nulls = int32_field(t, type);
    } else if (which == 8 && id == 4) {
      h.encoding = int32_field(t, type);
    } else if (which == 8 && id == 5) {
      h.def_len = int32_field(t, type);
    } else if (which == 8 && id == 6) {
      h.rep_len = int32_field(t, type);
    } else if (which == 8 && id == 7 && (type == 1 || type == 2)) {
      h.is_compressed = type == 1;
    } else {
      t.skip(type);
    }
  }
  t.leave(saved);
}

Header read_header(Thrift& t) {
  Header h;
  int16_t id;
  int type;
  while (t.field(id, type)) {
    if (id == 1) {
      h.type = int32_field(t, type);
    } else if (id == 2) {
      h.uncompressed = int32_field(t, type);
    } else if (id == 3) {
      h.compressed = int32_field(t, type);
    } else if ((id == 5 || id == 7 || id == 8) && type == 12) {
      read_page_header(t, id, h);
    } else {
      t.skip(type);
    }
  }
  return h;
}

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

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian hosts only (x86-64, aarch64), as Parquet itself is
}

// The RLE / bit-packed hybrid (definition levels, dictionary indices): calls fn(value) for
// the first `count` values of data[0, n).
template <typename Fn>
void rle_hybrid(const uint8_t* data, size_t n, uint32_t bit_width, int64_t count, Fn&& fn) {
  if (bit_width > 32) corrupt("bit width above 32");
  size_t p = 0;
  const size_t value_bytes = (bit_width + 7) / 8;
  const uint64_t mask = bit_width == 32 ? 0xFFFFFFFFull : ((uint64_t(1) << bit_width) - 1);
  while (count > 0) {
    uint64_t h = 0;
    for (int shift = 0;; shift += 7) {
      if (p >= n || shift > 63) corrupt("RLE run header runs past the page");
      h |= uint64_t(data[p] & 0x7F) << shift;
      if (!(data[p++] & 0x80)) break;
    }
    if ((h >> 1) > (uint64_t(1) << 31)) corrupt("RLE run too long");
    if (h & 1) {  // bit-packed: (h >> 1) groups of 8 values
      const uint64_t values = (h >> 1) * 8;
      const uint64_t bytes = (h >> 1) * bit_width;
      // Writers pad the last run to 8 values; a run cut after the values in use is accepted.
      const uint64_t used = (std::min<uint64_t>(values, uint64_t(count)) * bit_width + 7) / 8;
      if (std::min<uint64_t>(bytes, used) > n - p) corrupt("bit-packed run runs past the page");
      const int64_t take = int64_t(std::min<uint64_t>(values, uint64_t(count)));
      for (int64_t i = 0; i < take; ++i) {
        // Value i: bit_width bits from bit (i * bit_width) on, least significant bit first.
        const uint64_t bit = uint64_t(i) * bit_width, first = p + bit / 8;
        uint64_t raw = 0;
        for (size_t k = 0; k <= value_bytes && first + k < n; ++k)
          raw |= uint64_t(data[first + k]) << (8 * k);
        fn(uint32_t((raw >> (bit % 8)) & mask));
      }
      p += size_t(std::min<uint64_t>(bytes, n - p));
      count -= take;
    } else {  // a run of one value
      const uint64_t run = h >> 1;
      if (value_bytes > n - p) corrupt("RLE run runs past the page");
      uint64_t v = 0;
      for (size_t k = 0; k < value_bytes; ++k) v |= uint64_t(data[p + k]) << (8 * k);
      p += value_bytes;
      if (run == 0) corrupt("empty RLE run");
      const int64_t take = int64_t(std::min<uint64_t>(run, uint64_t(count)));
      for (int64_t i = 0; i < take; ++i) fn(uint32_t(v & mask));
      count -= take;
    }
  }
}

// PLAIN BYTE_ARRAY values of data[0, n) at buffer offset `base`: [start, end) pairs.
void plain_spans(const uint8_t* data, size_t n, int64_t base, int64_t count,
                 std::vector<int64_t>& spans) {
  size_t p = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (n - p < 4) corrupt("a PLAIN value's length runs past the page");
    const uint32_t len = load_u32(data + p);
    p += 4;
    if (len > n - p) corrupt("a PLAIN value runs past the page");
    spans.push_back(base + int64_t(p));
    spans.push_back(base + int64_t(p) + len);
    p += len;
  }
}

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

std::vector<int64_t> parquet_spans(const ParquetPlan& plan, const uint8_t* out, int max_def) {
  if (max_def < 0 || max_def > 1) throw ParquetUnsupported("a nested column");
  std::vector<int64_t> spans, dict;
  spans.reserve(size_t(plan.rows) * 2);
  int64_t row = 0;
  for (const ParquetPage& pg : plan.pages) {
    const uint8_t* page = out + pg.out;
    size_t n = size_t(pg.out_size);
    if (pg.type == 2) {
      plain_spans(page, n, pg.out, pg.num_values, dict);
      continue;
    }
    // Definition levels: all must be max_def (a null is an error for a text corpus).
    size_t skip = 0;
    if (max_def > 0) {
      const uint8_t* levels = page;
      size_t levels_n;
      if (pg.type == 3) {
        levels_n = size_t(pg.levels);
        skip = levels_n;
      } else {
        if (n < 4) corrupt("definition levels' length runs past the page");
        levels_n = load_u32(page);
        if (levels_n > n - 4) corrupt("definition levels run past the page");
        levels += 4;
        skip = 4 + levels_n;
      }
      int64_t i = 0;
      rle_hybrid(levels, levels_n, 1, pg.num_values, [&](uint32_t v) {
        if (v != 1) throw ParquetNull(row + i, "row " + std::to_string(row + i) + " is null");
        ++i;
      });
    } else if (pg.type == 3) {
      skip = size_t(pg.levels);
    }
    if (pg.type == 3 && pg.num_nulls > 0 && max_def == 0) corrupt("nulls in a required column");
    page += skip;
    n -= skip;
    const int64_t base = pg.out + int64_t(skip);
    if (pg.encoding == 0) {
      plain_spans(page, n, base, pg.num_values, spans);
    } else {
      if (plan.pages.empty() || plan.pages[0].type != 2)
        corrupt("dictionary-encoded values without a dictionary page");
      if (n < 1) corrupt("dictionary indices lack their bit width");
      const size_t dict_n = dict.size() / 2;
      rle_hybrid(page + 1, n - 1, page[0], pg.num_values, [&](uint32_t v) {
        if (v >= dict_n) corrupt("dictionary index out of range");
        spans.push_back(dict[2 * size_t(v)]);
        spans.push_back(dict[2 * size_t(v) + 1]);
      });
    }
    row += pg.num_values;
  }
  return spans;
}

ParquetValues parquet_decode(const uint8_t* buf, size_t size,
                             const std::vector<ParquetChunkRef>& chunks, ParquetCodec codec,
                             int max_def, GpuEncoder* gpu) {
  if (max_def < 0 || max_def > 1) throw ParquetUnsupported("a nested column");
  // One plan per chunk, its offsets moved to where the chunk lies in `buf` and its pages'
  // output after the previous chunks'; one decompression call for all of them.
  std::vector<ParquetPlan> plans;
  int64_t out_size = 0;
  for (const ParquetChunkRef& c : chunks) {
    if (c.offset < 0 || c.size < 0 || c.offset + c.size > int64_t(size))
      throw ParquetCorrupt("corrupt Parquet page: a chunk lies outside the buffer");
    ParquetPlan plan = parquet_plan(buf + c.offset, size_t(c.size), codec, c.rows);
    for (ParquetPage& pg : plan.pages) {
      pg.body += c.offset;
      pg.out += out_size;
    }
    out_size += plan.out_size;
    plans.push_back(std::move(plan));
  }
  ParquetValues v;
  v.size = size_t(out_size);
  v.data.reset(new uint8_t[v.size ? v.size : 1]);
  std::vector<PageCopy> copies;
  for (const ParquetPlan& plan : plans) {
    const std::vector<PageCopy> c = parquet_copies(plan);
    copies.insert(copies.end(), c.begin(), c.end());
  }
  if (gpu && codec == ParquetCodec::kSnappy)
    gpu->decompress_pages(buf, size, copies, v.data.get(), v.size);
  else
    parquet_decompress_cpu(buf, size, copies, v.data.get());
  int64_t rows_before = 0;
  for (const ParquetPlan& plan : plans) {
    try {
      std::vector<int64_t> spans = parquet_spans(plan, v.data.get(), max_def);
      v.spans.insert(v.spans.end(), spans.begin(), spans.end());
    } catch (const ParquetNull& e) {  // rows count from the first chunk's first row
      throw ParquetNull(rows_before + e.row,
                        "row " + std::to_string(rows_before + e.row) + " is null");
    }
    rows_before += plan.rows;
  }
  return v;
}

}  // namespace gputok
