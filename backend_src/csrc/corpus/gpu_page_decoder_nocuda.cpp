// The page decoder for builds without nvcc: the CPU decoder serves alone, and asking for the
// GPU says why it cannot.
#include "gpu_errors.h"
#include "gpu_page_decoder.h"

namespace gputok {

struct GpuPageDecoder::Impl {
  PageDecoderOptions options;
};

GpuPageDecoder::GpuPageDecoder(PageDecoderOptions) {
  throw CudaError("gputok was built without CUDA (no nvcc found at build time)");
}
GpuPageDecoder::~GpuPageDecoder() = default;
void GpuPageDecoder::decompress(const uint8_t*, size_t, const std::vector<PageCopy>&, uint8_t*,
                                size_t) {
  throw CudaError("gputok was built without CUDA");
}
void GpuPageDecoder::set_pool_limit(size_t) {}
PageDecoderCounters GpuPageDecoder::counters() const { return {}; }
const PageDecoderOptions& GpuPageDecoder::options() const { return impl_->options; }
const char* GpuPageDecoder::engine() const { return "none"; }

}  // namespace gputok
