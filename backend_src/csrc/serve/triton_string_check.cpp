// Loaded into tritonserver with LD_PRELOAD by gputok-serve and the Docker image's entry point,
// so that a request whose BYTES (string) input ends inside its last element is refused alone,
// with INVALID_ARG, before Triton's dynamic batcher can put it in a batch with other clients'
// requests. Nothing of the tokenizer is here: a serving tool that needs the C and C++ runtimes
// only (tritonserver links both).
//
// Why (core r24.10 = server 2.51, unchanged on core's main branch in 2026): the elements of a
// BYTES tensor each carry a 4-byte length. InferenceRequest::ValidateBytesInputs walks them,
// but when the data ends in the middle of the last element it stops without an error (it never
// checks the element's remaining length), so the request is valid to core and reaches the
// batcher. The Python backend then copies every request of the batch to its stub
// (SaveRequestsToSharedMemory), finds the truncated element, and fails the whole batch with
// that error, before any model code runs: one client's request failed its batch-mates'
// (docs/reliability.md measured 247 of 2,520 valid requests failed under 80 such requests).
//
// How: the frontends (HTTP and gRPC) build every request through libtritonserver.so's C API,
// which the tritonserver binary calls through dynamic symbols, so definitions loaded first
// take the calls. This library notes each request's BYTES inputs (AddInput) and the host
// buffers given for them (AppendInputData, ...WithBufferAttributes), and at ServerInferAsync
// walks each input's elements exactly as core's ValidateBytesInputs does. Where that walk
// ends inside an element, the request is refused here (the frontend answers HTTP 400 / gRPC
// INVALID_ARGUMENT, and deletes the request as for any refusal); every other request goes on
// to core unchanged, which applies its own checks (a length that straddles two buffers, too
// many elements, GPU buffers: core decides those as before). Every call is passed through.
// Cost per request: a few operations on one hash map under a mutex, and one pass over its
// string bytes (4 bytes read per element); nothing for a request with no BYTES input but the
// map lookups.
//
// Not covered: a "raw" HTTP request (binary body, no JSON header), whose one input's type
// comes from the model's config rather than the request: none of gputok's models has a single
// input, which such a request needs.
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "triton_c_api.h"

namespace {

using gputok_serve::kErrorInvalidArg;
using gputok_serve::kMemoryGpu;
using gputok_serve::kTypeBytes;
using gputok_serve::next_symbol;

struct Buffer {
  const uint8_t* base;
  size_t size;
};

struct BytesInput {
  std::string name;
  std::vector<Buffer> buffers;
  bool on_gpu = false;  // some buffer is device memory (or has no address): core checks it
};

// The BYTES inputs of every request being built, by request.
struct Tracked {
  std::mutex mu;
  std::unordered_map<const void*, std::vector<BytesInput>> requests;
};

Tracked& tracked() {
  static Tracked* t = new Tracked;  // never destroyed: the server's threads may outlive exit
  return *t;
}

void forget(const void* request) {
  Tracked& t = tracked();
  std::lock_guard<std::mutex> lock(t.mu);
  t.requests.erase(request);
}

// Notes a buffer of `request`'s input `name` when it is a tracked BYTES input. `unreadable`:
// device memory, or attributes that could not be read.
void add_buffer(const void* request, const char* name, const void* base, size_t size,
                bool unreadable) {
  if (name == nullptr) return;
  Tracked& t = tracked();
  std::lock_guard<std::mutex> lock(t.mu);
  const auto it = t.requests.find(request);
  if (it == t.requests.end()) return;
  for (BytesInput& in : it->second) {
    if (in.name != name) continue;
    // No address for bytes: nothing this library can read, so core decides, as for GPU memory.
    if (unreadable || (base == nullptr && size > 0)) in.on_gpu = true;
    if (size > 0 && base != nullptr)
      in.buffers.push_back(Buffer{static_cast<const uint8_t*>(base), size});
    return;
  }
}

}  // namespace

