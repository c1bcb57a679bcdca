// Python bindings of the corpus tool's native code (gputok._corpus_native): Parquet pages on
// the CPU or a GpuPageDecoder, text separators, uint16 packing. Conversions, the GIL released
// around native work, and exceptions translated; nothing else. The tokenizer (_core) knows
// nothing of this module.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "../csrc/corpus/gpu_page_decoder.h"
#include "../csrc/corpus/pack.h"
#include "../csrc/corpus/parquet.h"
#include "../csrc/corpus/read_files.h"
#include "../csrc/corpus/read_jsonl.h"
#include "../csrc/corpus/split.h"
#include "../csrc/corpus/write_files.h"
#include "../csrc/gpu_errors.h"
#include "../csrc/narrow.h"
#include "py_buffers.h"

namespace py = pybind11;
using namespace gputok;

namespace {

// Decoded Parquet pages (parquet.h) and a cursor over their rows' spans, a batch at a time.
struct ParquetPages {
  std::shared_ptr<ParquetValues> values;
  std::unique_ptr<ParquetSpanCursor> cursor;
  py::array_t<uint8_t> pages;  // over values->data, which its capsule keeps alive
};

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

ParquetCodec to_codec(const std::string& codec) {
  if (codec == "UNCOMPRESSED" || codec == "NONE") return ParquetCodec::kUncompressed;
  if (codec == "SNAPPY") return ParquetCodec::kSnappy;
  throw ParquetUnsupported("compression " + codec);
}

// Decoded pages as ParquetPages: a numpy view of them (its capsule keeps them alive) and a cursor.
ParquetPages pages_of(std::shared_ptr<ParquetValues> v) {
  ParquetPages out;
  auto* keep = new std::shared_ptr<ParquetValues>(v);
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<ParquetValues>*>(p); });
  out.pages = py::array_t<uint8_t>({py::ssize_t(v->size)}, {py::ssize_t(1)}, v->data.get(), owner);
  out.cursor = std::make_unique<ParquetSpanCursor>(*v);
  out.values = std::move(v);
  return out;
}

// Parquet column chunks lying in `buf` -> ParquetPages, snappy on `gpu` when given; GIL
// released.
ParquetPages parquet_decode_py(const py::object& buf, const std::string& codec, int64_t rows,
                               int max_def, const py::object& chunks, int64_t max_bytes,
                               PageDecompressor* gpu) {
  const std::vector<ParquetChunkRef> refs = to_chunk_refs(buf, chunks, rows);
  const ParquetCodec c = to_codec(codec);
  auto v = std::make_shared<ParquetValues>();
  {
    const ByteBuffer b(buf);
    py::gil_scoped_release release;
    *v = parquet_decode(static_cast<const uint8_t*>(b.view.buf), size_t(b.view.len), refs, c,
                        max_def, max_bytes, gpu);
  }
  return pages_of(std::move(v));
}

// parquet_read_file: (ParquetPages, file size, rows the footer claims, its row groups'
// total_byte_size), or None where the caller's own reader must decide; GIL released.
py::object parquet_read_file_py(const std::string& path, const std::string& column,
                                int64_t group_limit, int64_t max_out, int64_t max_rows) {
  ParquetFileRead r;
  {
    py::gil_scoped_release release;
    r = parquet_read_file(path, column, group_limit, max_out, max_rows);
  }
  if (!r.read) return py::none();
  auto pages = pages_of(std::make_shared<ParquetValues>(std::move(r.values)));
  return py::make_tuple(py::cast(std::move(pages)), r.size, r.rows_claimed, r.rg_bytes);
}

