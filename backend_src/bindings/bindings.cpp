// The one bindings file: converts types, releases the GIL, translates exceptions. No logic.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "../csrc/decode.h"
#include "../csrc/encoder.h"
#include "../csrc/gpu_encoder.h"
#include "../csrc/merge.h"
#include "../csrc/pack.h"
#include "../csrc/parquet.h"
#include "../csrc/pretokenize.h"
#include "../csrc/split.h"
#include "../csrc/vocab.h"

namespace py = pybind11;
using namespace gputok;

namespace {

// Python text -> UTF-8 bytes without copying. A str's UTF-8 form is cached by CPython on
// the object, so the view stays valid while `keep` holds the objects. A str with lone
// surrogates cannot be UTF-8: tiktoken's fix-up (through UTF-16 with "replace") applies.
struct Texts {
  std::vector<TextInput> inputs;
  std::vector<py::object> keep;
};

TextInput to_input(const py::handle& obj, std::vector<py::object>& keep) {
  if (PyUnicode_Check(obj.ptr())) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
    if (data == nullptr) {
      PyErr_Clear();
      py::object fixed =
          obj.attr("encode")("utf-16", "surrogatepass").attr("decode")("utf-16", "replace");
      keep.push_back(fixed);
      data = PyUnicode_AsUTF8AndSize(fixed.ptr(), &size);
      if (data == nullptr) throw py::error_already_set();
    }
    return TextInput{std::string_view(data, size_t(size)), true};
  }
  if (PyBytes_Check(obj.ptr())) {
    return TextInput{
        std::string_view(PyBytes_AS_STRING(obj.ptr()), size_t(PyBytes_GET_SIZE(obj.ptr()))), false};
  }
  if (PyByteArray_Check(obj.ptr()) || PyMemoryView_Check(obj.ptr())) {
    py::object copy = py::reinterpret_steal<py::object>(PyBytes_FromObject(obj.ptr()));
    if (!copy) throw py::error_already_set();
    keep.push_back(copy);
    return TextInput{
        std::string_view(PyBytes_AS_STRING(copy.ptr()), size_t(PyBytes_GET_SIZE(copy.ptr()))),
        false};
  }
  throw py::type_error(std::string("expected str or bytes, got ") + Py_TYPE(obj.ptr())->tp_name);
}

Texts to_texts(const py::sequence& seq) {
  Texts t;
  t.inputs.reserve(seq.size());
  t.keep.push_back(seq);
  for (const auto& item : seq) t.inputs.push_back(to_input(item, t.keep));
  return t;
}

// A contiguous bytes-like object's memory (PyBUF_SIMPLE: exporters refuse non-contiguous
// views), released on scope exit.
struct ByteBuffer {
  Py_buffer view{};
  explicit ByteBuffer(const py::object& obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
  }
  ~ByteBuffer() { PyBuffer_Release(&view); }
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;
};

// A contiguous buffer of UTF-8 bytes and document bounds into it -> views, no copy. `bounds`
// is int32 or int64: shape (n + 1,) boundaries (document i is data[b[i]:b[i+1]], b non-
// decreasing) or shape (n, 2) [start, end) spans (any order, gaps allowed). Bounds are checked
// here, since a bad one would read outside the buffer. The caller keeps `data` alive.
template <typename T>
std::vector<TextInput> buffer_views(const char* data, size_t size, const py::array& bounds) {
  const auto* b = static_cast<const T*>(bounds.data());
  const bool spans = bounds.ndim() == 2;
  const size_t n = spans ? size_t(bounds.shape(0)) : size_t(bounds.shape(0)) - 1;
  const auto in_range = [size](int64_t v) { return v >= 0 && uint64_t(v) <= size; };
  std::vector<TextInput> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t start = spans ? int64_t(b[2 * i]) : int64_t(b[i]);
    const int64_t end = spans ? int64_t(b[2 * i + 1]) : int64_t(b[i + 1]);
    if (!in_range(start) || !in_range(end) || end < start) {
      const std::string what =
          spans ? "span " + std::to_string(i) + " ["
                : "offsets[" + std::to_string(i) + ":" + std::to_string(i + 2) + "] [";
      throw py::value_error(what + std::to_string(start) + ", " + std::to_string(end) +
                            ") is not a range inside the buffer of " + std::to_string(size) +
                            " bytes (offsets must be non-decreasing, from 0 to its size)");
    }
    out.push_back(TextInput{std::string_view(data + start, size_t(end - start)), false});
  }
  return out;
}

