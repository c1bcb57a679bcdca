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

// encode()'s list. A CPU call's id buffer is kept for this thread's next call (no
// allocation) unless it grew past kSpareIds; it is taken out while in use, since building the
// list may run Python code (a collection's finalizers) that calls encode again.
inline py::list one_text_list(const Tokenizer& tok, const IdList& ints, const py::handle& text,
                              const EncodeArgs& a) {
  constexpr size_t kSpareIds = size_t(1) << 16;
  static thread_local IdVector spare;
  IdVector ids;
  ids.swap(spare);
  encode_one_text(tok, text, a, ids);
  py::list out = ints.list(ids.data(), ids.size());
  if (ids.capacity() <= kSpareIds) ids.swap(spare);
  return out;
}

// encode_to_numpy()'s array: uint32, the dtype tiktoken returns (the ids' bits as they are).
// Up to kCopyIds ids are copied into a fresh array out of this thread's spare buffer, as
// one_text_list does; longer results hand their buffer to the array (a capsule owns it), where
// a copy would cost more than the capsule. Before (2026-11-27, 2-core machine), every result
// went through a capsule and the facade's `.view(np.uint32)`: 0.35-0.57 us a call more than
// encode()'s list from 1 to 34 ids.
inline py::array_t<uint32_t> one_text_array(const Tokenizer& tok, const py::handle& text,
                                            const EncodeArgs& a) {
  constexpr size_t kCopyIds = 1024, kSpareIds = size_t(1) << 16;
  static thread_local IdVector spare;
  IdVector ids;
  ids.swap(spare);
  encode_one_text(tok, text, a, ids);
  const auto n = py::ssize_t(ids.size());
  if (ids.size() <= kCopyIds) {
    py::array_t<uint32_t> out(n);
    if (n) std::memcpy(out.mutable_data(), ids.data(), ids.size() * sizeof(uint32_t));
    if (ids.capacity() <= kSpareIds) ids.swap(spare);
    return out;
  }
  auto* heap = new IdVector(std::move(ids));
  py::capsule owner(heap, [](void* p) { delete static_cast<IdVector*>(p); });
  return py::array_t<uint32_t>({n}, {py::ssize_t(sizeof(uint32_t))},
                               reinterpret_cast<const uint32_t*>(heap->data()), owner);
}

}  // namespace gputok::bind
