#include "read_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include "../huge_pages.h"
#include "paths.h"
#include "split.h"

namespace gputok {

namespace {

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

int read_file_append(const std::string& path, std::vector<uint8_t>& out, size_t limit,
                     int64_t& mtime) {
  if (unusable_path(path)) return EINVAL;
  const Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return errno;
  struct stat st{};
  if (::fstat(f.fd, &st) != 0) return errno;
  if (!S_ISREG(st.st_mode)) return EINVAL;
  mtime = int64_t(st.st_mtim.tv_sec) * 1000000000 + int64_t(st.st_mtim.tv_nsec);
  size_t got = out.size();
  // The stat's size plus one byte (to see the end without another call); a file that grew
  // since is read on, 64 KiB at a time, to its end or the limit.
  size_t want = size_t(std::max<off_t>(st.st_size, 0)) + 1;
  for (;;) {
    if (got >= limit) return EFBIG;
    want = std::min(want, limit - got);
    out.resize(got + want);
    const ssize_t n = ::read(f.fd, out.data() + got, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    got += size_t(n);
    if (n == 0) break;
    want = size_t(n) == want ? size_t(64) << 10 : want - size_t(n);
  }
  out.resize(got);
  return 0;
}

namespace {

// The documents of data[a, b) (one file) as spans, appended; returns how many.
int64_t split_file(const std::vector<uint8_t>& data, int64_t a, int64_t b, const std::string& sep,
                   bool split, std::vector<int64_t>& spans) {
  if (!split) {
    spans.insert(spans.end(), {a, b});
    return 1;
  }
  const auto* s = reinterpret_cast<const uint8_t*>(sep.data());
  const std::vector<int64_t> at = find_separators(data.data() + a, size_t(b - a), s, sep.size());
  const auto k = int64_t(sep.size());
  int64_t start = a;
  for (const int64_t i : at) {
    spans.insert(spans.end(), {start, a + i});
    start = a + i + k;
  }
  // The piece after the last separator, unless it is empty and not the only piece.
  const bool tail = at.empty() || start != b;
  if (tail) spans.insert(spans.end(), {start, b});
  return int64_t(at.size()) + (tail ? 1 : 0);
}

}  // namespace

TextFiles read_text_files(const std::vector<std::string>& paths, const std::string& sep, bool split,
                          int64_t max_bytes, int64_t reserve) {
  if (split && sep.empty()) throw std::invalid_argument("text separator must not be empty");
  if (max_bytes < 0) throw std::invalid_argument("max_bytes must be >= 0");
  TextFiles r;
  const auto limit = size_t(max_bytes);
  // One byte more than the files: read_one asks each file for a byte past its end.
  r.data.reserve(std::min(limit, size_t(std::max<int64_t>(reserve, 0)) + 1));
  advise_huge_pages(r.data, kHugeMinBytes);  // fresh pages fault once per 2 MiB
  for (size_t i = 0; i < paths.size(); ++i) {
    const auto a = int64_t(r.data.size());
    int64_t mtime = 0;
    const int err = read_file_append(paths[i], r.data, limit, mtime);
    if (err != 0) {
      r.data.resize(size_t(a));
      r.failed = int64_t(i);
      r.error = err;
      break;
    }
    const auto b = int64_t(r.data.size());
    r.ends.push_back(b);
    r.mtime_ns.push_back(mtime);
    r.docs.push_back(split_file(r.data, a, b, sep, split, r.spans));
  }
  return r;
}

}  // namespace gputok