// Moves a vector into a numpy array without copying: the capsule owns the vector.
template <typename V, typename T = typename V::value_type>
py::array_t<T> to_numpy(V&& v) {
  auto* heap = new V(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<V*>(p); });
  return py::array_t<T>({py::ssize_t(heap->size())}, {py::ssize_t(sizeof(T))}, heap->data(), owner);
}

Utf8Policy to_policy(const std::string& errors) {
  if (errors == "strict") return Utf8Policy::kStrict;
  if (errors == "replace") return Utf8Policy::kReplace;
  throw py::value_error("errors must be 'strict' or 'replace', got '" + errors + "'");
}

Algorithm to_algorithm(const std::string& name) {
  if (name == "per_word") return Algorithm::kPerWord;
  if (name == "blockbpe") return Algorithm::kBlockBpe;
  if (name == "blockbpe_optimized") return Algorithm::kBlockBpeOptimized;
  throw py::value_error("algorithm must be 'per_word', 'blockbpe' or 'blockbpe_optimized', got '" +
                        name + "'");
}

std::vector<std::string> to_token_list(const py::sequence& tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  for (const auto& t : tokens) out.push_back(t.cast<std::string>());
  return out;
}

std::vector<SpecialToken> to_specials(const py::dict& specials) {
  std::vector<SpecialToken> out;
  for (const auto& kv : specials)
    out.push_back({kv.first.cast<std::string>(), kv.second.cast<int32_t>()});
  return out;
}

// A tokenizer core: the vocabulary, the CPU encoder and, on device="cuda", a GPU encoder.
// Decoded Parquet pages (parquet.h) and a cursor over their rows' spans, a batch at a time.
struct ParquetPages {
  std::shared_ptr<ParquetValues> values;
  std::unique_ptr<ParquetSpanCursor> cursor;
  py::array_t<uint8_t> pages;  // over values->data, which its capsule keeps alive
};

// Parquet column chunks lying in `buf` at (offset, size, rows) each -> ParquetPages; GIL
// released.
ParquetPages parquet_decode_py(const py::object& buf, const std::vector<ParquetChunkRef>& chunks,
                               const std::string& codec, int max_def, int64_t max_bytes,
                               GpuEncoder* gpu) {
  ParquetCodec c;
  if (codec == "UNCOMPRESSED" || codec == "NONE")
    c = ParquetCodec::kUncompressed;
  else if (codec == "SNAPPY")
    c = ParquetCodec::kSnappy;
  else
    throw ParquetUnsupported("compression " + codec);
  auto v = std::make_shared<ParquetValues>();
  {
    const ByteBuffer b(buf);
    py::gil_scoped_release release;
    *v = parquet_decode(static_cast<const uint8_t*>(b.view.buf), size_t(b.view.len), chunks, c,
                        max_def, max_bytes, gpu);
  }
  ParquetPages out;
  auto* keep = new std::shared_ptr<ParquetValues>(v);
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<ParquetValues>*>(p); });
  out.pages = py::array_t<uint8_t>({py::ssize_t(v->size)}, {py::ssize_t(1)}, v->data.get(), owner);
  out.cursor = std::make_unique<ParquetSpanCursor>(*v);
  out.values = std::move(v);
  return out;
}

// `chunks`: a list of (offset, size, rows), or None for one chunk: all of buf with `rows` rows.
std::vector<ParquetChunkRef> to_chunk_refs(const py::object& buf, const py::object& chunks,
                                           int64_t rows) {
  std::vector<ParquetChunkRef> refs;
  if (chunks.is_none()) {
    if (rows < 0) throw py::value_error("rows must be >= 0");
    const ByteBuffer b(buf);
    refs.push_back({0, int64_t(b.view.len), rows});
    return refs;
  }
  for (const auto& item : chunks.cast<py::sequence>()) {
    const auto t = item.cast<std::tuple<int64_t, int64_t, int64_t>>();
    if (std::get<2>(t) < 0) throw py::value_error("rows must be >= 0");
    refs.push_back({std::get<0>(t), std::get<1>(t), std::get<2>(t)});
  }
  return refs;
}

class Core {
 public:
  Core(std::shared_ptr<const Vocab> vocab, const std::string& device, int device_id,
       size_t pool_limit, bool gpu_pretokenize, bool blocking_sync, int copy_threads)
      : vocab_(vocab), encoder_(vocab) {
    if (device == "cuda") {
      GpuOptions o;
      o.device_id = device_id;
      o.pool_limit_bytes = pool_limit;
      o.gpu_pretokenize = gpu_pretokenize;
      o.blocking_sync = blocking_sync;
      o.copy_threads = copy_threads;
      gpu_ = std::make_unique<GpuEncoder>(vocab, o);
    } else if (device != "cpu") {
      throw py::value_error("device must be 'cpu' or 'cuda', got '" + device + "'");
    }
  }

