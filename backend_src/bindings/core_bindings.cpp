// The _core module's tokenizer object (Core: the facade's calls, arguments in, results out, the
// GIL released meanwhile), GpuTuning, and the id-list and crossover helpers of tests and
// benchmarks.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../csrc/chunk_pipeline.h"
#include "../csrc/encoder.h"
#include "../csrc/gpu_encoder.h"
#include "../csrc/tokenizer.h"
#include "../csrc/vocab.h"
#include "convert.h"
#include "core_module.h"
#include "fast_call.h"
#include "id_list.h"
#include "one_text.h"
#include "py_buffers.h"

namespace py = pybind11;
using namespace gputok;
using namespace gputok::bind;

namespace {

// The Python object over the facade: arguments in, results out, the GIL released meanwhile.
class Core {
 public:
  Core(std::shared_ptr<const Vocab> vocab, const std::string& device, const std::string& algorithm,
       int device_id, size_t pool_limit, bool gpu_pretokenize, bool blocking_sync, int copy_threads,
       std::optional<int64_t> cpu_below_bytes, std::optional<int64_t> bytes_per_row,
       std::optional<int64_t> stream_below_bytes, const GpuTuning& tuning, size_t gpu_cache_bytes)
      : ints_(bind::IdList::at_least(vocab->n_vocab())) {
    TokenizerOptions o;
    o.gpu_tuning = tuning;
    o.device = device;
    o.algorithm = algorithm;
    o.gpu.device_id = device_id;
    o.gpu.pool_limit_bytes = pool_limit;
    o.gpu.gpu_pretokenize = gpu_pretokenize;
    o.gpu.blocking_sync = blocking_sync;
    o.gpu.copy_threads = copy_threads;
    o.gpu.learned_cache_bytes = gpu_cache_bytes;
    if (auto c = to_crossover(cpu_below_bytes, bytes_per_row, stream_below_bytes)) {
      o.crossover = *c;
      o.crossover_given = true;
    }
    // Without the GIL: a GPU tokenizer's build (CUDA's context, the device tables, the
    // pretoken cache's prefault) took 0.26 s on the H100 host (2026-11-27, py-spy), a CPU
    // one's 10-80 ms; the caller's other Python threads run meanwhile.
    py::gil_scoped_release release;
    tok_ = std::make_unique<Tokenizer>(std::move(vocab), o);
  }

  py::tuple encode_flat(const py::sequence& texts, std::vector<int32_t> allowed,
                        std::vector<int32_t> disallowed, const std::string& errors,
                        int num_threads) {
    const Texts t = to_texts(texts);
    return flat(t.inputs, to_args(std::move(allowed), std::move(disallowed), errors, num_threads));
  }

  // Documents as views into one bytes-like buffer (no Python object per document): the
  // same contract and result as encode_flat of the documents as bytes.
  py::tuple encode_flat_buffer(const py::object& data, const py::array& bounds,
                               std::vector<int32_t> allowed, std::vector<int32_t> disallowed,
                               const std::string& errors, int num_threads) {
    const ByteBuffer buf(data);  // the export is held until we return
    const EncodeArgs a = to_args(std::move(allowed), std::move(disallowed), errors, num_threads);
    return flat(views(buf, bounds), a);
  }

  // encode_flat / encode_flat_buffer packed as uint16 with `separator` (None: none) after every
  // text: (ids uint16, ends int64 of one per text, kernel_ms).
  py::tuple encode_packed(const py::sequence& texts, std::vector<int32_t> allowed,
                          std::vector<int32_t> disallowed, const std::string& errors,
                          int num_threads, const py::object& separator) {
    const Texts t = to_texts(texts);
    const EncodeArgs a = to_args(std::move(allowed), std::move(disallowed), errors, num_threads);
    return packed(t.inputs, a, to_separator(separator));
  }