py::tuple parquet_footer_py(const py::bytes& footer, int leaf) {
  const std::string f = footer;
  const ParquetFooter r =
      parquet_footer(reinterpret_cast<const uint8_t*>(f.data()), f.size(), leaf);
  py::list chunks;
  using py::literals::operator""_a;
  for (const ParquetColumnChunkMeta& c : r.chunks) {
    // A hostile footer's path need not be UTF-8: decoded with U+FFFD for what is not, it never
    // names the column asked for (fuzz_parquet, 2026-11-28: a UnicodeDecodeError escaped).
    const py::object path = py::reinterpret_steal<py::object>(
        PyUnicode_DecodeUTF8(c.path.data(), py::ssize_t(c.path.size()), "replace"));
    if (!path) throw py::error_already_set();
    chunks.append(py::dict("rg_rows"_a = c.rg_rows, "rg_bytes"_a = c.rg_bytes, "codec"_a = c.codec,
                           "type"_a = c.type, "num_values"_a = c.num_values,
                           "compressed"_a = c.compressed, "data_page_offset"_a = c.data_page_offset,
                           "dictionary_page_offset"_a = c.dictionary_page_offset, "path"_a = path));
  }
  return py::make_tuple(r.num_rows, chunks);
}

py::tuple pack_uint16_py(const py::array_t<int32_t, py::array::c_style>& ids,
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
}

