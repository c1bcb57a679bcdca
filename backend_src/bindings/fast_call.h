// A C++ callable of one Python argument as a builtin function (METH_FASTCALL). Included by
// core_bindings.cpp for the calls whose per-call cost matters (encode() of a short text).
//
// Why: pybind11's dispatcher tries each overload, gathers the arguments into vectors and runs
// a type caster per argument; for encode_list(text, allowed, disallowed, errors) that was ~1,400
// of a 64-token call's ~18,500 instructions (callgrind, 2-core machine, 2026-11-25), plus the
// two policy lists converted to vectors on every call. A builtin function made once per
// policy takes the text alone: CPython calls it directly (vectorcall), and the conversion is
// the callable's own. Exceptions go through pybind11's registered translators, as from any
// bound function.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <memory>
#include <utility>

namespace gputok::bind {

namespace py = pybind11;

struct FastCall {
  std::function<py::object(py::handle)> fn;
  py::object owner;  // kept alive while the function lives (the object `fn` refers to)
};

inline constexpr const char* kFastCallCapsule = "gputok.FastCall";

inline PyObject* fast_call_entry(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto* call = static_cast<FastCall*>(PyCapsule_GetPointer(self, kFastCallCapsule));
  if (call == nullptr) return nullptr;
  if (nargs != 1) {
    PyErr_Format(PyExc_TypeError, "encode() takes exactly one argument (%zd given)", nargs);
    return nullptr;
  }
  try {
    return call->fn(args[0]).release().ptr();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// A builtin function `encode(x)` that returns fn(x); `owner` lives as long as it does.
inline py::object make_fast_call(std::function<py::object(py::handle)> fn, py::object owner) {
  static PyMethodDef def{
      "encode", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_call_entry)),
      METH_FASTCALL, "encode(text): one text's ids with the policy this function was made for"};
  auto call = std::make_unique<FastCall>(FastCall{std::move(fn), std::move(owner)});
  py::capsule capsule(call.get(), kFastCallCapsule, [](PyObject* c) {
    delete static_cast<FastCall*>(PyCapsule_GetPointer(c, kFastCallCapsule));
  });
  call.release();  // the capsule owns it now
  PyObject* f = PyCFunction_NewEx(&def, capsule.ptr(), nullptr);
  if (f == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(f);
}

}  // namespace gputok::bind
