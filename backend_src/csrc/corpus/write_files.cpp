#include "write_files.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>

#include "paths.h"

namespace gputok {

namespace {

// Every byte of parts, in order, in as few writev calls as the kernel takes: 0 or an errno.
int write_all(int fd, const std::vector<OutBytes>& parts) {
  std::vector<iovec> iov;
  iov.reserve(parts.size());
  for (const OutBytes& p : parts)
    if (p.size) iov.push_back({const_cast<uint8_t*>(p.data), p.size});
  size_t at = 0;  // the first iovec not yet written in full
  while (at < iov.size()) {
    const int n_iov = int(std::min<size_t>(iov.size() - at, IOV_MAX));
    const ssize_t n = ::writev(fd, iov.data() + at, n_iov);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // a regular file that takes nothing: never loop on it
    auto left = size_t(n);
    while (at < iov.size() && left >= iov[at].iov_len) left -= iov[at++].iov_len;
    if (left) {
      iov[at].iov_base = static_cast<uint8_t*>(iov[at].iov_base) + left;
      iov[at].iov_len -= left;
    }
  }
  return 0;
}

// Creates f.tmp, writes its parts, fsyncs when asked and closes it: 0 or an errno (the tmp
// file removed again on a failure after its creation).
int write_tmp(const OutFile& f, bool fsync) {
  if (unusable_path(f.tmp) || unusable_path(f.final_path)) return EINVAL;
  const int fd = ::open(f.tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return errno;
  int err = write_all(fd, f.parts);
  if (!err && fsync && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err && errno != EINTR) err = errno;
  if (err) ::unlink(f.tmp.c_str());
  return err;
}

int fsync_dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int err = ::fsync(fd) != 0 ? errno : 0;
  ::close(fd);
  return err;
}

}  // namespace

WriteResult write_shard_files(const std::vector<OutFile>& files, bool fsync) {
  WriteResult r;
  size_t written = 0;  // files[0, written) are in their tmp names
  for (; written < files.size(); ++written) {
    if ((r.error = write_tmp(files[written], fsync)) != 0) {
      r.file = int64_t(written);
      break;
    }
  }
  size_t renamed = 0;
  if (!r.error) {
    for (; renamed < files.size(); ++renamed) {
      if (std::rename(files[renamed].tmp.c_str(), files[renamed].final_path.c_str()) != 0) {
        r = {errno, int64_t(renamed)};
        break;
      }
    }
  }
  for (size_t k = renamed; k < written; ++k) ::unlink(files[k].tmp.c_str());
  if (!r.error && fsync && !files.empty()) {
    if (const int err = fsync_dir_of(files.back().final_path)) r = {err, int64_t(files.size()) - 1};
  }
  return r;
}

}  // namespace gputok
