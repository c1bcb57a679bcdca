// Python arguments -> the tokenizer facade's types (tokenizer.h): texts as views, the token list
// and specials of a vocabulary, an offsets array, a separator, the encode policy, a crossover.
// Shared by the _core module's bindings (core_bindings.cpp, vocab_bindings.cpp); called with the
// GIL held.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../csrc/tokenizer.h"
#include "../csrc/vocab.h"
#include "one_text.h"

namespace gputok::bind {

namespace py = pybind11;

// Texts as views (one_text.h's to_input), and what keeps them valid.
struct Texts {
  std::vector<TextInput> inputs;
  std::vector<py::object> keep;
};

inline Texts to_texts(const py::sequence& seq) {
  Texts t;
  t.inputs.reserve(seq.size());
  t.keep.push_back(seq);
  for (const auto& item : seq) t.inputs.push_back(to_input(item, t.keep));
  return t;
}

inline std::vector<std::string> to_token_list(const py::sequence& tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  for (const auto& t : tokens) out.push_back(t.cast<std::string>());
  return out;
}

inline std::vector<SpecialToken> to_specials(const py::dict& specials) {
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
inline Bounds to_bounds(const py::array& bounds) {
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
inline std::optional<int64_t> to_separator(const py::object& sep) {
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

inline EncodeArgs to_args(std::vector<int32_t> allowed, std::vector<int32_t> disallowed,
                          const std::string& errors, int num_threads) {
  return EncodeArgs{SpecialPolicy{std::move(allowed), std::move(disallowed)},
                    parse_utf8_policy(errors), num_threads};
}

// None for all three: the device's default rule; else the unset ones are 0.
inline std::optional<Crossover> to_crossover(std::optional<int64_t> below,
                                             std::optional<int64_t> per_row,
                                             std::optional<int64_t> stream_below) {
  if (!below && !per_row && !stream_below) return std::nullopt;
  return Crossover::checked(below.value_or(0), per_row.value_or(0), stream_below.value_or(0));
}

}  // namespace gputok::bind