  py::tuple encode_flat(const py::sequence& texts, const std::vector<int32_t>& allowed,
                        const std::vector<int32_t>& disallowed, const std::string& errors,
                        int num_threads, const std::string& algorithm) {
    Texts t = to_texts(texts);
    return encode_flat_inputs(t.inputs, allowed, disallowed, errors, num_threads, algorithm);
  }

  // Documents as views into one bytes-like buffer (no Python object per document): the
  // same contract and result as encode_flat of the documents as bytes.
  py::tuple encode_flat_buffer(const py::object& data, const py::array& bounds,
                               const std::vector<int32_t>& allowed,
                               const std::vector<int32_t>& disallowed, const std::string& errors,
                               int num_threads, const std::string& algorithm) {
    const ByteBuffer buf(data);  // the export is held until we return
    return encode_flat_inputs(buffer_inputs(buf, bounds), allowed, disallowed, errors, num_threads,
                              algorithm);
  }

  // encode_flat / encode_flat_buffer packed as uint16 with `separator` (< 0: none) after every
  // text: (ids uint16, ends int64 of one per text, kernel_ms).
  py::tuple encode_packed(const py::sequence& texts, const std::vector<int32_t>& allowed,
                          const std::vector<int32_t>& disallowed, const std::string& errors,
                          int num_threads, const std::string& algorithm, int32_t separator) {
    Texts t = to_texts(texts);
    return encode_packed_inputs(t.inputs, allowed, disallowed, errors, num_threads, algorithm,
                                separator);
  }

  py::tuple encode_packed_buffer(const py::object& data, const py::array& bounds,
                                 const std::vector<int32_t>& allowed,
                                 const std::vector<int32_t>& disallowed, const std::string& errors,
                                 int num_threads, const std::string& algorithm, int32_t separator) {
    const ByteBuffer buf(data);
    return encode_packed_inputs(buffer_inputs(buf, bounds), allowed, disallowed, errors,
                                num_threads, algorithm, separator);
  }

  // The documents of a bytes-like buffer and their int32/int64 bounds, as views.
  static std::vector<TextInput> buffer_inputs(const ByteBuffer& buf, const py::array& bounds) {
    const bool spans = bounds.ndim() == 2 && bounds.shape(1) == 2;
    if (!(bounds.flags() & py::array::c_style) || !(spans || bounds.ndim() == 1) ||
        (!spans && bounds.shape(0) < 1))
      throw py::value_error(
          "offsets must be a C-contiguous int32/int64 array of shape (n + 1,) or (n, 2)");
    const auto* base = static_cast<const char*>(buf.view.buf);
    const size_t size = size_t(buf.view.len);
    std::vector<TextInput> inputs;
    if (bounds.dtype().is(py::dtype::of<int64_t>()))
      inputs = buffer_views<int64_t>(base, size, bounds);
    else if (bounds.dtype().is(py::dtype::of<int32_t>()))
      inputs = buffer_views<int32_t>(base, size, bounds);
    else
      throw py::type_error("offsets must be int32 or int64, got " +
                           std::string(py::str(bounds.dtype())));
    return inputs;
  }

  // One text, ids as a list: the latency path of encode()/encode_ordinary() on the CPU.
  py::list encode_list(const py::handle& text, const std::vector<int32_t>& allowed,
                       const std::vector<int32_t>& disallowed, const std::string& errors,
                       const std::string& algorithm) {
    std::vector<py::object> keep;
    std::vector<TextInput> inputs{to_input(text, keep)};
    const SpecialPolicy policy{allowed, disallowed};
    const Utf8Policy utf8 = to_policy(errors);
    const Algorithm alg = to_algorithm(algorithm);
    std::vector<int32_t> ids;
    {
      py::gil_scoped_release release;
      if (gpu_) {
        const IdVector gpu_ids = encoder_.encode_batch_gpu(*gpu_, alg, inputs, policy, utf8).ids;
        ids.assign(gpu_ids.begin(), gpu_ids.end());
      } else {
        encoder_.encode_one(inputs[0], policy, utf8, ids);
      }
    }
    py::list out(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) PyList_SET_ITEM(out.ptr(), i, PyLong_FromLong(ids[i]));
    return out;
  }

