"""What gputok's three Triton Python-backend models (tokenizer, gpt2, detokenizer) share.

The model.py files under `model_repository/` import this module from the installed gputok
package: the Python-backend stub runs in the environment that has gputok (`gputok-serve` checks
that before it starts the server), so the helper needs no copy in each model folder. It is pure
Python and imports no native code of its own; it needs neither Triton nor a server, so every
rule below is unit-tested directly (tests/serving/test_model_common.py).

- `settings_from_params`: a frozen dataclass of settings from config.pbtxt `parameters`, one
  conversion per field type, so the three models parse the same way.
- `RequestError` and `error_code`: one mapping of exceptions to Triton codes for every model.
  The input is at fault (INVALID_ARG) for ValueError (UnicodeError, gputok's VocabError and
  RequestError are ValueErrors), TypeError and OverflowError; anything else is INTERNAL.
- `error_response`: the one place a Python exception becomes a `TritonError` response.
- `TensorsByBatch`: output tensors that depend on a request's batch size alone, made once per
  batch size (the tokenizer model and the gigatoken baseline model both keep them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

S = TypeVar("S")

INPUT_FAULTS = (ValueError, TypeError, OverflowError)
TRUE_WORDS = frozenset({"1", "true", "t", "yes", "y", "on"})
FALSE_WORDS = frozenset({"0", "false", "f", "no", "n", "off"})


class RequestError(ValueError):
    """The request at fault gets INVALID_ARG with this message; its batch-mates are unaffected."""


def param(params: Mapping, key: str, default: str | None) -> str | None:
    """One config.pbtxt parameter as a string: Triton passes {key: {"string_value": v}}."""
    v = params.get(key)
    if v is None:
        return default
    if isinstance(v, dict):
        v = v.get("string_value", default)
    return str(v)


def parse_bool(value: str, key: str) -> bool:
    v = value.strip().lower()
    if v in TRUE_WORDS:
        return True
    if v in FALSE_WORDS:
        return False
    raise ValueError(f"{key} must be true or false, not {value!r}")


def _kind(field: dataclasses.Field) -> str:
    """ "int", "str" or "bool"; `int | None` counts as int (None: unset, its default)."""
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
    return kind.removesuffix(" | None")


def _convert(field: dataclasses.Field, raw: str) -> Any:
    kind = _kind(field)
    if kind == "bool":
        return parse_bool(raw, field.name)
    if kind == "int":
        try:
            return int(raw.strip())
        except ValueError:
            raise ValueError(f"{field.name} must be an integer, not {raw!r}") from None
    if kind == "str":
        return raw.strip()
    raise TypeError(f"settings field {field.name} has unsupported type {kind!r}")


def settings_from_params(cls: type[S], params: Mapping, lower: tuple[str, ...] = ()) -> S:
    """An instance of the frozen dataclass `cls` from config `parameters`.

    Each field reads the parameter of its own name. A missing parameter keeps the field's
    default, and so does an empty one for a number or a flag; an empty string is a value for a
    string field (`disallowed_special: ""` means "none"). Fields named in `lower` are
    lower-cased (enumerations such as device). Raises ValueError naming the parameter on a value
    of the wrong type; choices are the caller's check.
    """
    values = {}
    for f in dataclasses.fields(cls):
        raw = param(params, f.name, None)
        if raw is None or (raw.strip() == "" and _kind(f) != "str"):
            continue
        v = _convert(f, raw)
        values[f.name] = v.lower() if f.name in lower else v
    return cls(**values)


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")


def error_code(e: BaseException) -> str:
    """INVALID_ARG where the input is at fault, INTERNAL for anything else."""
    return "INVALID_ARG" if isinstance(e, INPUT_FAULTS) else "INTERNAL"


def error_response(pb_utils, e: BaseException):
    """The failed request's response: one TritonError with the code `error_code` gives."""
    code = getattr(pb_utils.TritonError, error_code(e))
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e), code))


def input_array(pb_utils, request, name: str) -> np.ndarray | None:
    """The named input of a request as a host numpy array, or None when it is absent."""
    t = pb_utils.get_input_tensor_by_name(request, name)
    return None if t is None else t.as_numpy()


def input_arrays(request) -> dict[str, np.ndarray]:
    """Every input a request carries, by name, as host numpy arrays, from one pass over
    `request.inputs()`: `get_input_tensor_by_name` scans that list once per name asked for,
    ~0.55 us a name in the real stub (fourteen names: 8 us of a 128-token request's ~30 us of
    Python, 2026-11-27, 2-core machine). Triton refuses inputs the config does not declare."""
    return {t.name(): t.as_numpy() for t in request.inputs()}


def max_batch_size(model_config: Mapping) -> int:
    """The model's max_batch_size (0 when the model does not batch)."""
    return int(model_config.get("max_batch_size", 0) or 0)


class TensorsByBatch:
    """Output tensors that depend on a request's batch size alone (what a request carrying only
    its text gets besides its ids), each made once per batch size by ``make(batch)`` -> {name:
    array}, so the same Tensor goes into every such response: the stub saves it to shared
    memory once, and the backend reads it by handle under its reference count. Building seven
    Tensors a request took 25 us of the stub's time on the 2-core machine (2026-11-27:
    pb_utils.Tensor is ~3.5 us each, its dtype found by up to 12 numpy comparisons). At most
    max_batch_size sizes are kept."""

    def __init__(self, make: Callable[[int], Mapping[str, np.ndarray]]):
        self._make = make
        self._made: dict[int, list] = {}

    def get(self, pb_utils, batch: int, wanted) -> list:
        """The tensors for `batch` rows, only those named in `wanted` (None: all)."""
        made = self._made.get(batch)
        if made is None:
            made = [(name, pb_utils.Tensor(name, a)) for name, a in self._make(batch).items()]
            self._made[batch] = made
        return [t for name, t in made if wanted is None or name in wanted]
