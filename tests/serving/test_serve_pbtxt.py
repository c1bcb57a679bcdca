"""The one config.pbtxt helper (gputok.serve.pbtxt, protobuf text_format over tritonclient's
model_config_pb2) and the isolated repository gputok-serve serves by default."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gputok.serve import isolate, pbtxt

REPO = Path(__file__).resolve().parents[2] / "model_repository"


def test_reads_every_product_config():
    for config in REPO.glob("*/config.pbtxt"):
        c = pbtxt.read_config(config)
        assert c.name == config.parent.name


def test_edits_keep_the_rest(tmp_path):
    config = tmp_path / "config.pbtxt"
    shutil.copy(REPO / "tokenizer" / "config.pbtxt", config)
    before = pbtxt.parameters(config)
    pbtxt.set_parameter(config, "max_rows_per_request", "16")
    pbtxt.rename(config, "tokenizer_small")
    pbtxt.set_instance_count(config, 1)
    after = pbtxt.read_config(config)
    assert after.name == "tokenizer_small" and after.instance_group[0].count == 1
    params = pbtxt.parameters(config)
    assert params.pop("max_rows_per_request") == {"string_value": "16"}
    before.pop("max_rows_per_request")
    assert params == before and len(before) > 5
    with pytest.raises(KeyError, match="no parameter nope"):
        pbtxt.set_parameter(config, "nope", "1")
    config.write_text("name: 'x' bogus_field: 3")
    with pytest.raises(ValueError, match="bogus_field"):
        pbtxt.read_config(config)


def test_isolated_repository_unbatches_only_string_models(tmp_path):
    served, names = isolate.isolated_repository(REPO, cache=tmp_path)
    assert names == ["tokenizer"]
    tok = pbtxt.read_config(served / "tokenizer" / "config.pbtxt")
    assert not tok.HasField("dynamic_batching")
    assert pbtxt.parameters(served / "tokenizer" / "config.pbtxt") == pbtxt.parameters(
        REPO / "tokenizer" / "config.pbtxt"
    )
    assert (served / "tokenizer" / "1" / "model.py").resolve() == (
        REPO / "tokenizer" / "1" / "model.py"
    ).resolve()
    detok = pbtxt.read_config(served / "detokenizer" / "config.pbtxt")
    assert detok.HasField("dynamic_batching")  # INT32 inputs: core checks their sizes
    again, _ = isolate.isolated_repository(REPO, cache=tmp_path)
    assert again == served  # one folder per repository content, not one per run
    assert len(list((tmp_path / "isolated-repos").iterdir())) == 1
