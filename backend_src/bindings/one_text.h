// One text in, its ids out (encode(), encode_to_numpy()): the conversions of the latency
// path. Included by core_bindings.cpp (and convert.h); called with the GIL held.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "../csrc/tokenizer.h"
#include "id_list.h"
#include "py_buffers.h"

namespace gputok::bind {

namespace py = pybind11;

// Python text -> UTF-8 bytes without copying. A str's UTF-8 form is cached by CPython on
// the object, so the view stays valid while `keep` holds the objects. A str with lone
// surrogates cannot be UTF-8: tiktoken's fix-up (through UTF-16 with "replace") applies.
inline TextInput to_input(const py::handle& obj, std::vector<py::object>& keep) {
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

// A text below kHoldGilBytes on the CPU path is encoded with the GIL held: releasing and
// taking it back costs 70-100 ns uncontended (2-core machine, 2026-11-25), 5% of a 64-token
// call, and where other threads wait for the GIL, taking it back may wait out their switch
// interval (5 ms by default). 1 KiB is a few microseconds of encoding, what a pure-Python call
// on that much text holds it for; longer texts, and every call that goes to the GPU, release
// it.
constexpr size_t kHoldGilBytes = 1024;

inline void encode_one_text(const Tokenizer& tok, const py::handle& text, const EncodeArgs& a,
                            IdVector& ids) {
  std::vector<py::object> keep;
  const TextInput input = to_input(text, keep);
  const size_t n = input.bytes.size();
  if (n < kHoldGilBytes && !tok.routes_to_gpu(n, 1)) return tok.encode_one(input, a, ids);
  py::gil_scoped_release release;
  tok.encode_one(input, a, ids);
}

// This thread's id buffer for one call, kept for the thread's next call (no allocation) unless
// it grew past kSpareIds. It is taken out while in use, since building the result may run
// Python code (a collection's finalizers) that calls encode again.
class SpareIds {
 public:
  SpareIds() { ids.swap(slot()); }
  ~SpareIds() {
    if (ids.capacity() <= kSpareIds) ids.swap(slot());
  }
  SpareIds(const SpareIds&) = delete;
  SpareIds& operator=(const SpareIds&) = delete;
  IdVector ids;

 private:
  static constexpr size_t kSpareIds = size_t(1) << 16;
  static IdVector& slot() {
    static thread_local IdVector spare;
    return spare;
  }
};

// encode()'s list.
inline py::list one_text_list(const Tokenizer& tok, const IdList& ints, const py::handle& text,
                              const EncodeArgs& a) {
  SpareIds buf;
  encode_one_text(tok, text, a, buf.ids);
  return ints.list(buf.ids.data(), buf.ids.size());
}

// encode_to_numpy()'s array: uint32, the dtype tiktoken returns (the ids' bits as they are).
// Up to kCopyIds ids are copied into a fresh array out of the thread's spare buffer; longer
// results hand their buffer to the array (to_numpy_as), where a copy would cost more than the
// capsule. Before (2026-11-27, 2-core machine), every result went through a capsule and the
// facade's `.view(np.uint32)`: 0.35-0.57 us a call more than encode()'s list from 1 to 34 ids.
inline py::array_t<uint32_t> one_text_array(const Tokenizer& tok, const py::handle& text,
                                            const EncodeArgs& a) {
  constexpr size_t kCopyIds = 1024;
  SpareIds buf;
  encode_one_text(tok, text, a, buf.ids);
  if (buf.ids.size() > kCopyIds) return to_numpy_as<uint32_t>(std::move(buf.ids));
  py::array_t<uint32_t> out = new_uint32_array(buf.ids.size());
  if (!buf.ids.empty())
    std::memcpy(out.mutable_data(), buf.ids.data(), buf.ids.size() * sizeof(uint32_t));
  return out;
}

}  // namespace gputok::bind