  py::tuple encode_packed_buffer(const py::object& data, const py::array& bounds,
                                 std::vector<int32_t> allowed, std::vector<int32_t> disallowed,
                                 const std::string& errors, int num_threads,
                                 const py::object& separator) {
    const ByteBuffer buf(data);
    const EncodeArgs a = to_args(std::move(allowed), std::move(disallowed), errors, num_threads);
    return packed(views(buf, bounds), a, to_separator(separator));
  }

  // One text's ids as a list (encode) or a uint32 array (encode_to_numpy).
  py::list encode_list(const py::handle& text, std::vector<int32_t> allowed,
                       std::vector<int32_t> disallowed, const std::string& errors) {
    return list_of(text, to_args(std::move(allowed), std::move(disallowed), errors, 0));
  }

  py::array_t<uint32_t> encode_numpy(const py::handle& text, std::vector<int32_t> allowed,
                                     std::vector<int32_t> disallowed, const std::string& errors) {
    return numpy_of(text, to_args(std::move(allowed), std::move(disallowed), errors, 0));
  }

  // encode_list / encode_numpy with this policy as a builtin function of the text alone
  // (fast_call.h): the facade's call for its common policies.
  // With a method: a method-like function (make_fast_method) named `name`, that hands any
  // call but one of the text alone to method(target, ...).
  static py::object encoder(const py::object& self, std::vector<int32_t> allowed,
                            std::vector<int32_t> disallowed, const std::string& errors, bool numpy,
                            const py::object& method, const py::object& target,
                            const std::string& name, const std::string& doc) {
    const Core& c = self.cast<const Core&>();
    const auto a = std::make_shared<const EncodeArgs>(
        to_args(std::move(allowed), std::move(disallowed), errors, 0));
    std::function<py::object(py::handle)> fn;
    if (numpy)
      fn = [&c, a](py::handle t) { return c.numpy_of(t, *a); };
    else
      fn = [&c, a](py::handle t) { return c.list_of(t, *a); };
    if (method.is_none()) return bind::make_fast_call(std::move(fn), self);
    return bind::make_fast_method(std::move(fn), self, method, target, name, doc);
  }

  // Every text's ids as its own list (encode_batch), with no flat Python list in between.
  py::list encode_lists(const py::sequence& texts, std::vector<int32_t> allowed,
                        std::vector<int32_t> disallowed, const std::string& errors,
                        int num_threads) {
    const Texts t = to_texts(texts);
    const EncodeArgs a = to_args(std::move(allowed), std::move(disallowed), errors, num_threads);
    EncodeResult r;
    {
      py::gil_scoped_release release;
      r = tok_->encode(t.inputs, a);
    }
    py::list out(t.inputs.size());
    for (size_t i = 0; i < t.inputs.size(); ++i) {
      const int64_t b = r.offsets[i], e = r.offsets[i + 1];
      PyList_SET_ITEM(out.ptr(), py::ssize_t(i),
                      ints_.list(r.ids.data() + b, size_t(e - b)).release().ptr());
    }
    return out;
  }

  py::bytes decode_bytes(
      const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& ids) {
    std::string out;
    {
      py::gil_scoped_release release;
      out = tok_->decode_bytes(ids.data(), size_t(ids.size()));
    }
    return py::bytes(out);
  }

  py::dict gpu_counters() const {
    py::dict d;
    if (!tok_->on_gpu()) return d;
    const GpuCounters c = tok_->gpu_counters();
    d["device_allocs"] = c.device_allocs;
    d["pinned_allocs"] = c.pinned_allocs;
    d["launches"] = c.launches;
    d["device_bytes"] = c.device_bytes;
    d["learned_bytes"] = c.learned_bytes;
    return d;
  }

