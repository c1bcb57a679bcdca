// The one bindings file: converts types, releases the GIL, translates exceptions. No logic.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "../csrc/ascii_classify.h"
#include "../csrc/chunk_pipeline.h"
#include "../csrc/decode.h"
#include "../csrc/encoder.h"
#include "../csrc/gpu_encoder.h"
#include "../csrc/merge.h"
#include "../csrc/pretokenize.h"
#include "../csrc/tokenizer.h"
#include "../csrc/vocab.h"
#include "fast_call.h"
#include "id_list.h"
#include "one_text.h"
#include "py_buffers.h"

namespace py = pybind11;
using namespace gputok;

namespace {

// Texts as views (one_text.h's to_input), and what keeps them valid.
struct Texts {
  std::vector<TextInput> inputs;
  std::vector<py::object> keep;
};

Texts to_texts(const py::sequence& seq) {
  Texts t;
  t.inputs.reserve(seq.size());
  t.keep.push_back(seq);
  for (const auto& item : seq) t.inputs.push_back(bind::to_input(item, t.keep));
  return t;
}

std::vector<std::string> to_token_list(const py::sequence& tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  for (const auto& t : tokens) out.push_back(t.cast<std::string>());
  return out;
}

std::vector<SpecialToken> to_specials(const py::dict& specials) {
  std::vector<SpecialToken> out;
  for (const auto& kv : specials) {
    const auto id = kv.second.cast<int64_t>();
    if (id < 0 || id > INT32_MAX) throw VocabError("special token id out of range");
    out.push_back({kv.first.cast<std::string>(), int32_t(id)});
  }
  return out;
}

// Python's "offsets" array -> the facade's Bounds (the array's layout and dtype; the facade
// checks the values against the buffer).
Bounds to_bounds(const py::array& bounds) {
  if (!(bounds.flags() & py::array::c_style))
    throw py::value_error(
        "offsets must be a C-contiguous int32/int64 array of shape (n + 1,) or (n, 2)");
  const bool spans = bounds.ndim() == 2 && bounds.shape(1) == 2;
  if (!spans && bounds.ndim() != 1) {
    std::string shape = bounds.ndim() == 0 ? "a scalar" : "(";
    for (py::ssize_t d = 0; d < bounds.ndim(); ++d)
      shape += (d ? ", " : "") + std::to_string(bounds.shape(d));
    if (bounds.ndim() > 0) shape += bounds.ndim() == 1 ? ",)" : ")";
    throw py::value_error("offsets must have shape (n + 1,) or (n, 2), got " + shape);
  }
  const bool wide = bounds.dtype().is(py::dtype::of<int64_t>());
  if (!wide && !bounds.dtype().is(py::dtype::of<int32_t>()))
    throw py::type_error("offsets must be int32 or int64, got " +
                         std::string(py::str(bounds.dtype())));
  return Bounds{bounds.data(), wide, spans, size_t(bounds.shape(0))};
}

// A separator argument: None -> none, else a Python or numpy int (not a bool), whose range the
// facade checks.
std::optional<int64_t> to_separator(const py::object& sep) {
  if (sep.is_none()) return std::nullopt;
  const bool numpy_int = py::isinstance(sep, py::module_::import("numpy").attr("integer"));
  if (PyBool_Check(sep.ptr()) || !(PyLong_Check(sep.ptr()) || numpy_int))
    throw py::type_error(std::string("separator must be an int or None, got ") +
                         Py_TYPE(sep.ptr())->tp_name);
  const py::int_ value = py::reinterpret_steal<py::int_>(PyNumber_Index(sep.ptr()));
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  return overflow > 0 ? INT64_MAX : overflow < 0 ? INT64_MIN : int64_t(v);
}

EncodeArgs to_args(std::vector<int32_t> allowed, std::vector<int32_t> disallowed,
                   const std::string& errors, int num_threads) {
  return EncodeArgs{SpecialPolicy{std::move(allowed), std::move(disallowed)},
                    parse_utf8_policy(errors), num_threads};
}

std::optional<Crossover> to_crossover(std::optional<int64_t> below,
                                      std::optional<int64_t> per_row) {
  if (!below && !per_row) return std::nullopt;
  return Crossover::checked(below.value_or(0), per_row.value_or(0));
}

// The Python object over the facade: arguments in, results out, the GIL released meanwhile.
class Core {
 public:
  Core(std::shared_ptr<const Vocab> vocab, const std::string& device, const std::string& algorithm,
       int device_id, size_t pool_limit, bool gpu_pretokenize, bool blocking_sync, int copy_threads,
       std::optional<int64_t> cpu_below_bytes, std::optional<int64_t> bytes_per_row,
       const GpuTuning& tuning)
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
    if (auto c = to_crossover(cpu_below_bytes, bytes_per_row)) {
      o.crossover = *c;
      o.crossover_given = true;
    }
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

