// start_device (gpu_encoder.h): a device's CUDA context made on a thread of its own while
// the caller parses a vocabulary, and GpuEncoder's wait for it.
//
// Why: a process's first GPU tokenizer waited for the driver's start (cuInit, 0.1-0.19 s on
// the H100 host) and the context (~0.1 s) after the vocabulary's parse (~0.1 s), one after the
// other. H100 host, 2026-11-28 (bench/bench_startup.py, medians of 5 fresh processes, three
// calls): `gputok.gpt2()` ready 0.45-0.53 s after a script's first line before, 0.36-0.37
// with the context started first.
#include <cuda_runtime.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "gpu_encoder.h"
#include "process_stamp.h"

namespace gputok {

namespace {

class DeviceStarts {
 public:
  static DeviceStarts& get() {
    static DeviceStarts s;
    return s;
  }

  void start(int device_id) {
    // A forked child holds a copy of this object: its threads are the parent's, and CUDA
    // does not survive fork(); the child starts nothing and waits for nothing.
    if (!stamp_.here() || device_id < 0 || device_id >= kDevices) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (started_[device_id]) return;
    started_[device_id] = true;
    ++running_;
    std::thread([this, device_id] {
      int count = 0;
      if (cudaGetDeviceCount(&count) == cudaSuccess && device_id < count &&
          cudaSetDevice(device_id) == cudaSuccess)
        cudaFree(nullptr);  // makes the device's primary context, which every thread shares
      cudaGetLastError();   // an error here is met again, and reported, by GpuEncoder
      std::lock_guard<std::mutex> done(mu_);
      --running_;
      cv_.notify_all();
    }).detach();
  }

  void wait() {
    if (!stamp_.here()) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return running_ == 0; });
  }

  // At exit (a vocabulary that failed to parse, say): no thread is left inside the CUDA
  // runtime while its own statics are destroyed.
  ~DeviceStarts() { wait(); }

 private:
  static constexpr int kDevices = 64;
  const ProcessStamp stamp_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_[kDevices] = {};
  int running_ = 0;
};

}  // namespace

void start_device(int device_id) { DeviceStarts::get().start(device_id); }

void wait_for_device_starts() { DeviceStarts::get().wait(); }

}  // namespace gputok
