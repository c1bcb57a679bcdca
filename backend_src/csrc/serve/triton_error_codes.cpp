// Loaded into tritonserver with LD_PRELOAD by gputok-serve and the Docker image's entry point,
// so that a request body that is not JSON, or JSON whose fields have the wrong type, is
// answered with HTTP 400 instead of 500. Nothing of the tokenizer is here: this library is a
// serving tool and depends on nothing but libc.
//
// Why (server and common at r24.10, unchanged on their main branches in 2026): Triton's HTTP
// frontend (src/http_server.cc) includes its JSON wrapper, triton/common/triton_json.h, with
// TRITONJSON_STATUSRETURN defined as TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, msg),
// so every parse or type error of a client's body becomes INTERNAL, which HttpCodeFromError
// maps to 500; the wrappers around it (RETURN_MSG_IF_ERR: "Unable to parse 'inputs': ...")
// keep the code they are given. No option of tritonserver changes it, and no model sees such a
// request. The tritonserver binary calls TRITONSERVER_ErrorNew through libtritonserver.so's
// dynamic symbol, so a definition loaded first takes the call: this one turns INTERNAL into
// INVALID_ARG (400) for exactly the messages TritonJson's readers create, and passes every
// other call through unchanged.
//
// What it relabels: "failed to parse the request JSON buffer: ..." (rapidjson's error) and
// TritonJson's read errors, "attempt to access JSON non-<type> as <type>" and "attempt to
// access non-existing object member / array index '...'". Its write errors ("attempt to add
// JSON member ...") are Triton's own bugs and stay INTERNAL. Cost: one prefix test per error
// created, none per successful request.
#include <cstring>

#include "triton_c_api.h"

namespace {

using gputok_serve::kErrorInternal;
using gputok_serve::kErrorInvalidArg;

// The messages TritonJson's readers create (triton/common/triton_json.h).
constexpr const char* kClientJsonErrors[] = {
    "failed to parse the request JSON buffer",
    "attempt to access JSON non-",
    "attempt to access non-existing ",
};

// An INTERNAL error whose message one of TritonJson's readers created: the client's body.
bool relabelled(int code, const char* msg) {
  if (code != kErrorInternal || msg == nullptr) return false;
  for (const char* prefix : kClientJsonErrors)
    if (std::strncmp(msg, prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) TRITONSERVER_Error* TRITONSERVER_ErrorNew(
    int code, const char* msg) {
  return gputok_serve::error_new(relabelled(code, msg) ? kErrorInvalidArg : code, msg);
}

// For the tests (tests/serving/test_triton_preload.py): which messages are relabelled,
// without a tritonserver.
extern "C" __attribute__((visibility("default"))) int gputok_relabels_json_error(int code,
                                                                                 const char* msg) {
  return relabelled(code, msg) ? 1 : 0;
}