  py::bytes decode_bytes(
      const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& ids) {
    std::string out;
    {
      py::gil_scoped_release release;
      gputok::decode_bytes(*vocab_, ids.data(), size_t(ids.size()), out);
    }
    return py::bytes(out);
  }

  py::dict gpu_counters() const {
    py::dict d;
    if (!gpu_) return d;
    const GpuCounters c = gpu_->counters();
    d["device_allocs"] = c.device_allocs;
    d["pinned_allocs"] = c.pinned_allocs;
    d["launches"] = c.launches;
    d["device_bytes"] = c.device_bytes;
    return d;
  }

  void set_pool_limit(size_t bytes) {
    if (!gpu_) throw py::value_error("set_pool_limit needs device='cuda'");
    gpu_->set_pool_limit(bytes);
  }

  void set_cpu_below_bytes(size_t bytes) {
    if (!gpu_) throw py::value_error("set_cpu_below_bytes needs device='cuda'");
    gpu_->set_cpu_below_bytes(bytes);
  }

  void set_gpu_pretokenize(bool on) {
    if (!gpu_) throw py::value_error("gpu_pretokenize needs device='cuda'");
    gpu_->set_gpu_pretokenize(on);
  }

  bool on_gpu() const { return gpu_ != nullptr; }

  void set_piece_cache_bytes(size_t bytes) { encoder_.set_piece_cache_bytes(bytes); }

  py::dict piece_cache_stats() const {
    const PieceCacheStats st = encoder_.piece_cache_stats();
    py::dict d;
    d["capacity_bytes"] = st.capacity_bytes;
    d["entries"] = st.entries;
    d["max_entries"] = st.max_entries;
    d["arena_used"] = st.arena_used;
    d["arena_bytes"] = st.arena_bytes;
    return d;
  }

  // Parquet pages decompressed on this encoder's GPU when it has one (parquet.h).
  ParquetPages parquet_decode(const py::object& chunk, const std::string& codec, int64_t rows,
                              int max_def, const py::object& chunks, int64_t max_bytes) {
    return parquet_decode_py(chunk, to_chunk_refs(chunk, chunks, rows), codec, max_def, max_bytes,
                             gpu_.get());
  }

 private:
  std::shared_ptr<const Vocab> vocab_;
  // (ids, offsets, kernel_ms) of `inputs` on the GPU encoder when there is one, else the CPU
  // one; the GIL is released meanwhile.
  py::tuple encode_flat_inputs(const std::vector<TextInput>& inputs,
                               const std::vector<int32_t>& allowed,
                               const std::vector<int32_t>& disallowed, const std::string& errors,
                               int num_threads, const std::string& algorithm) {
    const SpecialPolicy policy{allowed, disallowed};
    const Utf8Policy utf8 = to_policy(errors);
    const Algorithm alg = to_algorithm(algorithm);
    EncodeResult r;
    {
      py::gil_scoped_release release;
      if (gpu_) {
        r = encoder_.encode_batch_gpu(*gpu_, alg, inputs, policy, utf8);
      } else {
        r = encoder_.encode_batch(inputs, policy, utf8, num_threads);
      }
    }
    return py::make_tuple(to_numpy(std::move(r.ids)), to_numpy(std::move(r.offsets)), r.kernel_ms);
  }

  py::tuple encode_packed_inputs(const std::vector<TextInput>& inputs,
                                 const std::vector<int32_t>& allowed,
                                 const std::vector<int32_t>& disallowed, const std::string& errors,
                                 int num_threads, const std::string& algorithm, int32_t separator) {
    if (separator > 0xFFFF)
      throw py::value_error("separator must be below 65536 (or negative: none)");
    const SpecialPolicy policy{allowed, disallowed};
    const Utf8Policy utf8 = to_policy(errors);
    const Algorithm alg = to_algorithm(algorithm);
    PackedResult r;
    {
      py::gil_scoped_release release;
      r = encoder_.encode_batch_packed(gpu_.get(), alg, inputs, policy, utf8, separator,
                                       num_threads);
    }
    return py::make_tuple(to_numpy(std::move(r.ids)), to_numpy(std::move(r.ends)), r.kernel_ms);
  }

