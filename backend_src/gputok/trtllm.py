"""TensorRT-LLM's `preprocessing` semantics on a gputok Tokenizer, for the Triton tokenizer model.

TensorRT-LLM's Triton models (NVIDIA/TensorRT-LLM, triton_backend/all_models/
inflight_batcher_llm/preprocessing/1/model.py) turn stop words, bad words and embedding-bias
words into tensors the engine reads. These functions give the same tensors from a gputok
Tokenizer, so gputok's tokenizer model can stand in for theirs:

- `word_list_ids`: STOP_WORDS_DICT / BAD_WORDS_DICT [batch, n] strings -> [batch, 2, width]
  int32. Row b holds, in [b, 0], the ids of all its words back to back (0-padded) and, in
  [b, 1], the cumulative end offset of each word (-1-padded); width = max(1, longest id run).
  Empty words are skipped. No words at all -> [batch, 2, 0].
- `embedding_bias`: EMBEDDING_BIAS_WORDS [batch, n] + EMBEDDING_BIAS_WEIGHTS [batch, n] ->
  float32 [batch, n_vocab], each word's weight added at each of its ids (repeated ids add up).
  Either input missing -> [batch, 0].

- `refuse_multimodal`: IMAGE_BYTES, IMAGE_URL and VIDEO_BYTES, optional multimodal inputs of
  their contract, are declared so that a client written for it is not refused at the door;
  GPT-2 has no vision, so a request that carries a non-empty one gets an error of its own.

Words are tokenized as their Hugging Face tokenizer does it there (special-token text such as
`<|endoftext|>` becomes the special id) and must be valid UTF-8: a word that is not is the
request's error (ValueError), not a silent replacement.
"""

from __future__ import annotations

import numpy as np


def _words(row) -> list[bytes]:
    out = []
    for w in np.asarray(row, dtype=np.object_).reshape(-1):
        if isinstance(w, str):
            w = w.encode("utf-8", "surrogatepass")
        if not isinstance(w, bytes):
            raise ValueError(f"words must be BYTES (strings), got {type(w).__name__}")
        out.append(w)
    return out


def _encode_words(tok, words: list[bytes]) -> list[list[int]]:
    if not words:
        return []
    try:
        texts = [w.decode("utf-8") for w in words]
    except UnicodeDecodeError as e:
        raise ValueError(f"a word is not valid UTF-8: {e}") from None
    return [list(ids) for ids in tok.encode_batch(texts, allowed_special="all")]


def _rows_2d(arr, name: str, batch: int) -> np.ndarray:
    a = np.asarray(arr)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] != batch:
        raise ValueError(f"{name} must have shape [batch={batch}, n], got {list(np.shape(arr))}")
    return a


def word_list_ids(tok, word_lists, batch: int) -> np.ndarray:
    """[batch, n] words (or None) -> int32 [batch, 2, width] in TensorRT-LLM's word-list layout."""
    if word_lists is None:
        return np.empty((batch, 2, 0), dtype=np.int32)
    rows = _rows_2d(word_lists, "the word list", batch)
    flat, ends = [], []
    for row in rows:
        ids = [w for w in _encode_words(tok, _words(row)) if w]
        flat.append([i for w in ids for i in w])
        ends.append(np.cumsum([len(w) for w in ids], dtype=np.int64).tolist())
    width = max(1, max((len(f) for f in flat), default=0))
    out = np.zeros((batch, 2, width), dtype=np.int32)
    out[:, 1, :] = -1
    for b, (f, e) in enumerate(zip(flat, ends, strict=True)):
        out[b, 0, : len(f)] = f
        out[b, 1, : len(e)] = e
    return out


def embedding_bias(tok, words, weights, batch: int) -> np.ndarray:
    """[batch, n] words and float weights -> float32 [batch, n_vocab] (or [batch, 0])."""
    if words is None or weights is None:
        return np.empty((batch, 0), dtype=np.float32)
    w_rows = _rows_2d(words, "EMBEDDING_BIAS_WORDS", batch)
    x_rows = _rows_2d(weights, "EMBEDDING_BIAS_WEIGHTS", batch)
    if x_rows.dtype.kind != "f":
        raise ValueError(f"EMBEDDING_BIAS_WEIGHTS must be floats, got {x_rows.dtype}")
    if w_rows.shape != x_rows.shape:
        raise ValueError(
            f"EMBEDDING_BIAS_WORDS {list(w_rows.shape)} and EMBEDDING_BIAS_WEIGHTS "
            f"{list(x_rows.shape)} must have the same shape"
        )
    out = np.zeros((batch, int(tok.n_vocab)), dtype=np.float32)
    for b in range(batch):
        for ids, weight in zip(_encode_words(tok, _words(w_rows[b])), x_rows[b], strict=True):
            np.add.at(out[b], np.asarray(ids, dtype=np.int64), np.float32(weight))
    return out


def id_column(arr, name: str, batch: int, default: int) -> np.ndarray:
    """END_ID / PAD_ID: the request's int32 [batch, 1] as given, else the default per row."""
    if arr is None:
        return np.full((batch, 1), default, dtype=np.int32)
    a = np.asarray(arr)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integers, got {a.dtype}")
    if a.ndim == 1:
        a = a[:, None]
    if a.shape != (batch, 1):
        raise ValueError(f"{name} must have shape [batch={batch}, 1], got {list(np.shape(arr))}")
    return a.astype(np.int32)


def prompt_table_extra_ids(extra_id, input_id: np.ndarray, n_vocab: int) -> np.ndarray:
    """OUT_PROMPT_TABLE_EXTRA_IDS: row b's extra id where an id is a prompt-table id (>= n_vocab),
    0 elsewhere; uint64, shaped like INPUT_ID. A text tokenizer's ids are all < n_vocab."""
    e = np.asarray(extra_id)
    if e.dtype.kind not in "iu" or e.reshape(-1).shape[0] != input_id.shape[0]:
        raise ValueError(
            f"PROMPT_TABLE_EXTRA_ID must be integers shaped [batch={input_id.shape[0]}, 1], "
            f"got {e.dtype} {list(e.shape)}"
        )
    col = e.reshape(-1, 1).astype(np.uint64)
    return np.where(input_id >= n_vocab, col, np.uint64(0)).astype(np.uint64)


# Optional inputs of TensorRT-LLM's preprocessing for multimodal models (tensorrtllm_backend
# v0.19.0, all_models/inflight_batcher_llm/preprocessing/config.pbtxt): IMAGE_BYTES and
# VIDEO_BYTES UINT8 [-1, -1, -1, -1], IMAGE_URL STRING [1].
MULTIMODAL_INPUTS = ("IMAGE_BYTES", "IMAGE_URL", "VIDEO_BYTES")


def refuse_multimodal(extras: dict) -> None:
    """ValueError naming the first multimodal input that carries something: an array with
    elements, or a URL that is not empty. Absent or empty inputs (what a text client of their
    ensemble sends) pass."""
    for name in MULTIMODAL_INPUTS:
        a = extras.get(name)
        if a is None or np.size(a) == 0:
            continue
        if a.dtype == np.object_ and all(len(v) == 0 for v in a.reshape(-1)):
            continue
        raise ValueError(
            f"{name} {list(np.shape(a))} is not taken: this tokenizer serves a text model "
            "(GPT-2, no vision); send text in QUERY and leave the multimodal inputs out or empty"
        )