  // One text's ids as a list (encode) or an int32 array (encode_to_numpy).
  py::list encode_list(const py::handle& text, std::vector<int32_t> allowed,
                       std::vector<int32_t> disallowed, const std::string& errors) {
    return list_of(text, to_args(std::move(allowed), std::move(disallowed), errors, 0));
  }

  py::array_t<int32_t> encode_numpy(const py::handle& text, std::vector<int32_t> allowed,
                                    std::vector<int32_t> disallowed, const std::string& errors) {
    return numpy_of(text, to_args(std::move(allowed), std::move(disallowed), errors, 0));
  }

  // encode_list / encode_numpy with this policy as a builtin function of the text alone
  // (fast_call.h): the facade's call for its common policies.
  static py::object encoder(const py::object& self, std::vector<int32_t> allowed,
                            std::vector<int32_t> disallowed, const std::string& errors,
                            bool numpy) {
    const Core& c = self.cast<const Core&>();
    const auto a = std::make_shared<const EncodeArgs>(
        to_args(std::move(allowed), std::move(disallowed), errors, 0));
    if (numpy)
      return bind::make_fast_call([&c, a](py::handle t) { return c.numpy_of(t, *a); }, self);
    return bind::make_fast_call([&c, a](py::handle t) { return c.list_of(t, *a); }, self);
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
    return d;
  }

  void set_crossover(int64_t below, int64_t per_row) {
    tok_->set_crossover(Crossover::checked(below, per_row));
  }
  py::tuple crossover() const {
    const Crossover c = tok_->crossover();
    return py::make_tuple(c.cpu_below_bytes, c.bytes_per_row);
  }

  void set_piece_cache_bytes(size_t bytes) { tok_->set_piece_cache_bytes(bytes); }

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

  py::array_t<int32_t> numpy_of(const py::handle& text, const EncodeArgs& a) const {
    IdVector ids;
    bind::encode_one_text(*tok_, text, a, ids);
    return to_numpy(std::move(ids));
  }

