// Performance notes (2026-11-28; bench/results/2026-11-28-corpus-startup-h100.md):
// - One thread on the bench corpus's 90 MB of JSONL (an escape every 18 bytes: \n, \", \u):
//   470 MB/s on the H100 host, where Arrow's reader took 0.32-0.38 s of CPU on 16 cores
//   (690-1,300 MB/s); 930-960 MB/s on the dev VM, 510-730 before plain runs were scanned 8
//   bytes a step (run<>).
// - Whole `gputok corpus` commands, 1 GB of JSONL, H100 host, medians of 3 alternated rounds,
//   Arrow's reader -> this one: 1 MB shards 2.52 -> 1.99 s, 4 MB 1.97 -> 1.80; 20 MB 1.46 ->
//   1.51 and 100 MB 1.76 -> 1.75 (alone, each shard on one thread: no gain, within noise).
#include "read_jsonl.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "../huge_pages.h"
#include "../utf8.h"
#include "read_files.h"

namespace gputok {

namespace {

// Python's int() refuses more digits than this (sys.int_info.default_max_str_digits), so
// json.loads raises on such a number: a longer integer is handed back undecided.
constexpr size_t kMaxIntDigits = 4300;

bool plain_string_byte(uint8_t c) { return c != '"' && c != '\\' && c >= 0x20; }

// Eight bytes at a time, the first that ends a plain run ('"', '\\', or below 0x20): in the
// mask, each such byte's high bit; the lowest set bit is exact (a borrow only runs upward
// from a byte that matches). plain_string_byte is its byte-at-a-time twin.
constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
uint64_t has_zero_byte(uint64_t v) { return (v - kOnes) & ~v & kHigh; }
uint64_t run_end_mask(uint64_t x) {
  return has_zero_byte(x ^ (kOnes * '"')) | has_zero_byte(x ^ (kOnes * '\\')) |
         ((x - kOnes * 0x20) & ~x & kHigh);
}
constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// An escape's one byte, by the letter after the backslash (0: not a one-byte escape).
struct EscapeTable {
  uint8_t simple[256] = {};
  uint8_t hex[256];  // a hex digit's value, else 0xFF
  constexpr EscapeTable() : hex() {
    for (int i = 0; i < 256; ++i) hex[i] = 0xFF;
    for (int i = 0; i < 10; ++i) hex['0' + i] = uint8_t(i);
    for (int i = 0; i < 6; ++i) hex['a' + i] = hex['A' + i] = uint8_t(10 + i);
    simple['"'] = '"';
    simple['\\'] = '\\';
    simple['/'] = '/';
    simple['b'] = '\b';
    simple['f'] = '\f';
    simple['n'] = '\n';
    simple['r'] = '\r';
    simple['t'] = '\t';
  }
};
constexpr EscapeTable kEscapes;

size_t put_utf8(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = uint8_t(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = uint8_t(0xC0 | (cp >> 6));
    out[1] = uint8_t(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = uint8_t(0xE0 | (cp >> 12));
    out[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
    out[2] = uint8_t(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = uint8_t(0xF0 | (cp >> 18));
  out[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
  out[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
  out[3] = uint8_t(0x80 | (cp & 0x3F));
  return 4;
}

// One file's records, parsed in place: r_ reads, w_ writes the documents' text over bytes
// already read (every output byte comes from at least one input byte, so w_ <= r_). Every
// method returns false where json.loads might not agree; r_ then says where.
class Parser {
 public:
  Parser(uint8_t* buf, size_t n, const std::string& field) : p_(buf), n_(n), field_(field) {}

  bool file(std::vector<int64_t>& spans) {
    while (r_ < n_) {
      ws();
      if (r_ == n_) break;
      if (p_[r_] == '\n') {  // a blank line
        ++r_;
        continue;
      }
      if (!record(spans)) return false;
      ws();
      if (r_ == n_) break;
      if (p_[r_] != '\n') return false;
      ++r_;
    }
    return true;
  }
  size_t at() const { return r_; }
  size_t written() const { return w_; }

 private:
  // JSON's whitespace but the newline, which ends a record (the reference reads lines).
  void ws() {
    while (r_ < n_ && (p_[r_] == ' ' || p_[r_] == '\t' || p_[r_] == '\r')) ++r_;
  }
  bool eat(uint8_t c) {
    if (r_ < n_ && p_[r_] == c) {
      ++r_;
      return true;
    }
    return false;
  }

  bool record(std::vector<int64_t>& spans) {
    if (!eat('{')) return false;
    ws();
    bool seen = false;
    if (eat('}')) return false;  // no field
    for (;;) {
      bool is_field = false;
      if (!key(is_field)) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (is_field) {
        if (seen) return false;  // json.loads keeps the last: left to the reference
        seen = true;
        const size_t start = w_;
        if (!eat('"') || !string<true>()) return false;
        spans.push_back(int64_t(start));
        spans.push_back(int64_t(w_));
      } else if (!value(1)) {
        return false;
      }
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      if (eat('}')) return seen;
      return false;
    }
  }

  // A key, and whether it is the field: compared as it is, or, where it has an escape, once
  // decoded (json.loads compares decoded keys).
  bool key(bool& is_field) {
    if (!eat('"')) return false;
    const size_t a = r_;
    while (r_ < n_ && plain_string_byte(p_[r_])) ++r_;
    if (r_ < n_ && p_[r_] == '"') {
      is_field = r_ - a == field_.size() && std::memcmp(p_ + a, field_.data(), field_.size()) == 0;
      ++r_;
      return true;
    }
    key_.assign(p_ + a, p_ + r_);
    for (;;) {
      if (r_ >= n_ || p_[r_] < 0x20) return false;
      if (p_[r_++] == '"') break;
      uint8_t c[4];
      size_t len = 0;
      if (!escape(c, len)) return false;
      key_.append(c, c + len);
      const size_t b = r_;
      while (r_ < n_ && plain_string_byte(p_[r_])) ++r_;
      key_.append(p_ + b, p_ + r_);
    }
    is_field =
        key_.size() == field_.size() && std::memcmp(key_.data(), field_.data(), field_.size()) == 0;
    return true;
  }

  bool value(int depth) {
    if (r_ >= n_) return false;
    switch (p_[r_]) {
      case '"':
        ++r_;
        return string<false>();
      case '{':
        return depth < kJsonlMaxDepth && object(depth + 1);
      case '[':
        return depth < kJsonlMaxDepth && array(depth + 1);
      case 't':
        return literal("true", 4);
      case 'f':
        return literal("false", 5);
      case 'n':
        return literal("null", 4);
      default:
        return number();
    }
  }

  bool object(int depth) {
    ++r_;
    ws();
    if (eat('}')) return true;
    for (;;) {
      if (!eat('"') || !string<false>()) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (!value(depth)) return false;
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      return eat('}');
    }
  }

  bool array(int depth) {
    ++r_;
    ws();
    if (eat(']')) return true;
    for (;;) {
      if (!value(depth)) return false;
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      return eat(']');
    }
  }

  bool literal(const char* word, size_t len) {
    if (n_ - r_ < len || std::memcmp(p_ + r_, word, len) != 0) return false;
    r_ += len;
    return true;
  }

  bool digits() {
    const size_t a = r_;
    while (r_ < n_ && p_[r_] >= '0' && p_[r_] <= '9') ++r_;
    return r_ > a;
  }

  // JSON's number grammar (json.loads's, less NaN and Infinity).
  bool number() {
    eat('-');
    if (r_ >= n_) return false;
    const size_t a = r_;
    if (p_[r_] == '0') {
      ++r_;
    } else if (p_[r_] >= '1' && p_[r_] <= '9') {
      digits();
    } else {
      return false;
    }
    bool integer = true;
    if (eat('.')) {
      integer = false;
      if (!digits()) return false;
    }
    if (r_ < n_ && (p_[r_] == 'e' || p_[r_] == 'E')) {
      integer = false;
      ++r_;
      if (r_ < n_ && (p_[r_] == '+' || p_[r_] == '-')) ++r_;
      if (!digits()) return false;
    }
    return !integer || r_ - a <= kMaxIntDigits;
  }

  bool hex4(uint32_t& v) {
    if (n_ - r_ < 4) return false;
    const uint8_t* h = p_ + r_;
    const uint32_t d0 = kEscapes.hex[h[0]], d1 = kEscapes.hex[h[1]], d2 = kEscapes.hex[h[2]],
                   d3 = kEscapes.hex[h[3]];
    if ((d0 | d1 | d2 | d3) > 0xF) return false;
    v = d0 << 12 | d1 << 8 | d2 << 4 | d3;
    r_ += 4;
    return true;
  }

  // A \u escape after its "\u": the code point, a surrogate pair joined; a lone surrogate
  // (json.loads keeps it, UTF-8 cannot) is undecided.
  bool unicode_escape(uint32_t& cp) {
    if (!hex4(cp)) return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return false;
    if (cp < 0xD800 || cp > 0xDBFF) return true;
    if (n_ - r_ < 2 || p_[r_] != '\\' || p_[r_ + 1] != 'u') return false;
    r_ += 2;
    uint32_t lo;
    if (!hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    return true;
  }

  // An escape after its backslash: its UTF-8 (1-4 bytes) in out, len of them.
  bool escape(uint8_t* out, size_t& len) {
    if (r_ >= n_) return false;
    const uint8_t e = p_[r_++];
    len = 1;
    if (kEscapes.simple[e] != 0) {
      out[0] = kEscapes.simple[e];
      return true;
    }
    uint32_t cp = 0;
    if (e != 'u' || !unicode_escape(cp)) return false;
    len = put_utf8(cp, out);
    return true;
  }

  // A string after its opening quote, to its closing one; with Out, its text written at w_:
  // a plain byte's 1 from its 1, an escape's 1-4 bytes from its 2-12, so w_ stays <= r_.
  // The escape is decoded here, not by escape() (the keys' decoder): through escape() the
  // bench corpus's 90 MB ran at 958-978 MB/s against 1,038-1,051 (dev VM, 2026-11-28).
  template <bool Out>
  bool string() {
    for (;;) {
      run<Out>();
      if (r_ >= n_ || p_[r_] < 0x20) return false;  // the end, or a raw control character
      if (p_[r_++] == '"') return true;
      if (r_ >= n_) return false;
      const uint8_t e = p_[r_++];
      if (kEscapes.simple[e] != 0) {
        if (Out) p_[w_++] = kEscapes.simple[e];
        continue;
      }
      uint32_t cp = 0;
      if (e != 'u' || !unicode_escape(cp)) return false;
      if (Out) w_ += put_utf8(cp, p_ + w_);
    }
  }

  // Past a plain run (copied to w_ with Out): eight bytes a step, then byte by byte. A
  // whole step is stored at w_ only where it ends at or before r_ (bytes already read).
  template <bool Out>
  void run() {
    if (kLittleEndian) {
      while (n_ - r_ >= 8) {
        uint64_t x;
        std::memcpy(&x, p_ + r_, 8);
        const uint64_t m = run_end_mask(x);
        const size_t k = m ? size_t(__builtin_ctzll(m)) >> 3 : 8;
        if (Out) {
          if (r_ - w_ >= 8) {
            std::memcpy(p_ + w_, &x, 8);
          } else {
            std::memmove(p_ + w_, p_ + r_, k);
          }
          w_ += k;
        }
        r_ += k;
        if (k < 8) return;
      }
    }
    while (r_ < n_ && plain_string_byte(p_[r_])) {
      if (Out) p_[w_++] = p_[r_];
      ++r_;
    }
  }

  uint8_t* p_;
  size_t n_;
  const std::string& field_;
  size_t r_ = 0, w_ = 0;
  std::string key_;  // a key with escapes, decoded
};

}  // namespace

bool jsonl_extract(uint8_t* buf, size_t buf_size, const std::string& field,
                   std::vector<int64_t>& spans, size_t& out_bytes, size_t& stop) {
  out_bytes = 0;
  stop = utf8_first_invalid(buf, buf_size);
  if (stop != buf_size) return false;
  Parser p(buf, buf_size, field);
  const bool ok = p.file(spans);
  stop = p.at();
  if (ok) out_bytes = p.written();
  return ok;
}

JsonlFiles read_jsonl_files(const std::vector<std::string>& paths, const std::string& field,
                            int64_t max_bytes, int64_t reserve) {
  if (max_bytes < 0) throw std::invalid_argument("max_bytes must be >= 0");
  JsonlFiles r;
  const auto limit = size_t(max_bytes);
  r.data.reserve(std::min(limit, size_t(std::max<int64_t>(reserve, 0)) + 1));
  advise_huge_pages(r.data, kHugeMinBytes);
  for (size_t i = 0; i < paths.size(); ++i) {
    const size_t a = r.data.size();
    int64_t mtime = 0;
    const int err = read_file_append(paths[i], r.data, limit, mtime);
    if (err != 0) {
      r.data.resize(a);
      r.failed = int64_t(i);
      r.error = err;
      break;
    }
    const size_t n = r.data.size() - a, first = r.spans.size();
    size_t out = 0, stop = 0;
    if (!jsonl_extract(r.data.data() + a, n, field, r.spans, out, stop)) {
      r.spans.resize(first);
      r.data.resize(a);
      r.failed = int64_t(i);
      r.error = kJsonlNotPlain;
      r.offset = int64_t(stop);
      break;
    }
    for (size_t k = first; k < r.spans.size(); ++k) r.spans[k] += int64_t(a);
    r.data.resize(a + out);
    r.sizes.push_back(int64_t(n));
    r.mtime_ns.push_back(mtime);
    r.docs.push_back(int64_t(r.spans.size() - first) / 2);
  }
  return r;
}

}  // namespace gputok
