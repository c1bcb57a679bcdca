// The Thrift compact protocol reader of Parquet's page headers and footer, and the PLAIN value
// reader: private to the corpus tool's Parquet code (parquet.cpp reads pages, parquet_footer.cpp
// the footer and single page headers). Split out of parquet.cpp to keep modules short.
#pragma once

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>

#include "parquet.h"

namespace gputok {
namespace parquet_detail {

[[noreturn]] inline void corrupt(const std::string& what) {
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
  // A list's (or set's) header: its size; `elem` is the elements' compact type.
  uint64_t list(int& elem) {
    const uint8_t h = byte();
    uint64_t n = h >> 4;
    if (n == 15) n = varint();
    elem = h & 0x0F;
    return n;
  }
  std::string binary() {
    const uint64_t n = varint();
    if (n > uint64_t(end_ - p_)) corrupt("a string runs past the footer");
    std::string out(reinterpret_cast<const char*>(p_), size_t(n));
    p_ += n;
    return out;
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

  void skip_element(int type, int depth = 0) {
    if (type == 1 || type == 2) {  // bools inside lists are one byte each
      byte();
      return;
    }
    skip(type, depth + 1);
  }

 private:
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
  int16_t sub = 0;  // which type header was read: 5 data v1, 7 dictionary, 8 data v2
  bool is_compressed = true;
};

inline int32_t int32_field(Thrift& t, int type) {
  const int64_t v = t.integer(type);
  if (v < INT32_MIN || v > INT32_MAX) corrupt("integer out of range");
  return int32_t(v);
}

// DataPageHeader (5), DictionaryPageHeader (7) or DataPageHeaderV2 (8).
inline void read_page_header(Thrift& t, int16_t which, Header& h) {
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

inline Header read_header(Thrift& t) {
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
      h.sub = id;
    } else {
      t.skip(type);
    }
  }
  return h;
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian hosts only (x86-64, aarch64), as Parquet itself is
}

// A PLAIN BYTE_ARRAY value at data[p]: its length, with p moved past it.
inline uint32_t plain_value(const uint8_t* data, size_t n, size_t& p) {
  if (n - p < 4) corrupt("a PLAIN value's length runs past the page");
  const uint32_t len = load_u32(data + p);
  p += 4;
  if (len > n - p) corrupt("a PLAIN value runs past the page");
  p += len;
  return len;
}

}  // namespace parquet_detail
}  // namespace gputok