// Bytes-like in (no copy), int64 offsets out; the GIL is released while scanning.
py::array_t<int64_t> find_separators_py(const py::object& data, const py::bytes& sep) {
  const ByteBuffer buf(data);
  const std::string s = sep;
  std::vector<int64_t> at;
  {
    py::gil_scoped_release release;
    at = find_separators(static_cast<const uint8_t*>(buf.view.buf), size_t(buf.view.len),
                         reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  return to_numpy(std::move(at));
}

// A joined call's text files (read_files.h): (data uint8, ends, mtime_ns, spans (n, 2), docs,
// failed, errno), every array over its vector without a copy; the GIL released while reading.
py::tuple read_text_files_py(const std::vector<std::string>& paths, const py::object& sep,
                             int64_t max_bytes, int64_t reserve) {
  const bool split = !sep.is_none();
  const std::string s = split ? std::string(py::bytes(sep)) : std::string();
  TextFiles r;
  {
    py::gil_scoped_release release;
    r = read_text_files(paths, s, split, max_bytes, reserve);
  }
  const auto n_spans = py::ssize_t(r.spans.size() / 2);
  auto spans = to_numpy(std::move(r.spans)).reshape({n_spans, py::ssize_t(2)});
  return py::make_tuple(to_numpy(std::move(r.data)), to_numpy(std::move(r.ends)),
                        to_numpy(std::move(r.mtime_ns)), spans, to_numpy(std::move(r.docs)),
                        r.failed, r.error);
}

// A joined call's JSONL files (read_jsonl.h): (data uint8, spans (n, 2), docs, sizes,
// mtime_ns, failed, error, offset), arrays over the vectors; the GIL released while reading.
py::tuple read_jsonl_files_py(const std::vector<std::string>& paths, const std::string& field,
                              int64_t max_bytes, int64_t reserve) {
  JsonlFiles r;
  {
    py::gil_scoped_release release;
    r = read_jsonl_files(paths, field, max_bytes, reserve);
  }
  const auto n_spans = py::ssize_t(r.spans.size() / 2);
  auto spans = to_numpy(std::move(r.spans)).reshape({n_spans, py::ssize_t(2)});
  return py::make_tuple(to_numpy(std::move(r.data)), spans, to_numpy(std::move(r.docs)),
                        to_numpy(std::move(r.sizes)), to_numpy(std::move(r.mtime_ns)), r.failed,
                        r.error, r.offset);
}

// A joined call's shard files (write_files.h): shards, a list of shards, each a list of
// (tmp path, final path, [bytes-like parts]); per shard (errno, index of the file it failed
// on) or (0, -1). Every part is held as a buffer view while the GIL is released.
py::list write_shards_py(const py::list& shards, bool fsync) {
  std::vector<std::unique_ptr<ByteBuffer>> held;
  std::vector<std::vector<OutFile>> all;
  all.reserve(shards.size());
  for (const py::handle shard : shards) {
    std::vector<OutFile> files;
    if (!py::isinstance<py::sequence>(shard)) throw py::type_error("a shard is a list of files");
    for (const py::handle f : py::reinterpret_borrow<py::sequence>(shard)) {
      if (!py::isinstance<py::sequence>(f)) throw py::type_error("a file is (tmp, final, parts)");
      const auto t = py::reinterpret_borrow<py::sequence>(f);
      if (t.size() != 3) throw py::value_error("a file is (tmp, final, parts)");
      OutFile out{t[0].cast<std::string>(), t[1].cast<std::string>(), {}};
      for (const py::handle part : py::reinterpret_borrow<py::sequence>(t[2])) {
        held.push_back(std::make_unique<ByteBuffer>(py::reinterpret_borrow<py::object>(part)));
        const Py_buffer& v = held.back()->view;
        out.parts.push_back({static_cast<const uint8_t*>(v.buf), size_t(v.len)});
      }
      files.push_back(std::move(out));
    }
    all.push_back(std::move(files));
  }
  std::vector<WriteResult> results(all.size());
  {
    py::gil_scoped_release release;
    for (size_t i = 0; i < all.size(); ++i) results[i] = write_shard_files(all[i], fsync);
  }
  py::list out;
  for (const WriteResult& r : results) out.append(py::make_tuple(r.error, r.file));
  return out;
}

void bind_parquet(py::module_& m) {
  m.def(
      "parquet_decode",
      [](const py::object& chunk, const std::string& codec, int64_t rows, int max_def,
         const py::object& chunks, int64_t max_bytes) {
        return parquet_decode_py(chunk, codec, rows, max_def, chunks, max_bytes, nullptr);
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
  m.def("parquet_footer", &parquet_footer_py, py::arg("footer"), py::arg("leaf"));
  m.def("parquet_read_file", &parquet_read_file_py, py::arg("path"), py::arg("column"),
        py::arg("group_limit"), py::arg("max_out"), py::arg("max_rows"));
  // The schema's top-level names (bytes) and, for `column` where it is a top-level leaf,
  // (leaf index, physical type, repetition, converted type, logical type member; -1: none),
  // and whether the page reader takes it without pyarrow (parquet_plain_string).
  m.def(
      "parquet_schema",
      [](const py::bytes& footer, const std::string& column) {
        const std::string f = footer;
        const ParquetColumnSchema s =
            parquet_schema(reinterpret_cast<const uint8_t*>(f.data()), f.size(), column);
        py::list names;
        for (const std::string& n : s.names) names.append(py::bytes(n));
        return py::make_tuple(names, s.leaf, s.type, s.repetition, s.converted, s.logical,
                              parquet_plain_string(s));
      },
      py::arg("footer"), py::arg("column"));
  // A column chunk's page headers, walked before Arrow reads it (parquet.h:
  // parquet_page_header): (type, uncompressed, compressed, num_values, encoding, header_size).
  m.def(
      "parquet_page_header",
      [](const py::bytes& buf) {
        const std::string b = buf;
        const ParquetPageHeader h =
            parquet_page_header(reinterpret_cast<const uint8_t*>(b.data()), b.size());
        return py::make_tuple(h.type, h.uncompressed, h.compressed, h.num_values, h.encoding,
                              h.header_size);
      },
      py::arg("buf"));
  m.def(
      "parquet_plain_max_length",
      [](const py::object& page, int64_t num_values) {
        const ByteBuffer b(page);
        return parquet_plain_max_length(static_cast<const uint8_t*>(b.view.buf), size_t(b.view.len),
                                        num_values);
      },
      py::arg("page"), py::arg("num_values"));
}

void bind_gpu_decoder(py::module_& m) {
  py::class_<GpuPageDecoder>(m, "GpuPageDecoder")
      .def(py::init([](int device_id, size_t pool_limit_bytes, bool blocking_sync, int copy_threads,
                       uint32_t segment_bytes, const std::string& decode, bool profile,
                       const std::string& nvcomp_library) {
             PageDecoderOptions o;
             o.device_id = device_id;
             o.pool_limit_bytes = pool_limit_bytes;
             o.blocking_sync = blocking_sync;
             o.copy_threads = copy_threads;
             o.segment_bytes = segment_bytes;
             o.decode = decode;
             o.profile = profile;
             o.nvcomp_library = nvcomp_library;
             // Without the GIL: its set-up (the context, streams, pools) took 0.19 s of a
             // short run (py-spy, H100 host, 2026-11-27), which the other threads need not wait.
             std::unique_ptr<GpuPageDecoder> d;
             {
               py::gil_scoped_release release;
               d = std::make_unique<GpuPageDecoder>(std::move(o));
             }
             return d;
           }),
           py::arg("device_id") = 0, py::arg("pool_limit_bytes") = 0,
           py::arg("blocking_sync") = false, py::arg("copy_threads") = 0,
           py::arg("segment_bytes") = 0, py::arg("decode") = "", py::arg("profile") = false,
           py::arg("nvcomp_library") = "")
      .def(
          "parquet_decode",
          [](GpuPageDecoder& g, const py::object& chunk, const std::string& codec, int64_t rows,
             int max_def, const py::object& chunks, int64_t max_bytes) {
            return parquet_decode_py(chunk, codec, rows, max_def, chunks, max_bytes, &g);
          },
          py::arg("chunk"), py::arg("codec"), py::arg("rows"), py::arg("max_def"),
          py::arg("chunks") = py::none(), py::arg("max_bytes") = -1)
      .def_property_readonly("engine", &GpuPageDecoder::engine)
      .def_property_readonly("device_id",
                             [](const GpuPageDecoder& g) { return g.options().device_id; })
      .def("set_pool_limit", &GpuPageDecoder::set_pool_limit, py::arg("bytes"))
      .def("counters", [](const GpuPageDecoder& g) {
        const PageDecoderCounters c = g.counters();
        py::dict d;
        d["device_allocs"] = c.device_allocs;
        d["pinned_allocs"] = c.pinned_allocs;
        d["launches"] = c.launches;
        d["device_bytes"] = c.device_bytes;
        return d;
      });
}

// The GPU's errors as the tokenizer's public exceptions (gputok.DeviceMemoryError, a
// MemoryError, and gputok.CudaError), so that a caller catches one class whichever object
// ran out of device memory. Local to this module: _core translates its own.
void register_errors(py::module_& m) {
  py::register_exception<ParquetUnsupported>(m, "ParquetUnsupported", PyExc_NotImplementedError);
  py::register_exception<ParquetCorrupt>(m, "ParquetCorrupt", PyExc_ValueError);
  // A null value: args (message, row within the chunk).
  static py::exception<ParquetNull> parquet_null(m, "ParquetNull", PyExc_ValueError);
  const py::module_ gputok = py::module_::import("gputok");
  // Handles kept for the process's life (no decref after the interpreter is gone).
  static const py::handle memory_error = py::object(gputok.attr("DeviceMemoryError")).release();
  static const py::handle cuda_error = py::object(gputok.attr("CudaError")).release();
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ParquetNull& e) {
      PyErr_SetObject(parquet_null.ptr(), py::make_tuple(e.what(), e.row).ptr());
    } catch (const DeviceMemoryError& e) {
      PyErr_SetString(memory_error.ptr(), e.what());
    } catch (const CudaError& e) {
      PyErr_SetString(cuda_error.ptr(), e.what());
    }
  });
}

}  // namespace

PYBIND11_MODULE(_corpus_native, m) {
  m.doc() = "gputok corpus tool's native code: Parquet pages (CPU and GPU), separators, packing";
  register_errors(m);
  bind_parquet(m);
  bind_gpu_decoder(m);
  m.def("pack_uint16", &pack_uint16_py, py::arg("ids"), py::arg("offsets"), py::arg("sep"));
  m.def("find_separators", &find_separators_py, py::arg("data"), py::arg("sep"));
  m.def("read_text_files", &read_text_files_py, py::arg("paths"), py::arg("sep"),
        py::arg("max_bytes"), py::arg("reserve") = 0);
  m.def("read_jsonl_files", &read_jsonl_files_py, py::arg("paths"), py::arg("field"),
        py::arg("max_bytes"), py::arg("reserve") = 0);
  m.def("write_shards", &write_shards_py, py::arg("shards"), py::arg("fsync"));
  m.attr("JSONL_NOT_PLAIN") = kJsonlNotPlain;
}
