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

// A new 1-D uint32 array of n elements (uninitialized), made by numpy's C API with a dtype
// looked up once: pybind11's array_t(n) builds shape and stride vectors and a dtype on every
// call. Measured (dev VM, 2026-11-27, best of 5 loops): encode_to_numpy("") 0.352 -> 0.301
// us, of a 64-token text 0.835 -> 0.809.
inline py::array_t<uint32_t> new_uint32_array(size_t n) {
  auto& api = py::detail::npy_api::get();
  static PyObject* const descr = py::dtype::of<uint32_t>().release().ptr();  // kept for good
  Py_INCREF(descr);  // PyArray_NewFromDescr takes a reference
  Py_intptr_t dims[1] = {Py_intptr_t(n)};
  PyObject* a =
      api.PyArray_NewFromDescr_(api.PyArray_Type_, descr, 1, dims, nullptr, nullptr, 0, nullptr);
  if (!a) throw py::error_already_set();
  return py::reinterpret_steal<py::array_t<uint32_t>>(a);
}

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
