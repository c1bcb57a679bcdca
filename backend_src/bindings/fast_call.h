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
#include <string>
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

// make_fast_method's state: the builtin's `self`, a FastMethodState (a pybind11 instance with
// a __dict__, so that the collector traverses it). Its __dict__ holds `fallback` and `target`,
// the Tokenizer: the Tokenizer holds the builtin and the builtin holds it, a cycle the collector
// sees and frees (held by C++ members instead, no Tokenizer would ever be freed). A builtin
// pickles as getattr(its self, its name) and this state as its target's reduction, so a pickled
// tok.encode comes back as the new Tokenizer's encode, as a pickled bound method did
// (multiprocessing's pool.map(tok.encode, ...)).
struct FastMethod {
  std::function<py::object(py::handle)> fn;
  py::object owner;  // the object `fn` refers to (the native Core: no cycle)
  std::string name, doc;
  PyMethodDef def{};  // its name and doc; the state outlives the builtin that points here
};

// One positional argument and no keywords take fn; any other call goes to the fallback as it
// came (vectorcall: the same arguments, no tuple or dict built).
inline PyObject* fast_method_entry(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kwnames) {
  try {
    if (nargs != 1 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)) {
      const py::object fallback = py::handle(self).attr("fallback");
      return PyObject_Vectorcall(fallback.ptr(), args, size_t(nargs), kwnames);
    }
    return py::handle(self).cast<const FastMethod&>().fn(args[0]).release().ptr();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// The FastMethodState class (once per module) and, per call, a builtin
// `name(text, *args, **kwargs)`: fn(text) for one positional argument and no keywords,
// fallback(*args, **kwargs) otherwise (the facade's method bound to `target`, which resolves
// the keywords). The facade sets it on each Tokenizer in place of its method: tok.encode(text)
// then skips a Python frame, ~0.17-0.19 us of a 64-token call's ~1.1 (2-core dev VM,
// 2026-11-29).
inline void bind_fast_method_state(py::module_& m) {
  py::class_<FastMethod>(m, "FastMethodState", py::dynamic_attr())
      .def("__reduce__",
           [](const py::object& self) { return self.attr("target").attr("__reduce__")(); });
}

inline py::object make_fast_method(std::function<py::object(py::handle)> fn, py::object owner,
                                   const py::object& fallback, const py::object& target,
                                   std::string name, std::string doc) {
  auto state = std::make_unique<FastMethod>();
  state->fn = std::move(fn);
  state->owner = std::move(owner);
  state->name = std::move(name);
  state->doc = std::move(doc);
  state->def =
      PyMethodDef{state->name.c_str(),
                  reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_method_entry)),
                  METH_FASTCALL | METH_KEYWORDS, state->doc.c_str()};
  PyMethodDef* def = &state->def;
  py::object self = py::cast(std::move(state));  // owned by Python from here
  self.attr("fallback") = fallback;
  self.attr("target") = target;
  PyObject* f = PyCFunction_NewEx(def, self.ptr(), nullptr);
  if (f == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(f);
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
