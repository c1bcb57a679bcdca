// A path the corpus tool's native readers and writer refuse before any system call: empty, or
// holding a NUL byte (the C string would end early and name another file).
#pragma once

#include <string>

namespace gputok {

inline bool unusable_path(const std::string& path) {
  return path.empty() || path.find('\0') != std::string::npos;
}

}  // namespace gputok
