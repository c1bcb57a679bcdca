"""GPT-2's original encoder.json / vocab.bpe regenerate byte for byte from the ranks."""

import hashlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "backend_src" / "tools"))
import regen_gpt2_files as regen  # noqa: E402


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_regenerate_matches_original_hashes(tmp_path):
    paths = regen.regenerate(tmp_path)
    assert _sha(paths["encoder.json"]) == regen.ENCODER_JSON_SHA256
    assert _sha(paths["vocab.bpe"]) == regen.VOCAB_BPE_SHA256
    assert paths["vocab.json"].read_bytes() == paths["encoder.json"].read_bytes()
    assert paths["merges.txt"].read_bytes() == paths["vocab.bpe"].read_bytes()
    vocab = json.loads(paths["encoder.json"].read_text())
    assert len(vocab) == 50257 and vocab["<|endoftext|>"] == 50256
    assert list(vocab)[-1] == "<|endoftext|>"
    lines = paths["vocab.bpe"].read_text().splitlines()
    assert lines[0] == "#version: 0.2" and len(lines) == 50001
    assert lines[1] == "\u0120 t"  # rank 256 = b" t"


def test_cli_exit_codes(tmp_path):
    assert regen.main(["--out-dir", str(tmp_path / "ok")]) == 0
    # a corrupted ranks file (one rank line dropped) must fail the ranks hash check
    bad = tmp_path / "bad.tiktoken"
    bad.write_bytes(b"\n".join(regen.DEFAULT_RANKS.read_bytes().splitlines()[:-1]) + b"\n")
    assert regen.main(["--ranks", str(bad), "--out-dir", str(tmp_path / "bad")]) == 1


def test_hash_mismatch_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(regen, "VOCAB_BPE_SHA256", "0" * 64)
    with pytest.raises(ValueError, match="vocab.bpe"):
        regen.regenerate(tmp_path)