  const bind::IdList& ints_;
  std::unique_ptr<Tokenizer> tok_;
};

// The vocabulary and the stages' reference entry points (tests).
void bind_vocab(py::module_& m) {
  py::class_<Vocab, std::shared_ptr<Vocab>>(m, "Vocab")
      .def_static(
          "from_ranks",
          [](const py::sequence& tokens, const py::dict& specials) {
            auto t = to_token_list(tokens);
            auto s = to_specials(specials);
            py::gil_scoped_release release;
            return std::make_shared<Vocab>(Vocab::from_ranks(std::move(t), std::move(s)));
          },
          py::arg("tokens"), py::arg("specials"))
      .def_static(
          "from_merges",
          [](const py::sequence& tokens,
             const std::vector<std::pair<std::string, std::string>>& merges,
             const py::dict& specials) {
            auto t = to_token_list(tokens);
            auto s = to_specials(specials);
            py::gil_scoped_release release;
            return std::make_shared<Vocab>(Vocab::from_merges(std::move(t), merges, std::move(s)));
          },
          py::arg("tokens"), py::arg("merges"), py::arg("specials"))
      .def_property_readonly("n_vocab", &Vocab::n_vocab)
      .def_property_readonly("n_pairs", &Vocab::n_pairs)
      .def_property_readonly("table_capacity", [](const Vocab& v) { return v.pair_capacity(); })
      .def("pair",
           [](const Vocab& v, uint32_t left, uint32_t right) -> py::object {
             const uint64_t value = pair_lookup(v.pair_view(), left, right);
             if (value == kEmptyKey) return py::none();
             return py::make_tuple(pair_merged(value), pair_rank(value));
           })
      .def("token_bytes",
           [](const Vocab& v, int64_t id) {
             try {
               return py::bytes(std::string(v.token_bytes(id)));
             } catch (const std::out_of_range& e) {
               throw py::value_error(e.what());
             }
           })
      .def("pieces",
           [](const Vocab&, const py::bytes& text) {
             // Pretokenization alone, for tests: list of (start, length). The scanner reads
             // a lead byte's whole sequence, so invalid UTF-8 is refused before it runs.
             std::string s = text;
             if (s.size() > UINT32_MAX) throw py::value_error("pieces() takes < 4 GiB");
             const auto* p = reinterpret_cast<const uint8_t*>(s.data());
             const size_t bad = utf8_first_invalid(p, s.size());
             if (bad < s.size()) throw Utf8Error(0, bad, p[bad]);
             std::vector<Piece> pieces;
             pretokenize(unicode_table(), reinterpret_cast<const uint8_t*>(s.data()), s.size(),
                         pieces);
             py::list out;
             for (const auto& p : pieces) out.append(py::make_tuple(p.start, p.len));
             return out;
           })
      .def("merge_reference",
           [](const Vocab& v, const py::bytes& piece) {
             std::string s = piece;
             if (s.empty()) throw py::value_error("empty piece");
             // The reference merge is O(n^2): a bound keeps a test hook from hanging.
             if (s.size() > 8192) throw py::value_error("merge_reference takes <= 8192 bytes");
             std::vector<int32_t> out;
             merge_piece_reference(v.view(), reinterpret_cast<const uint8_t*>(s.data()), s.size(),
                                   out);
             return out;
           })
      .def("merge", [](const Vocab& v, const py::bytes& piece) {
        std::string s = piece;
        if (s.empty()) throw py::value_error("empty piece");
        if (s.size() > INT32_MAX) throw py::value_error("a piece must be < 2 GiB");  // int32 links
        std::vector<int32_t> out;
        MergeScratch scratch;
        {
          py::gil_scoped_release release;
          merge_piece(v.view(), reinterpret_cast<const uint8_t*>(s.data()), s.size(), out, scratch);
        }
        return out;
      });
}

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
      .def_readwrite("lean_take_early", &GpuTuning::lean_take_early)
      .def_readwrite("pair_sparser", &GpuTuning::pair_sparser)
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

void bind_core(py::module_& m) {
  bind_gpu_tuning(m);
  using Bytes = std::optional<int64_t>;
  py::class_<Core>(m, "Core")
      .def(py::init<std::shared_ptr<const Vocab>, const std::string&, const std::string&, int,
                    size_t, bool, bool, int, Bytes, Bytes, const GpuTuning&>(),
           py::arg("vocab"), py::arg("device") = "cpu", py::arg("algorithm") = "per_word",
           py::arg("device_id") = 0, py::arg("pool_limit") = 0, py::arg("gpu_pretokenize") = true,
           py::arg("blocking_sync") = false, py::arg("copy_threads") = 0,
           py::arg("cpu_below_bytes") = py::none(), py::arg("bytes_per_row") = py::none(),
           py::arg("tuning") = GpuTuning())
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
           py::arg("numpy") = false)
      .def("encode_lists", &Core::encode_lists, py::arg("texts"), py::arg("allowed"),
           py::arg("disallowed"), py::arg("errors"), py::arg("num_threads"))
      .def("decode_bytes", &Core::decode_bytes)
      .def("gpu_counters", &Core::gpu_counters)
      .def("set_piece_cache_bytes", &Core::set_piece_cache_bytes, py::arg("bytes"))
      .def("piece_cache_stats", &Core::piece_cache_stats)
      .def("set_pool_limit", [](Core& c, size_t bytes) { c.tok().set_pool_limit(bytes); })
      .def("set_gpu_pretokenize", [](Core& c, bool on) { c.tok().set_gpu_pretokenize(on); })
      .def("set_crossover", &Core::set_crossover, py::arg("cpu_below_bytes"),
           py::arg("bytes_per_row"))
      .def_property_readonly("crossover", &Core::crossover)
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
  m.def("default_crossover", [] {
    const Crossover c = default_crossover();
    return py::make_tuple(c.cpu_below_bytes, c.bytes_per_row);
  });
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "gputok native core (C++17, optional CUDA)";