namespace gputok_serve {

// Core's walk (ValidateBytesInputs) over one input's buffers: the bytes of the last element
// that are missing where the data ends inside it, or 0 where the walk ends on an element's
// boundary or stops where core stops with an error of its own (a length indicator split
// across buffers, which core refuses; then core decides).
uint64_t missing_string_bytes(const Buffer* buffers, size_t count) {
  uint64_t remaining_element = 0;
  for (size_t b = 0; b < count; ++b) {
    const uint8_t* p = buffers[b].base;
    size_t left = buffers[b].size;
    while (left > 0) {
      if (remaining_element == 0) {
        if (left < sizeof(uint32_t)) return 0;  // core: "incomplete string length indicator"
        uint32_t len = 0;
        for (int i = 3; i >= 0; --i) len = (len << 8) | p[i];  // little-endian, unaligned
        p += sizeof(uint32_t);
        left -= sizeof(uint32_t);
        remaining_element = len;
        if (remaining_element == 0) continue;
      }
      const size_t take = left < remaining_element ? left : size_t(remaining_element);
      p += take;
      left -= take;
      remaining_element -= take;
    }
  }
  return remaining_element;
}

}  // namespace gputok_serve

extern "C" {

#define GPUTOK_EXPORT __attribute__((visibility("default")))

GPUTOK_EXPORT TRITONSERVER_Error* TRITONSERVER_InferenceRequestNew(
    TRITONSERVER_InferenceRequest** request, TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version) {
  using Fn = TRITONSERVER_Error* (*)(TRITONSERVER_InferenceRequest**, TRITONSERVER_Server*,
                                     const char*, int64_t);
  static std::atomic<Fn> slot{nullptr};
  TRITONSERVER_Error* err = next_symbol(slot, "TRITONSERVER_InferenceRequestNew")(
      request, server, model_name, model_version);
  if (err == nullptr && request != nullptr) forget(*request);  // an address used before
  return err;
}

GPUTOK_EXPORT TRITONSERVER_Error* TRITONSERVER_InferenceRequestDelete(
    TRITONSERVER_InferenceRequest* request) {
  using Fn = TRITONSERVER_Error* (*)(TRITONSERVER_InferenceRequest*);
  static std::atomic<Fn> slot{nullptr};
  forget(request);
  return next_symbol(slot, "TRITONSERVER_InferenceRequestDelete")(request);
}

GPUTOK_EXPORT TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddInput(
    TRITONSERVER_InferenceRequest* request, const char* name, const int datatype,
    const int64_t* shape, uint64_t dim_count) {
  using Fn = TRITONSERVER_Error* (*)(TRITONSERVER_InferenceRequest*, const char*, int,
                                     const int64_t*, uint64_t);
  static std::atomic<Fn> slot{nullptr};
  TRITONSERVER_Error* err = next_symbol(slot, "TRITONSERVER_InferenceRequestAddInput")(
      request, name, datatype, shape, dim_count);
  if (err == nullptr && datatype == kTypeBytes && name != nullptr) {
    Tracked& t = tracked();
    std::lock_guard<std::mutex> lock(t.mu);
    t.requests[request].push_back(BytesInput{name, {}, false});
  }
  return err;
}

GPUTOK_EXPORT TRITONSERVER_Error* TRITONSERVER_InferenceRequestAppendInputData(
    TRITONSERVER_InferenceRequest* request, const char* name, const void* base, size_t byte_size,
    int memory_type, int64_t memory_type_id) {
  using Fn = TRITONSERVER_Error* (*)(TRITONSERVER_InferenceRequest*, const char*, const void*,
                                     size_t, int, int64_t);
  static std::atomic<Fn> slot{nullptr};
  TRITONSERVER_Error* err = next_symbol(slot, "TRITONSERVER_InferenceRequestAppendInputData")(
      request, name, base, byte_size, memory_type, memory_type_id);
  if (err == nullptr) add_buffer(request, name, base, byte_size, memory_type == kMemoryGpu);
  return err;
}

GPUTOK_EXPORT TRITONSERVER_Error* TRITONSERVER_InferenceRequestAppendInputDataWithBufferAttributes(
    TRITONSERVER_InferenceRequest* request, const char* name, const void* base,
    TRITONSERVER_BufferAttributes* attributes) {
  using Fn = TRITONSERVER_Error* (*)(TRITONSERVER_InferenceRequest*, const char*, const void*,
                                     TRITONSERVER_BufferAttributes*);
  using TypeFn = TRITONSERVER_Error* (*)(TRITONSERVER_BufferAttributes*, int*);
  using SizeFn = TRITONSERVER_Error* (*)(TRITONSERVER_BufferAttributes*, size_t*);
  static std::atomic<Fn> slot{nullptr};
  static std::atomic<TypeFn> type_slot{nullptr};
  static std::atomic<SizeFn> size_slot{nullptr};
  TRITONSERVER_Error* err =
      next_symbol(slot, "TRITONSERVER_InferenceRequestAppendInputDataWithBufferAttributes")(
          request, name, base, attributes);
  if (err != nullptr || attributes == nullptr) return err;
  int memory_type = kMemoryGpu;  // unknown: treated as unreadable, left to core
  size_t size = 0;
  TRITONSERVER_Error* e1 =
      next_symbol(type_slot, "TRITONSERVER_BufferAttributesMemoryType")(attributes, &memory_type);
  TRITONSERVER_Error* e2 =
      next_symbol(size_slot, "TRITONSERVER_BufferAttributesByteSize")(attributes, &size);
  using DeleteFn = TRITONSERVER_Error* (*)(TRITONSERVER_Error*);
  static std::atomic<DeleteFn> delete_slot{nullptr};
  for (TRITONSERVER_Error* e : {e1, e2})
    if (e != nullptr) next_symbol(delete_slot, "TRITONSERVER_ErrorDelete")(e);
  const bool readable = e1 == nullptr && e2 == nullptr && memory_type != kMemoryGpu;
  add_buffer(request, name, base, readable ? size : 0, !readable);
  return err;
}

GPUTOK_EXPORT TRITONSERVER_Error* TRITONSERVER_ServerInferAsync(
    TRITONSERVER_Server* server, TRITONSERVER_InferenceRequest* request,
    TRITONSERVER_InferenceTrace* trace) {
  using Fn = TRITONSERVER_Error* (*)(TRITONSERVER_Server*, TRITONSERVER_InferenceRequest*,
                                     TRITONSERVER_InferenceTrace*);
  static std::atomic<Fn> slot{nullptr};
  std::vector<BytesInput> inputs;
  {
    Tracked& t = tracked();
    std::lock_guard<std::mutex> lock(t.mu);
    const auto it = t.requests.find(request);
    if (it != t.requests.end()) {
      inputs = std::move(it->second);
      t.requests.erase(it);
    }
  }
  for (const BytesInput& in : inputs) {
    if (in.on_gpu) continue;
    const uint64_t missing =
        gputok_serve::missing_string_bytes(in.buffers.data(), in.buffers.size());
    if (missing == 0) continue;
    const std::string msg = "incomplete string data for inference input '" + in.name +
                            "': its last element's length indicator runs " +
                            std::to_string(missing) +
                            " bytes past the end of the data (refused before batching)";
    return gputok_serve::error_new(kErrorInvalidArg, msg.c_str());
  }
  return next_symbol(slot, "TRITONSERVER_ServerInferAsync")(server, request, trace);
}

// For the tests (tests/serving/test_triton_preload.py): the walk, without a tritonserver.
GPUTOK_EXPORT uint64_t gputok_missing_string_bytes(const void* const* bases, const size_t* sizes,
                                                   size_t count) {
  std::vector<Buffer> buffers;
  for (size_t i = 0; i < count; ++i)
    buffers.push_back(Buffer{static_cast<const uint8_t*>(bases[i]), sizes[i]});
  return gputok_serve::missing_string_bytes(buffers.data(), buffers.size());
}

}  // extern "C"
