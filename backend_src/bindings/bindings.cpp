// The _core module: its exceptions, translated once here, cuda_available, and its parts
// (core_module.h: the vocabulary and the stages, vocab_bindings.cpp; the tokenizer object,
// core_bindings.cpp), which convert types and release the GIL. No logic.
#include <pybind11/pybind11.h>

#include <exception>
#include <stdexcept>
#include <string>

#include "../csrc/encoder.h"
#include "../csrc/gpu_encoder.h"
#include "../csrc/tokenizer.h"
#include "../csrc/vocab.h"
#include "core_module.h"

namespace py = pybind11;
using namespace gputok;

PYBIND11_MODULE(_core, m) {
  m.doc() = "gputok native core (C++17, optional CUDA)";

  py::register_exception<VocabError>(m, "VocabError", PyExc_ValueError);
  py::register_exception<DeviceMemoryError>(m, "DeviceMemoryError", PyExc_MemoryError);
  py::register_exception<CudaError>(m, "CudaError", PyExc_RuntimeError);
  py::register_exception<CudaUnavailable>(m, "CudaUnavailableError", PyExc_RuntimeError);
  py::register_exception<Utf8Error>(m, "Utf8Error", PyExc_ValueError);
  py::register_exception<DisallowedSpecialError>(m, "DisallowedSpecialError", PyExc_ValueError);
  py::register_exception<IdRangeError>(m, "IdRangeError", PyExc_OverflowError);
  m.def("cuda_available", [] {
    std::string why;
    bool ok = false;
    {  // the first call initialises the driver (0.1-0.2 s): other threads go on meanwhile
      py::gil_scoped_release release;
      ok = cuda_available(&why);
    }
    return py::make_tuple(ok, why);
  });

  // The GPU's context made on a native thread while the caller parses a vocabulary
  // (gpu_encoder.h); returns at once.
  m.def("start_device", [](int device_id) { start_device(device_id); }, py::arg("device_id"));

  bind::bind_vocab(m);
  bind::bind_stages(m);
  bind::bind_core(m);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const std::out_of_range& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const py::cast_error& e) {  // an argument of the wrong type, not an internal error
      PyErr_SetString(PyExc_TypeError, e.what());
    }
  });
}