  void set_crossover(int64_t below, int64_t per_row, int64_t stream_below) {
    tok_->set_crossover(Crossover::checked(below, per_row, stream_below));
  }
  py::tuple crossover() const {
    const Crossover c = tok_->crossover();
    return py::make_tuple(c.cpu_below_bytes, c.bytes_per_row, c.stream_below_bytes);
  }
  // device "auto"'s learned routes (route_learner.h), one dict a bucket; empty when none.
  py::list learned_routes() const {
    py::list out;
    for (const RouteLearner::BucketStats& b : tok_->learned_routes()) {
      py::dict d;
      d["kind"] = b.kind == RouteLearner::kBatch ? "batch" : "one";
      d["weights"] = py::make_tuple(b.lo, b.hi);
      d["calls"] = b.calls;
      d["cpu"] = py::make_tuple(b.n_cpu, b.cpu_us);
      d["gpu"] = py::make_tuple(b.n_gpu, b.gpu_us);
      d["path"] = b.gpu ? "cuda" : "cpu";
      d["rule"] = b.rule_gpu ? "cuda" : "cpu";
      out.append(d);
    }
    return out;
  }

  void set_piece_cache_bytes(size_t bytes) { tok_->set_piece_cache_bytes(bytes); }
  void set_cpu_spin_us(unsigned us) { tok_->set_cpu_spin_us(us); }
  unsigned cpu_spin_us() const { return tok_->cpu_spin_us(); }

  py::dict piece_cache_stats() const {
    const PieceCacheStats st = tok_->piece_cache_stats();
    py::dict d;
    d["capacity_bytes"] = st.capacity_bytes;
    d["entries"] = st.entries;
    d["max_entries"] = st.max_entries;
    d["arena_used"] = st.arena_used;
    d["arena_bytes"] = st.arena_bytes;
    return d;
  }

  const Tokenizer& tok() const { return *tok_; }
  Tokenizer& tok() { return *tok_; }

 private:
  static std::vector<TextInput> views(const ByteBuffer& buf, const py::array& bounds) {
    return buffer_views(static_cast<const char*>(buf.view.buf), size_t(buf.view.len),
                        to_bounds(bounds));
  }

  py::tuple flat(const std::vector<TextInput>& inputs, const EncodeArgs& a) const {
    EncodeResult r;
    {
      py::gil_scoped_release release;
      r = tok_->encode(inputs, a);
    }
    return py::make_tuple(to_numpy(std::move(r.ids)), to_numpy(std::move(r.offsets)), r.kernel_ms);
  }

  py::tuple packed(const std::vector<TextInput>& inputs, const EncodeArgs& a,
                   std::optional<int64_t> separator) const {
    PackedResult r;
    {
      py::gil_scoped_release release;
      r = tok_->encode_packed(inputs, a, separator);
    }
    return py::make_tuple(to_numpy(std::move(r.ids)), to_numpy(std::move(r.ends)), r.kernel_ms);
  }

  py::list list_of(const py::handle& text, const EncodeArgs& a) const {
    return bind::one_text_list(*tok_, ints_, text, a);
  }

  py::array_t<uint32_t> numpy_of(const py::handle& text, const EncodeArgs& a) const {
    return bind::one_text_array(*tok_, text, a);
  }