  Encoder encoder_;
  std::unique_ptr<GpuEncoder> gpu_;  // thread-safe: concurrent calls run on slots of their own
};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "gputok native core (C++17, optional CUDA)";

  py::register_exception<VocabError>(m, "VocabError", PyExc_ValueError);
  py::register_exception<DeviceMemoryError>(m, "DeviceMemoryError", PyExc_MemoryError);
  py::register_exception<CudaError>(m, "CudaError", PyExc_RuntimeError);
  py::register_exception<Utf8Error>(m, "Utf8Error", PyExc_ValueError);
  py::register_exception<DisallowedSpecialError>(m, "DisallowedSpecialError", PyExc_ValueError);
  py::register_exception<IdRangeError>(m, "IdRangeError", PyExc_OverflowError);
  py::register_exception<ParquetUnsupported>(m, "ParquetUnsupported", PyExc_NotImplementedError);
  py::register_exception<ParquetCorrupt>(m, "ParquetCorrupt", PyExc_ValueError);
  // A null value: args (message, row within the chunk).
  static py::exception<ParquetNull> parquet_null(m, "ParquetNull", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ParquetNull& e) {
      PyErr_SetObject(parquet_null.ptr(), py::make_tuple(e.what(), e.row).ptr());
    }
  });
  m.def(
      "parquet_decode",
      [](const py::object& chunk, const std::string& codec, int64_t rows, int max_def,
         const py::object& chunks, int64_t max_bytes) {
        return parquet_decode_py(chunk, to_chunk_refs(chunk, chunks, rows), codec, max_def,
                                 max_bytes, nullptr);
      },
      py::arg("chunk"), py::arg("codec"), py::arg("rows"), py::arg("max_def"),
      py::arg("chunks") = py::none(), py::arg("max_bytes") = -1);
  py::class_<ParquetPages>(m, "ParquetPages")
      .def_readonly("pages", &ParquetPages::pages)
      .def_property_readonly("rows", [](const ParquetPages& p) { return p.values->rows; })
      .def_property_readonly("row", [](const ParquetPages& p) { return p.cursor->row(); })
      .def(
          "spans",
          [](ParquetPages& p, int64_t max_rows, int64_t max_bytes) {
            std::vector<int64_t> spans;
            {
              py::gil_scoped_release release;
              p.cursor->next(max_rows, max_bytes, spans);
            }
            py::array_t<int64_t> a = to_numpy(std::move(spans));
            return a.reshape({py::ssize_t(a.size() / 2), py::ssize_t(2)});
          },
          py::arg("max_rows"), py::arg("max_bytes") = 0);
  m.def(
      "parquet_footer",
      [](const py::bytes& footer, int leaf) {
        const std::string f = footer;
        const ParquetFooter r =
            parquet_footer(reinterpret_cast<const uint8_t*>(f.data()), f.size(), leaf);
        py::list chunks;
        for (const ParquetColumnChunkMeta& c : r.chunks) {
          py::dict d;
          d["rg_rows"] = c.rg_rows;
          d["rg_bytes"] = c.rg_bytes;
          d["codec"] = c.codec;
          d["type"] = c.type;
          d["num_values"] = c.num_values;
          d["compressed"] = c.compressed;
          d["data_page_offset"] = c.data_page_offset;
          d["dictionary_page_offset"] = c.dictionary_page_offset;
          d["path"] = c.path;
          chunks.append(d);
        }
        return py::make_tuple(r.num_rows, chunks);
      },
      py::arg("footer"), py::arg("leaf"));

  m.def("cuda_available", [] {
    std::string why;
    const bool ok = cuda_available(&why);
    return py::make_tuple(ok, why);
  });

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
             // Pretokenization alone, for tests: list of (start, length).
             std::string s = text;
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
             std::vector<int32_t> out;
             merge_piece_reference(v.view(), reinterpret_cast<const uint8_t*>(s.data()), s.size(),
                                   out);
             return out;
           })
      .def("merge", [](const Vocab& v, const py::bytes& piece) {
        std::string s = piece;
        if (s.empty()) throw py::value_error("empty piece");
        std::vector<int32_t> out;
        MergeScratch scratch;
        {
          py::gil_scoped_release release;
          merge_piece(v.view(), reinterpret_cast<const uint8_t*>(s.data()), s.size(), out, scratch);
        }
        return out;
      });

  m.def("char_class", [](uint32_t cp) {
    if (cp > kMaxCodepoint) throw py::value_error("code point out of range");
    return int(char_class(unicode_table(), cp));
  });
  m.def("utf8_replace", [](const py::bytes& b) {
    std::string s = b;
    return py::bytes(utf8_replace_invalid(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  });
  m.def(
      "pack_uint16",
      [](const py::array_t<int32_t, py::array::c_style>& ids,
         const py::array_t<int64_t, py::array::c_style>& offsets, int32_t sep) {
        if (offsets.ndim() != 1 || offsets.shape(0) < 1)
          throw py::value_error("offsets must have shape (n + 1,)");
        const size_t n_docs = size_t(offsets.shape(0) - 1);
        const int64_t* off = offsets.data();
        py::array_t<uint16_t> out(pack_uint16_size(off, n_docs, size_t(ids.size()), sep));
        py::array_t<int64_t> ends(n_docs);
        int64_t bad;
        {
          py::gil_scoped_release release;
          bad = pack_uint16(ids.data(), off, n_docs, sep, out.mutable_data(), ends.mutable_data());
        }
        return py::make_tuple(out, ends, bad);
      },
      py::arg("ids"), py::arg("offsets"), py::arg("sep"));
  // Bytes-like in (no copy), int64 offsets out; the GIL is released while scanning.
  m.def(
      "find_separators",
      [](const py::object& data, const py::bytes& sep) {
        const ByteBuffer buf(data);
        const std::string s = sep;
        std::vector<int64_t> at;
        {
          py::gil_scoped_release release;
          at = find_separators(static_cast<const uint8_t*>(buf.view.buf), size_t(buf.view.len),
                               reinterpret_cast<const uint8_t*>(s.data()), s.size());
        }
        return to_numpy(std::move(at));
      },
      py::arg("data"), py::arg("sep"));
  // Bytes-like in, offset out; no copy of the buffer (the GIL is released while scanning).
  m.def("utf8_first_invalid", [](const py::object& data) {
    const ByteBuffer buf(data);
    py::gil_scoped_release release;
    return utf8_first_invalid(static_cast<const uint8_t*>(buf.view.buf), size_t(buf.view.len));
  });
  m.def("utf8_first_invalid_reference", [](const py::object& data) {
    const ByteBuffer buf(data);
    py::gil_scoped_release release;
    return utf8_first_invalid_reference(static_cast<const uint8_t*>(buf.view.buf),
                                        size_t(buf.view.len));
  });

  py::class_<Core>(m, "Core")
      .def(py::init<std::shared_ptr<const Vocab>, const std::string&, int, size_t, bool, bool,
                    int>(),
           py::arg("vocab"), py::arg("device") = "cpu", py::arg("device_id") = 0,
           py::arg("pool_limit") = 0, py::arg("gpu_pretokenize") = true,
           py::arg("blocking_sync") = false, py::arg("copy_threads") = 0)
      .def("encode_flat", &Core::encode_flat, py::arg("texts"), py::arg("allowed"),
           py::arg("disallowed"), py::arg("errors"), py::arg("num_threads"), py::arg("algorithm"))
      .def("encode_flat_buffer", &Core::encode_flat_buffer, py::arg("data"), py::arg("offsets"),
           py::arg("allowed"), py::arg("disallowed"), py::arg("errors"), py::arg("num_threads"),
           py::arg("algorithm"))
      .def("encode_packed", &Core::encode_packed, py::arg("texts"), py::arg("allowed"),
           py::arg("disallowed"), py::arg("errors"), py::arg("num_threads"), py::arg("algorithm"),
           py::arg("separator"))
      .def("encode_packed_buffer", &Core::encode_packed_buffer, py::arg("data"), py::arg("offsets"),
           py::arg("allowed"), py::arg("disallowed"), py::arg("errors"), py::arg("num_threads"),
           py::arg("algorithm"), py::arg("separator"))
      .def("encode_list", &Core::encode_list, py::arg("text"), py::arg("allowed"),
           py::arg("disallowed"), py::arg("errors"), py::arg("algorithm"))
      .def("decode_bytes", &Core::decode_bytes)
      .def("parquet_decode", &Core::parquet_decode, py::arg("chunk"), py::arg("codec"),
           py::arg("rows"), py::arg("max_def"), py::arg("chunks") = py::none(),
           py::arg("max_bytes") = -1)
      .def("gpu_counters", &Core::gpu_counters)
      .def("set_pool_limit", &Core::set_pool_limit)
      .def("set_gpu_pretokenize", &Core::set_gpu_pretokenize)
      .def("set_piece_cache_bytes", &Core::set_piece_cache_bytes, py::arg("bytes"))
      .def("piece_cache_stats", &Core::piece_cache_stats)
      .def("set_cpu_below_bytes", &Core::set_cpu_below_bytes)
      .def_property_readonly("on_gpu", &Core::on_gpu);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const std::out_of_range& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
}
