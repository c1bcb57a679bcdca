"""Unit tests of model_repository/gpt2/1/model.py's pure functions, with the tiny configuration."""

from __future__ import annotations

import numpy as np
import pytest
from model_loader import config_parameters, load_model_module

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
m = load_model_module("gpt2")


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    model, note = m.build_model(m.GPT2Settings(model_config="tiny", seed=1), "cpu")
    assert "RANDOM" in note
    return model


def test_shipped_config_parses():
    assert m.parse_settings(config_parameters("gpt2")) == m.GPT2Settings()
    for key, value in [("model_config", "gpt5"), ("dtype", "int8"), ("max_output_len", "0")]:
        with pytest.raises(ValueError):
            m.parse_settings({key: {"string_value": value}})


def test_request_rows():
    rows = m.request_rows(
        np.array([[5, 6, 50256], [7, 50256, 50256]], np.int32),
        np.array([[2], [1]]),
        np.array([[3], [4]]),
        50257,
        1024,
        16,
        50256,
    )
    assert [(p.tolist(), k) for p, k in rows] == [([5, 6], 3), ([7], 4)]
    ((p, k),) = m.request_rows(
        np.zeros((1, 0), np.int32), np.array([[0]]), np.array([[2]]), 50257, 1024, 16, 50256
    )
    assert p.tolist() == [50256], "an empty prompt starts from <|endoftext|>"


@pytest.mark.parametrize(
    "ids, lens, outs, message",
    [
        ([[1, 2]], [[3]], [[1]], "input_lengths"),
        ([[1, 2]], [[2]], [[0]], "request_output_len"),
        ([[1, 2]], [[2]], [[17]], "request_output_len"),
        ([[1, 50257]], [[2]], [[1]], "outside"),
        ([[1, 2]], [[2], [2]], [[1]], "batch size"),
        ([[1] * 1020], [[1020]], [[16]], "exceed the context"),
    ],
)
def test_request_rows_errors(ids, lens, outs, message):
    with pytest.raises(m.RequestError, match=message):
        m.request_rows(
            np.array(ids, np.int32), np.array(lens), np.array(outs), 50257, 1024, 16, 50256
        )


def test_batched_equals_one_at_a_time(tiny):
    """Left padding with position ids and the KV cache must not change any row's tokens."""
    prompts = [
        np.array(p, np.int64) for p in ([31373, 995], [64], [40, 1101, 257, 3290, 290, 314, 588])
    ]
    rows = [(p, k) for p, k in zip(prompts, (5, 3, 6), strict=True)]
    batched = m.greedy_generate(tiny, rows, eot=None)
    single = [m.greedy_generate(tiny, [r], eot=None)[0] for r in rows]
    assert [b.tolist() for b in batched] == [s.tolist() for s in single]
    assert [len(b) for b in batched] == [5, 3, 6]
    # and equal to generation without a cache
    p, k = rows[2]
    ids = torch.from_numpy(p)[None]
    for _ in range(k):
        nxt = tiny(input_ids=ids).logits[:, -1].argmax(-1)
        ids = torch.cat([ids, nxt[:, None]], 1)
    assert ids[0, p.size :].tolist() == batched[2].tolist()


def test_stops_at_eot():
    class Fake(torch.nn.Module):  # emits 7, 8, then EOT forever
        def forward(
            self,
            input_ids,
            attention_mask=None,
            position_ids=None,
            past_key_values=None,
            use_cache=True,
        ):
            step = 0 if past_key_values is None else past_key_values + 1
            logits = torch.zeros(input_ids.shape[0], input_ids.shape[1], 50257)
            logits[:, -1, [7, 8, 50256][min(step, 2)]] = 1.0
            return type("R", (), {"logits": logits, "past_key_values": step})()

    out = m.greedy_generate(Fake(), [(np.array([1]), 10), (np.array([1, 2]), 1)], eot=50256)
    assert [o.tolist() for o in out] == [[7, 8], [7]]


def test_pack_outputs():
    ids, lens = m.pack_outputs([np.array([1, 2]), np.array([], np.int64), np.array([3])], 50256)
    assert ids.dtype == np.int32 and ids.shape == (3, 1, 2)
    assert ids[:, 0].tolist() == [[1, 2], [50256, 50256], [3, 50256]]
    assert lens.tolist() == [[2], [0], [1]]


def test_weights_from_local_dir(tiny, tmp_path):
    tiny.save_pretrained(tmp_path)
    model, note = m.build_model(m.GPT2Settings(weights_dir=str(tmp_path)), "cpu")
    assert "weights from" in note
    rows = [(np.array([31373, 995]), 4)]
    assert (
        m.greedy_generate(model, rows, None)[0].tolist()
        == m.greedy_generate(tiny, rows, None)[0].tolist()
    )
