"""A Tokenizer pickles as the gputok call that built it and the set_* calls since
(gputok/_recipe.py): multiprocessing and Dask can ship one. One built from a Vocab directly
refuses with a TypeError that names the ways that work."""

from __future__ import annotations

import multiprocessing
import pickle

import pytest

import gputok
from gputok import _recipe
from references import gpt2_files

TEXTS = ["hello world", "naïve café 😀 <|endoftext|>", "def f(x):\n    return x  # 42\n"]


def _same(a, b) -> None:
    assert (a.name, a.n_vocab, a.device) == (b.name, b.n_vocab, b.device)
    assert a.encode_batch(TEXTS, allowed_special="all") == b.encode_batch(
        TEXTS, allowed_special="all"
    )
    assert a.encode_ordinary_batch(TEXTS) and a.crossover == b.crossover


def test_gpt2_and_get_encoding_round_trip():
    for tok in (gputok.gpt2(device="cpu"), gputok.get_encoding("r50k_base", device="cpu")):
        _same(pickle.loads(pickle.dumps(tok)), tok)


def test_loaded_tokenizers_round_trip(tmp_path, hf):
    files = gpt2_files()
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    for tok in (
        gputok.load_tiktoken_file(gputok.GPT2_RANKS, device="cpu", name="ranks"),
        gputok.load_hf_files(files["vocab.json"], files["merges.txt"], device="cpu"),
        gputok.load_tokenizer_json(path, device="cpu"),
    ):
        _same(pickle.loads(pickle.dumps(tok)), tok)


def test_settings_changed_since_travel():
    tok = gputok.gpt2(device="cpu")
    tok.set_cpu_spin_us(7)
    tok.set_piece_cache_bytes(0)
    got = pickle.loads(pickle.dumps(tok))
    assert got.cpu_spin_us == 7
    assert got.piece_cache_stats()["capacity_bytes"] == 0
    assert gputok.gpt2(device="cpu").piece_cache_stats()["capacity_bytes"] > 0


def test_a_tokenizer_built_from_a_vocab_refuses_by_name():
    tok = gputok.Tokenizer(gputok.gpt2_vocab(), gputok.GPT2_SPECIALS, device="cpu")
    with pytest.raises(TypeError, match=r"gputok\.gpt2\(\).*gputok\.load_\*"):
        pickle.dumps(tok)


def test_unpickling_calls_only_gputok_builders_and_setters():
    with pytest.raises(ValueError, match="not a gputok Tokenizer's recipe"):
        _recipe.rebuild("vocab_from_tiktoken_file", (), {}, {})
    with pytest.raises(ValueError, match="not a gputok Tokenizer's recipe"):
        _recipe.rebuild("gpt2", (), {"device": "cpu"}, {"piece_cache_stats": ()})


def test_a_spawned_pool_encodes_with_a_pickled_tokenizer():
    tok = gputok.gpt2(device="cpu")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        got = pool.map(tok.encode_ordinary, TEXTS)
    assert got == [tok.encode_ordinary(t) for t in TEXTS]
