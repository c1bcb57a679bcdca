// The few declarations of Triton's C API (tritonserver.h, core r24.10 = server 2.51) that the
// preloaded serving libraries need, and the lookup of the definition they stand in front of.
// Copied as numbers and opaque types, so that nothing here needs Triton's headers to build.
#pragma once

#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" {
struct TRITONSERVER_Error;
struct TRITONSERVER_Server;
struct TRITONSERVER_InferenceRequest;
struct TRITONSERVER_InferenceTrace;
struct TRITONSERVER_BufferAttributes;
}

namespace gputok_serve {

// TRITONSERVER_Error_Code: UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG, ...
constexpr int kErrorInternal = 1;
constexpr int kErrorInvalidArg = 3;
// TRITONSERVER_DataType: INVALID, BOOL, UINT8, ..., FP64, BYTES, BF16
constexpr int kTypeBytes = 13;
// TRITONSERVER_MemoryType: CPU, CPU_PINNED, GPU
constexpr int kMemoryGpu = 2;

// The next definition of `name` after the calling library's own (libtritonserver.so's, in a
// tritonserver with this library preloaded), resolved once; two threads that race here store
// the same pointer. Only a process that links libtritonserver calls the functions these
// libraries define, and there the definition exists: without it there is nothing to pass the
// call on to, and the process stops.
template <typename Fn>
Fn next_symbol(std::atomic<Fn>& slot, const char* name) {
  Fn fn = slot.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    if (fn == nullptr) std::abort();
    slot.store(fn, std::memory_order_release);
  }
  return fn;
}

// TRITONSERVER_ErrorNew as the next library defines it.
inline TRITONSERVER_Error* error_new(int code, const char* msg) {
  using Fn = TRITONSERVER_Error* (*)(int, const char*);
  static std::atomic<Fn> slot{nullptr};
  return next_symbol(slot, "TRITONSERVER_ErrorNew")(code, msg);
}

}  // namespace gputok_serve