  py::register_exception<VocabError>(m, "VocabError", PyExc_ValueError);
  py::register_exception<DeviceMemoryError>(m, "DeviceMemoryError", PyExc_MemoryError);
  py::register_exception<CudaError>(m, "CudaError", PyExc_RuntimeError);
  py::register_exception<CudaUnavailable>(m, "CudaUnavailableError", PyExc_RuntimeError);
  py::register_exception<Utf8Error>(m, "Utf8Error", PyExc_ValueError);
  py::register_exception<DisallowedSpecialError>(m, "DisallowedSpecialError", PyExc_ValueError);
  py::register_exception<IdRangeError>(m, "IdRangeError", PyExc_OverflowError);
  m.def("cuda_available", [] {
    std::string why;
    const bool ok = cuda_available(&why);
    return py::make_tuple(ok, why);
  });

  bind_vocab(m);

  m.def("char_class", [](uint32_t cp) {
    if (cp > kMaxCodepoint) throw py::value_error("code point out of range");
    return int(char_class(unicode_table(), cp));
  });
  m.def("utf8_replace", [](const py::bytes& b) {
    std::string s = b;
    return py::bytes(utf8_replace_invalid(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  });
  // Bytes-like in, offset out; no copy of the buffer (the GIL is released while scanning).
  m.def("utf8_first_invalid", [](const py::object& data) {
    const ByteBuffer buf(data);
    py::gil_scoped_release release;
    return utf8_first_invalid(static_cast<const uint8_t*>(buf.view.buf), size_t(buf.view.len));
  });
  // The pretokenizer's fast scanner (use_masks) or its reference, for tests: piece lengths.
  m.def(
      "scan_pieces",
      [](const py::bytes& text, bool use_masks, size_t many) {
        const std::string s = text;
        const auto* data = reinterpret_cast<const uint8_t*>(s.data());
        if (utf8_first_invalid(data, s.size()) != s.size())
          throw py::value_error("scan_pieces needs valid UTF-8");
        py::gil_scoped_release release;
        return scan_piece_lengths(unicode_table(), data, s.size(), use_masks, many);
      },
      py::arg("text"), py::arg("use_masks") = true, py::arg("many") = 32);
  // Byte class masks of up to 64 bytes (AVX2 where the CPU has it, or the portable twin).
  m.def(
      "classify64",
      [](const py::bytes& text, bool portable) {
        const std::string s = text;
        const auto* p = reinterpret_cast<const uint8_t*>(s.data());
        const size_t n = s.size() < 64 ? s.size() : 64;
        const AsciiMasks a = portable ? classify64_portable(p, n) : classify64(p, n);
        return py::make_tuple(a.letter, a.digit, a.space, a.nonascii);
      },
      py::arg("text"), py::arg("portable") = false);
  m.def("classify_has_avx2", &classify_has_avx2);
  m.def("utf8_first_invalid_reference", [](const py::object& data) {
    const ByteBuffer buf(data);
    py::gil_scoped_release release;
    return utf8_first_invalid_reference(static_cast<const uint8_t*>(buf.view.buf),
                                        size_t(buf.view.len));
  });

  bind_core(m);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const std::out_of_range& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const py::cast_error& e) {  // an argument of the wrong type, not an internal error
      PyErr_SetString(PyExc_TypeError, e.what());
    }
  });
}