  const bind::IdList& ints_;
  std::unique_ptr<Tokenizer> tok_;
};

// GpuTuning (gpu_encoder.h): the GPU path's tuning and ablation switches, set explicitly; and
// the GPU path's chunk pipeline run with the CPU encoding each chunk (chunk_pipeline.h), so
// tests show a wrong split or stitch on a machine with no GPU.
void bind_gpu_tuning(py::module_& m) {
  py::class_<GpuTuning>(m, "GpuTuning")
      .def(py::init<>())
      .def_readwrite("profile", &GpuTuning::profile)
      .def_readwrite("piece_cache", &GpuTuning::piece_cache)
      .def_readwrite("split_misses", &GpuTuning::split_misses)
      .def_readwrite("multi_rank", &GpuTuning::multi_rank)
      .def_readwrite("graph", &GpuTuning::graph)
      .def_readwrite("direct_output", &GpuTuning::direct_output)
      .def_readwrite("warp_min", &GpuTuning::warp_min)
      .def_readwrite("warp_min_small", &GpuTuning::warp_min_small)
      .def_readwrite("memo_slots", &GpuTuning::memo_slots)
      .def_readwrite("fused_max_bytes", &GpuTuning::fused_max_bytes)
      .def_readwrite("coop_blocks", &GpuTuning::coop_blocks)
      .def_readwrite("fused_lean", &GpuTuning::fused_lean)
      .def_readwrite("lean_max_bytes", &GpuTuning::lean_max_bytes)
      .def_readwrite("lean_take_early", &GpuTuning::lean_take_early)
      .def_readwrite("pair_sparser", &GpuTuning::pair_sparser)
      .def_readwrite("learn_thread_min", &GpuTuning::learn_thread_min)
      .def_readwrite("learn_thread_min_small", &GpuTuning::learn_thread_min_small)
      .def_readwrite("learn_early", &GpuTuning::learn_early)
      .def_readwrite("kernel_events", &GpuTuning::kernel_events)
      .def_readwrite("encode_slots", &GpuTuning::encode_slots)
      .def_readwrite("chunk_bytes", &GpuTuning::chunk_bytes)
      .def_readwrite("lanes", &GpuTuning::lanes)
      .def_readwrite("huge_pages", &GpuTuning::huge_pages);
  m.def(
      "encode_chunked_cpu",
      [](std::shared_ptr<const Vocab> vocab, const py::sequence& texts, size_t chunk_bytes,
         size_t lanes) {
        const Texts t = to_texts(texts);
        std::vector<std::string_view> segments;
        for (const TextInput& in : t.inputs) segments.push_back(in.bytes);
        IdVector ids;
        std::vector<int64_t> ends{0};
        GpuOutput out;
        out.ids32 = &ids;
        {
          py::gil_scoped_release release;
          const Encoder encoder(std::move(vocab));
          encode_chunked_cpu(encoder, segments, chunk_bytes, lanes, out, ends);
        }
        return py::make_tuple(to_numpy(std::move(ids)), to_numpy(std::move(ends)));
      },
      py::arg("vocab"), py::arg("texts"), py::arg("chunk_bytes"), py::arg("lanes"));
}

}  // namespace

