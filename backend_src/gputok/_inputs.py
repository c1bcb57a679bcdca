"""Type checks of the arguments that reach native code as raw memory: token ids and byte buffers.

A wrong type must raise TypeError here, before a conversion could make it look valid: numpy
casts ``[1.5, 2.7]`` to ``[1, 2]`` under ``dtype=int64``, and a buffer export of an object array
hands over its pointers as bytes.
"""

from __future__ import annotations

import operator

import numpy as np

_INT64_MAX = np.iinfo(np.int64).max


def token_array(tokens) -> np.ndarray:
    """``tokens`` (a sequence or array of ints) as a 1-D int64 array.

    TypeError for anything that is not an integer (floats, bools, strings, None); ValueError
    for an id outside int64 or a shape that is not 1-D.
    """
    arr = tokens if isinstance(tokens, np.ndarray) else np.asarray(_as_list(tokens))
    if arr.dtype.kind == "O":
        _check_python_ints(arr)
        raise ValueError("token id out of range (does not fit in 64 bits)")
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D sequence of token ids, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.size == 0:  # [] reads as float64
            return np.zeros(0, dtype=np.int64)
        raise TypeError(f"token ids must be integers, got an array of {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > _INT64_MAX:
        raise ValueError("token id out of range (does not fit in 64 bits)")
    return arr.astype(np.int64, copy=False)


def _as_list(tokens) -> list:
    if isinstance(tokens, (str, bytes, bytearray)):
        raise TypeError(f"token ids must be a sequence of ints, got {type(tokens).__name__}")
    return list(tokens)


def _check_python_ints(arr: np.ndarray) -> None:
    for x in arr.ravel().tolist():
        if isinstance(x, bool) or not isinstance(x, int):
            raise TypeError(f"token ids must be integers, got {type(x).__name__} {x!r}")


def token_id(token) -> int:
    """One token id as an int: TypeError for a float, str, bool or None (no truncation)."""
    if isinstance(token, (bool, np.bool_)):
        raise TypeError("a token id must be an integer, got bool")
    return operator.index(token)


def byte_buffer(data):
    """``data`` when it exports its memory as plain bytes; TypeError otherwise.

    Refused: str (text is not a buffer: encode it first), and buffers whose items are Python
    objects (an object array's memory is pointers, not text).
    """
    if isinstance(data, str):
        raise TypeError("a bytes-like object is required, not 'str' (pass text.encode())")
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(data).__name__!r}") from None
    with view:
        if "O" in view.format:
            raise TypeError("data is an array of Python objects; pass its bytes instead")
    return data
