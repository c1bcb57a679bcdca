// parquet_read_file (parquet.h): one small Parquet file's column read in one native call (the
// file, its footer and schema, the checks, the column chunks and their pages), for the corpus
// reader (corpus/parquet.py), which otherwise makes a dozen calls a file, each giving up the
// interpreter lock and waiting to take it back.
//
// It takes only what the Python reader would read through the page reader in one call, with
// the same result; anything else (another layout or codec, a chunk outside the file, a value
// count that is not its row group's, more than the call's budget, a malformed page) is left
// undecided, and the Python reader reads it again and decides or names it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "parquet.h"
#include "paths.h"

namespace gputok {

namespace {

struct File {
  int fd = -1;
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly n bytes at off; false on an error or a short file.
bool read_at(int fd, uint8_t* dst, size_t n, int64_t off) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, dst, n, off);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    dst += got;
    n -= size_t(got);
    off += got;
  }
  return true;
}

// a + max(b, 0), saturating (a footer's counts are hostile: signed overflow is undefined).
int64_t add_count(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_add_overflow(a, std::max<int64_t>(b, 0), &out) ? INT64_MAX : out;
}

// Where a column chunk's pages start: its dictionary page, if any, else its first data page.
int64_t chunk_start(const ParquetColumnChunkMeta& c) {
  return c.dictionary_page_offset > 0 ? std::min(c.data_page_offset, c.dictionary_page_offset)
                                      : c.data_page_offset;
}

}  // namespace

ParquetFileRead parquet_read_file(const std::string& path, const std::string& column,
                                  int64_t group_limit, int64_t max_out, int64_t max_rows) {
  ParquetFileRead r;
  if (unusable_path(path) || group_limit < 0) return r;
  const File f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  struct stat st{};
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 12) return r;
  const int64_t size = st.st_size;
  uint8_t tail[8];
  if (!read_at(f.fd, tail, 8, size - 8) || std::memcmp(tail + 4, "PAR1", 4) != 0) return r;
  uint32_t flen = 0;
  std::memcpy(&flen, tail, 4);  // little-endian, as every platform this builds for
  if (int64_t(flen) > size - 12) return r;
  std::vector<uint8_t> footer(flen);
  if (!read_at(f.fd, footer.data(), flen, size - 8 - int64_t(flen))) return r;
  ParquetFooter meta;
  ParquetColumnSchema schema;
  try {
    schema = parquet_schema(footer.data(), footer.size(), column);
    if (!parquet_plain_string(schema)) return r;
    meta = parquet_footer(footer.data(), footer.size(), schema.leaf);
  } catch (const ParquetCorrupt&) {
    return r;
  } catch (const ParquetUnsupported&) {
    return r;
  }
  if (meta.chunks.empty()) return r;
  // The chunks the page reader takes in one call: the column's, one codec it reads, inside
  // the file, each row group's values its rows, group_limit compressed bytes at most.
  std::vector<ParquetChunkRef> refs;
  std::vector<int64_t> starts;  // in the file, beside refs
  int64_t total = 0, rows = 0, rg_bytes = 0;
  const int32_t codec = meta.chunks.front().codec;
  for (const ParquetColumnChunkMeta& c : meta.chunks) {
    if (c.path != column || c.type != 6 || c.codec != codec || (codec != 0 && codec != 1)) return r;
    rows = add_count(rows, c.rg_rows);
    rg_bytes = add_count(rg_bytes, c.rg_bytes);
    if (c.rg_rows == 0 && c.num_values == 0) continue;  // an empty row group
    const int64_t start = chunk_start(c);
    if (start < 4 || c.compressed < 0 || c.compressed > size - start) return r;
    if (c.num_values != c.rg_rows || c.compressed > group_limit - total) return r;
    refs.push_back({total, c.compressed, c.num_values});
    starts.push_back(start);
    total += c.compressed;
  }
  // A footer claiming more rows than the file may decode to: the caller's reader fails it
  // before anything is read.
  if (refs.empty() || (max_rows >= 0 && std::max(meta.num_rows, rows) > max_rows)) return r;
  std::vector<uint8_t> buf(size_t(total) + 1);
  for (size_t k = 0; k < refs.size(); ++k)
    if (!read_at(f.fd, buf.data() + refs[k].offset, size_t(refs[k].size), starts[k])) return r;
  try {
    r.values = parquet_decode(buf.data(), size_t(total), refs,
                              codec == 1 ? ParquetCodec::kSnappy : ParquetCodec::kUncompressed,
                              schema.repetition == 1 ? 1 : 0, max_out - total, nullptr);
  } catch (const ParquetCorrupt&) {
    return r;
  } catch (const ParquetUnsupported&) {
    return r;
  }
  r.read = true;
  r.size = size;
  r.rows_claimed = std::max(meta.num_rows, rows);
  r.rg_bytes = rg_bytes;
  return r;
}

}  // namespace gputok
