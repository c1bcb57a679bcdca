// The process an object was made in. After fork() a child holds copies of objects whose
// threads (a ThreadPool's workers) or CUDA context (a GpuEncoder's) live only in the parent;
// here() tells the two apart. getpid() is a system call (glibc caches no pid): ask it off hot
// paths.
#pragma once

#include <unistd.h>

namespace gputok {

class ProcessStamp {
 public:
  bool here() const { return long(getpid()) == pid_; }

 private:
  long pid_ = long(getpid());
};

}  // namespace gputok
