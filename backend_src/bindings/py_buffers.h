// Buffer conversions shared by the extension modules' bindings (_core, _corpus_native).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <utility>

namespace gputok {
namespace py = pybind11;

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

// Moves a vector into a numpy array of element type T (the elements' bits as they are: T the
// same size) without copying: the capsule owns the vector.
template <typename T, typename V>
py::array_t<T> to_numpy_as(V&& v) {
  static_assert(sizeof(T) == sizeof(typename V::value_type), "the same bits, another type");
  auto* heap = new V(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<V*>(p); });
  return py::array_t<T>({py::ssize_t(heap->size())}, {py::ssize_t(sizeof(T))},
                        reinterpret_cast<const T*>(heap->data()), owner);
}

template <typename V, typename T = typename V::value_type>
py::array_t<T> to_numpy(V&& v) {
  return to_numpy_as<T>(std::move(v));
}

}  // namespace gputok
