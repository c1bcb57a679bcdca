// The GPU encoder for builds without nvcc: the CPU path serves alone, and asking for the
// GPU says why it cannot.
#include "gpu_encoder.h"

namespace gputok {

bool cuda_available(std::string* why) {
  if (why) *why = "gputok was built without CUDA (no nvcc found at build time)";
  return false;
}

void start_device(int) {}
void wait_for_device_starts() {}

struct GpuEncoder::Impl {};

GpuEncoder::GpuEncoder(std::shared_ptr<const Vocab>, GpuOptions, GpuTuning) {
  throw CudaError("gputok was built without CUDA (no nvcc found at build time)");
}
GpuEncoder::~GpuEncoder() = default;
float GpuEncoder::encode(const std::vector<std::string_view>&, Algorithm, GpuOutput&,
                         std::vector<int64_t>&) {
  throw CudaError("gputok was built without CUDA");
}
void GpuEncoder::set_gpu_pretokenize(bool) {}
void GpuEncoder::set_pool_limit(size_t) {}
GpuCounters GpuEncoder::counters() const { return {}; }
int GpuEncoder::device_id() const { return -1; }
const GpuTuning& GpuEncoder::tuning() const {
  static const GpuTuning none;
  return none;
}

}  // namespace gputok