namespace gputok::bind {

void bind_core(py::module_& m) {
  bind::bind_fast_method_state(m);
  bind_gpu_tuning(m);
  using Bytes = std::optional<int64_t>;
  py::class_<Core>(m, "Core")
      .def(py::init<std::shared_ptr<const Vocab>, const std::string&, const std::string&, int,
                    size_t, bool, bool, int, Bytes, Bytes, Bytes, const GpuTuning&, size_t>(),
           py::arg("vocab"), py::arg("device") = "cpu", py::arg("algorithm") = "per_word",
           py::arg("device_id") = 0, py::arg("pool_limit") = 0, py::arg("gpu_pretokenize") = true,
           py::arg("blocking_sync") = false, py::arg("copy_threads") = 0,
           py::arg("cpu_below_bytes") = py::none(), py::arg("bytes_per_row") = py::none(),
           py::arg("stream_below_bytes") = py::none(), py::arg("tuning") = GpuTuning(),
           py::arg("gpu_cache_bytes") = GpuOptions{}.learned_cache_bytes)
      .def_property_readonly("gpu_tuning",
                             [](const Core& c) {
                               const GpuEncoder* g = c.tok().gpu();
                               return g ? py::cast(g->tuning()) : py::none();
                             })
      .def("encode_flat", &Core::encode_flat, py::arg("texts"), py::arg("allowed"),
           py::arg("disallowed"), py::arg("errors"), py::arg("num_threads"))
      .def("encode_flat_buffer", &Core::encode_flat_buffer, py::arg("data"), py::arg("offsets"),
           py::arg("allowed"), py::arg("disallowed"), py::arg("errors"), py::arg("num_threads"))
      .def("encode_packed", &Core::encode_packed, py::arg("texts"), py::arg("allowed"),
           py::arg("disallowed"), py::arg("errors"), py::arg("num_threads"), py::arg("separator"))
      .def("encode_packed_buffer", &Core::encode_packed_buffer, py::arg("data"), py::arg("offsets"),
           py::arg("allowed"), py::arg("disallowed"), py::arg("errors"), py::arg("num_threads"),
           py::arg("separator"))
      .def("encode_list", &Core::encode_list, py::arg("text"), py::arg("allowed"),
           py::arg("disallowed"), py::arg("errors"))
      .def("encode_numpy", &Core::encode_numpy, py::arg("text"), py::arg("allowed"),
           py::arg("disallowed"), py::arg("errors"))
      .def("encoder", &Core::encoder, py::arg("allowed"), py::arg("disallowed"), py::arg("errors"),
           py::arg("numpy") = false, py::arg("method") = py::none(), py::arg("target") = py::none(),
           py::arg("name") = "encode", py::arg("doc") = "")
      .def("encode_lists", &Core::encode_lists, py::arg("texts"), py::arg("allowed"),
           py::arg("disallowed"), py::arg("errors"), py::arg("num_threads"))
      .def("decode_bytes", &Core::decode_bytes)
      .def("gpu_counters", &Core::gpu_counters)
      .def("set_piece_cache_bytes", &Core::set_piece_cache_bytes, py::arg("bytes"))
      .def("piece_cache_stats", &Core::piece_cache_stats)
      .def("set_cpu_spin_us", &Core::set_cpu_spin_us, py::arg("us"))
      .def("cpu_spin_us", &Core::cpu_spin_us)
      .def("set_pool_limit", [](Core& c, size_t bytes) { c.tok().set_pool_limit(bytes); })
      .def("set_gpu_pretokenize", [](Core& c, bool on) { c.tok().set_gpu_pretokenize(on); })
      .def("set_crossover", &Core::set_crossover, py::arg("cpu_below_bytes"),
           py::arg("bytes_per_row"), py::arg("stream_below_bytes") = 0)
      .def_property_readonly("crossover", &Core::crossover)
      .def("learned_routes", &Core::learned_routes)
      .def("routes_to_gpu", [](const Core& c, size_t bytes,
                               size_t rows) { return c.tok().routes_to_gpu(bytes, rows); })
      .def_property_readonly("device", [](const Core& c) { return c.tok().device(); })
      .def_property_readonly("on_gpu", [](const Core& c) { return c.tok().on_gpu(); });
  // The rule alone, for tests on machines without a GPU.
  m.def("crossover_uses_cpu", [](size_t below, size_t per_row, size_t bytes, size_t rows) {
    return Crossover{below, per_row}.use_cpu(bytes, rows);
  });
  // encode()'s list builder alone (ids in a buffer -> list), for the benchmark and tests, over
  // the table as the Cores made so far grew it (ids past it become new ints);
  // threads: 0 = as encode() picks (by size), else at most that many.
  m.def(
      "ids_to_list",
      [](const py::array_t<int32_t, py::array::c_style>& ids, size_t threads) {
        return bind::IdList::at_least(0).list(ids.data(), size_t(ids.size()), threads);
      },
      py::arg("ids"), py::arg("threads") = 0);
  m.def("ids_immortal", [] { return bind::IdList::at_least(0).immortal(); });
  m.def(
      "default_crossover",
      [](size_t threads) {
        const Crossover c = threads ? default_crossover(threads) : default_crossover();
        return py::make_tuple(c.cpu_below_bytes, c.bytes_per_row, c.stream_below_bytes);
      },
      py::arg("threads") = 0);
}

}  // namespace gputok::bind
