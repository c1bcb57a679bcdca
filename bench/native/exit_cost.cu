// What a process that used the GPU pays at its exit: the driver frees its context when the
// last descriptor of its device files closes, inside the exit. Not a test. Each variant is a
// fresh process (this binary re-executed), timed from fork to waitpid, median of 5; "init" is
// the child's own time to its last CUDA call, so wall - init - the exec is the exit:
//   0 cuInit only                 cudaGetDeviceCount
//   1 +context                    cudaFree(0)
//   2 +pinned, device memory      160 MiB cudaHostAlloc, 1 GiB cudaMalloc
//   3 +explicit free and reset    2, then cudaFreeHost, cudaFree, cudaDeviceReset (timed)
//   4 +fork holder                2, then a forked child keeps everything for 0.3 s
//   5 +exec holder                2, then `sleep 0.3` holding only the device files'
//                                 descriptors (cli.hand_off_driver_teardown's way)
//
//   nvcc -O2 -arch=sm_90 -o /tmp/exit_cost bench/native/exit_cost.cu && /tmp/exit_cost
#include <cuda_runtime.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using clk = std::chrono::steady_clock;

static double ms_since(clk::time_point a) {
  return std::chrono::duration<double, std::milli>(clk::now() - a).count();
}

// The descriptors of /dev/nvidia*, made inheritable across exec; how many there were.
static int share_driver_files() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return 0;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    char path[300], target[256];
    std::snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    const ssize_t k = readlink(path, target, sizeof target - 1);
    if (k <= 0) continue;
    target[k] = 0;
    if (std::strncmp(target, "/dev/nvidia", 11) != 0) continue;
    const int fd = std::atoi(e->d_name);
    fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) & ~FD_CLOEXEC);
    ++n;
  }
  closedir(dir);
  return n;
}

static int child(int v) {
  const auto a = clk::now();
  int n = 0;
  cudaGetDeviceCount(&n);
  if (v >= 1) cudaFree(nullptr);
  void* p = nullptr;
  void* d = nullptr;
  if (v >= 2) {
    cudaHostAlloc(&p, size_t(160) << 20, cudaHostAllocMapped);
    cudaMalloc(&d, size_t(1) << 30);
  }
  std::printf("  variant %d: init %.1f ms", v, ms_since(a));
  if (v == 3) {
    auto b = clk::now();
    cudaFreeHost(p);
    cudaFree(d);
    const double freed = ms_since(b);
    b = clk::now();
    cudaDeviceReset();
    std::printf(", free %.1f, reset %.1f", freed, ms_since(b));
  }
  if (v == 4 && fork() == 0) {
    usleep(300000);
    _exit(0);
  }
  if (v == 5) {
    std::printf(", %d driver descriptors", share_driver_files());
    if (fork() == 0) {
      execl("/bin/sleep", "sleep", "0.3", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  _exit(0);
}

int main(int argc, char** argv) {
  if (argc > 1) return child(std::atoi(argv[1]));
  const char* names[] = {"cuInit only",  "+context",     "+pinned, device memory",
                         "+free, reset", "+fork holder", "+exec holder (descriptors only)"};
  for (int v = 0; v < 6; ++v) {
    std::vector<double> wall;
    for (int r = 0; r < 5; ++r) {
      const auto a = clk::now();
      const pid_t pid = fork();
      if (pid == 0) {
        execl(argv[0], argv[0], std::to_string(v).c_str(), static_cast<char*>(nullptr));
        _exit(127);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      wall.push_back(ms_since(a));
      usleep(400000);  // the holders' teardown done before the next process
    }
    std::sort(wall.begin(), wall.end());
    std::printf("%s: spawn to exit, median %.1f ms (min %.1f)\n", names[v], wall[2], wall[0]);
  }
  return 0;
}
