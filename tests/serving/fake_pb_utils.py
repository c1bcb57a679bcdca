"""A stand-in for Triton's `triton_python_backend_utils`, enough to run a model's execute().

As in TensorRT-LLM's backend tests, the model module's `pb_utils` is replaced by a fake, so
`initialize`/`execute` run in pytest without a server. Only what gputok's models call exists;
anything else raises AttributeError, which the test then shows.
"""

from __future__ import annotations

import json
import types

import numpy as np

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1


class TritonError(Exception):
    UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG, UNAVAILABLE, UNSUPPORTED, ALREADY_EXISTS = range(7)
    CANCELLED = 7

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self._message, self._code = message, code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code


class Tensor:
    def __init__(self, name: str, array):
        self._name, self._array = name, np.asarray(array)

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def is_cpu(self) -> bool:
        return True


class InferenceResponse:
    def __init__(self, output_tensors=(), error: TritonError | None = None):
        self.tensors = {t.name(): t.as_numpy() for t in output_tensors}
        self.error = error

    def has_error(self) -> bool:
        return self.error is not None


class ResponseSender:
    def __init__(self, cancel_after: int | None = None):
        self.sent: list[tuple[InferenceResponse | None, int]] = []
        self.cancel_after = cancel_after

    def send(self, response=None, flags: int = 0):
        if self.sent and self.sent[-1][1] & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            raise RuntimeError("send after the final flag")
        self.sent.append((response, flags))

    def is_cancelled(self) -> bool:
        return self.cancel_after is not None and len(self.sent) >= self.cancel_after


class InferenceRequest:
    def __init__(self, inputs: dict, requested=None, cancel_after: int | None = None):
        self._inputs = {k: Tensor(k, v) for k, v in inputs.items() if v is not None}
        self._requested = requested
        self.sender = ResponseSender(cancel_after)

    def inputs(self) -> list[Tensor]:
        return list(self._inputs.values())

    def requested_output_names(self):
        return list(self._requested) if self._requested is not None else []

    def get_response_sender(self) -> ResponseSender:
        return self.sender

    def is_cancelled(self) -> bool:
        # as Triton's Python backend (23.10+): seeing the cancellation ends the request
        if self.sender.is_cancelled():
            if (
                not self.sender.sent
                or not self.sender.sent[-1][1] & TRITONSERVER_RESPONSE_COMPLETE_FINAL
            ):
                self.sender.sent.append((None, TRITONSERVER_RESPONSE_COMPLETE_FINAL))
            return True
        return False


def get_input_tensor_by_name(request: InferenceRequest, name: str):
    return request._inputs.get(name)


def using_decoupled_model_transaction_policy(model_config: dict) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


class _Logger:
    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def log_info(self, m):
        self.lines.append(("info", m))

    def log_warn(self, m):
        self.lines.append(("warn", m))

    def log_error(self, m):
        self.lines.append(("error", m))

    def log_verbose(self, m):
        self.lines.append(("verbose", m))


def install(model_module) -> types.SimpleNamespace:
    """Point `model_module.pb_utils` at a fresh fake; returns it (its Logger keeps the log)."""
    fake = types.SimpleNamespace(
        TritonError=TritonError,
        Tensor=Tensor,
        InferenceResponse=InferenceResponse,
        get_input_tensor_by_name=get_input_tensor_by_name,
        using_decoupled_model_transaction_policy=using_decoupled_model_transaction_policy,
        TRITONSERVER_RESPONSE_COMPLETE_FINAL=TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        Logger=_Logger(),
    )
    model_module.pb_utils = fake
    return fake


def model_args(config: dict, repository: str = "", kind: str = "CPU") -> dict:
    return {
        "model_config": json.dumps(config),
        "model_instance_kind": kind,
        "model_instance_device_id": "0",
        "model_repository": repository,
    }
