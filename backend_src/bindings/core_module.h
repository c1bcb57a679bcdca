// The parts of the _core module (bindings.cpp makes the module and its exceptions): each binds
// its own names on it. Bindings convert types and release the GIL; nothing else.
#pragma once

#include <pybind11/pybind11.h>

namespace gputok::bind {

// The vocabulary and its stages' reference entry points, for tests (vocab_bindings.cpp).
void bind_vocab(pybind11::module_& m);
void bind_stages(pybind11::module_& m);
// GpuTuning, the Core object over the tokenizer facade, and the id-list and crossover helpers
// (core_bindings.cpp).
void bind_core(pybind11::module_& m);

}  // namespace gputok::bind
