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
#include <vector>

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
// a __dict__, so that the collector traverses it). Its __dict__ holds `target`, the
// Tokenizer: the Tokenizer holds the builtin and the builtin holds it, a cycle the collector
// sees and frees (a strong reference held by a C++ member instead leaked every Tokenizer).
// The C++ side keeps only a weak reference to it, for the method's call. A builtin pickles
// as getattr(its self, its name) and this state as its target's reduction, so a pickled
// tok.encode comes back as the new Tokenizer's encode, as a pickled bound method did
// (multiprocessing's pool.map(tok.encode, ...)).
struct FastMethod {
  std::function<py::object(py::handle)> fn;
  py::object owner;       // the object `fn` refers to (the native Core: no cycle)
  py::object method;      // the class's function, called as method(target, *args, **kwargs)
  py::object target_ref;  // weakref.ref(target)
  std::string name, doc;
  PyMethodDef def{};  // its name and doc; the state outlives the builtin that points here
};

// The class's method on the target, with the arguments as they came (vectorcall: no tuple or
// dict built; the target goes first in a copy of the argument array).
inline PyObject* call_method(const FastMethod& m, PyObject* const* args, Py_ssize_t nargs,
                             PyObject* kwnames) {
  py::object keep;                // the target, alive for the call
#if PY_VERSION_HEX >= 0x030D0000  // PyWeakref_GetObject is deprecated from 3.13
  PyObject* strong = nullptr;
  if (PyWeakref_GetRef(m.target_ref.ptr(), &strong) < 0) return nullptr;
  keep = py::reinterpret_steal<py::object>(strong);  // null once freed
#else
  PyObject* borrowed = PyWeakref_GetObject(m.target_ref.ptr());  // None once freed
  if (borrowed == nullptr) return nullptr;
  if (borrowed != Py_None) keep = py::reinterpret_borrow<py::object>(borrowed);
#endif
  if (!keep) {
    PyErr_Format(PyExc_ReferenceError, "%s: its Tokenizer was freed", m.name.c_str());
    return nullptr;
  }
  PyObject* target = keep.ptr();
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject* small[8];
  std::vector<PyObject*> large;
  PyObject** all = small;
  if (nargs + nkw + 1 > 8) {
    large.resize(size_t(nargs + nkw + 1));
    all = large.data();
  }
  all[0] = target;
  for (Py_ssize_t i = 0; i < nargs + nkw; ++i) all[i + 1] = args[i];
  return PyObject_Vectorcall(m.method.ptr(), all, size_t(nargs + 1), kwnames);
}

// The builtin's self is only ever the FastMethodState make_fast_method gave it (a builtin's
// __self__ cannot be set), a class with no base: its value sits in pybind11's simple layout,
// read without the registered-type lookup of a cast (~30 ns a call).
inline const FastMethod& state_of(PyObject* self) {
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  if (inst->simple_layout) return *static_cast<const FastMethod*>(inst->simple_value_holder[0]);
  return py::handle(self).cast<const FastMethod&>();
}

// One positional argument and no keywords take fn; any other call goes to the class's method.
inline PyObject* fast_method_entry(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kwnames) {
  try {
    const FastMethod& m = state_of(self);
    if (nargs != 1 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0))
      return call_method(m, args, nargs, kwnames);
    return m.fn(args[0]).release().ptr();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// The FastMethodState class (once per module) and, per call, a builtin
// `name(text, *args, **kwargs)`: fn(text) for one positional argument and no keywords,
// method(target, *args, **kwargs) otherwise (the facade's Python method, which resolves the
// keywords). The facade sets it on each Tokenizer in place of its method: tok.encode(text)
// then skips a Python frame: 64 tokens 827 against 930 ns on the H200 host, 907 against 1,068
// on the 2-core dev VM (2026-11-29, bench/bench_fast_methods.py); a call with a keyword costs
// up to ~50 ns more than the method did (one native hop).
inline void bind_fast_method_state(py::module_& m) {
  py::class_<FastMethod>(m, "FastMethodState", py::dynamic_attr())
      .def("__reduce__",
           [](const py::object& self) { return self.attr("target").attr("__reduce__")(); });
}

inline py::object make_fast_method(std::function<py::object(py::handle)> fn, py::object owner,
                                   const py::object& method, const py::object& target,
                                   std::string name, std::string doc) {
  auto state = std::make_unique<FastMethod>();
  state->fn = std::move(fn);
  state->owner = std::move(owner);
  state->method = method;
  state->target_ref = py::reinterpret_steal<py::object>(PyWeakref_NewRef(target.ptr(), nullptr));
  if (!state->target_ref) throw py::error_already_set();
  state->name = std::move(name);
  state->doc = std::move(doc);
  state->def =
      PyMethodDef{state->name.c_str(),
                  reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_method_entry)),
                  METH_FASTCALL | METH_KEYWORDS, state->doc.c_str()};
  PyMethodDef* def = &state->def;
  py::object self = py::cast(std::move(state));  // owned by Python from here
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
