"""scripts/serve_plan.py: the serving benchmark's repositories are what they claim to be.

The plan edits config.pbtxt as text (the GPU machine has no protobuf schema), so these tests
read every edited config back through gputok.serve.pbtxt and judge it with the same rule that
gputok-serve's request isolation uses (gputok.serve.isolate.models_to_isolate): an `iso`
repository must be one that gputok-serve would serve unchanged, and ours and the baseline
must always get the same batching and instance count.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import serve_plan  # noqa: E402

pytest.importorskip("tritonclient.grpc")
from gputok.serve import pbtxt  # noqa: E402
from gputok.serve.isolate import models_to_isolate  # noqa: E402

BASE = ("preprocessing_gigatoken",)


def _configs(repo: Path) -> dict:
    return {p.parent.name: pbtxt.read_config(p) for p in sorted(repo.glob("*/config.pbtxt"))}


def test_parse_plan():
    plan = serve_plan.parse_plan("iso:auto:0:128,4k:1,2,64; batch:cpu:8:4k:64")
    assert [s.label for s in plan] == ["iso-auto-icfg", "batch-cpu-i8"]
    assert plan[0].sizes == ("128", "4k") and plan[0].concurrencies == (1, 2, 64)
    assert plan[1].instances == 8 and plan[1].device == "cpu"
    for bad in ("iso:auto:0:128", "solo:auto:0:128:1", "iso:gpu:0:128:1", "iso:auto:0:128:0"):
        with pytest.raises(ValueError):
            serve_plan.parse_plan(bad)


def test_iso_repository_is_what_gputok_serve_serves(tmp_path):
    setting = serve_plan.parse_plan("iso:auto:0:128:1")[0]
    repo = serve_plan.build_repository(tmp_path / "r", setting, BASE)
    configs = _configs(repo)
    assert sorted(configs) == ["preprocessing_gigatoken", "tokenizer"]
    # the source repository has batchers to drop; the built one has none left to isolate
    assert models_to_isolate(ROOT / "model_repository") == ["tokenizer"]
    assert models_to_isolate(repo) == []
    for config in configs.values():
        assert not config.HasField("dynamic_batching")
        assert config.max_batch_size == 256  # batching by the client still allowed
    counts = {n: [g.count for g in c.instance_group] for n, c in configs.items()}
    assert counts["tokenizer"] == counts["preprocessing_gigatoken"] == [2]


def test_batch_repository_keeps_batcher_and_edits_alike(tmp_path):
    setting = serve_plan.parse_plan("batch:cpu:8:128:1")[0]
    repo = serve_plan.build_repository(tmp_path / "r", setting, BASE)
    configs = _configs(repo)
    assert sorted(models_to_isolate(repo)) == ["preprocessing_gigatoken", "tokenizer"]
    delays = {n: c.dynamic_batching.max_queue_delay_microseconds for n, c in configs.items()}
    assert delays == {"tokenizer": 0, "preprocessing_gigatoken": 0}
    for config in configs.values():
        assert [g.count for g in config.instance_group] == [8]
    assert configs["tokenizer"].parameters["device"].string_value == "cpu"
    # everything else of ours is the repository's own config
    ours = pbtxt.read_config(ROOT / "model_repository/tokenizer/config.pbtxt")
    assert [i.name for i in configs["tokenizer"].input] == [i.name for i in ours.input]
    assert configs["tokenizer"].parameters["algorithm"].string_value == "auto"


def test_text_edits_refuse_what_they_cannot_find():
    with pytest.raises(ValueError):
        serve_plan.set_instance_count("name: 'x'", 2)
    with pytest.raises(ValueError):
        serve_plan.set_parameter('parameters { key: "a" value: { string_value: "1" } }', "b", "2")
    with pytest.raises(ValueError):
        serve_plan.drop_dynamic_batching("dynamic_batching {\n  x { y: 1 }\n")
    nested = "a: 1\ndynamic_batching {\n  priority_queue_policy { key: 1 value { } }\n}\nb: 2\n"
    assert serve_plan.drop_dynamic_batching(nested) == "a: 1\n\nb: 2\n"


def test_min_outputs_declares_two_on_every_model(tmp_path):
    """OUTPUTS=min: ours and the baseline declare INPUT_ID and REQUEST_INPUT_LEN only (what a
    client naming those two costs); inputs, batching and everything else stay as they are.
    By default both declare TensorRT-LLM's eleven."""
    setting = serve_plan.parse_plan("iso:auto:0:128:1:min")[0]
    assert setting.outputs == "min" and setting.label == "iso-auto-icfg-min"
    repo = serve_plan.build_repository(tmp_path / "r", setting, BASE)
    configs = _configs(repo)
    base = configs["preprocessing_gigatoken"]
    ours = configs["tokenizer"]
    assert [o.name for o in ours.output] == [o.name for o in base.output]
    assert [(o.data_type, list(o.dims)) for o in ours.output] == [
        (o.data_type, list(o.dims)) for o in base.output
    ]
    assert [o.name for o in ours.output] == ["INPUT_ID", "REQUEST_INPUT_LEN"]
    full = pbtxt.read_config(ROOT / "model_repository/tokenizer/config.pbtxt")
    assert len(full.output) == 11 and len(ours.input) == len(full.input)
    every = _configs(
        serve_plan.build_repository(
            tmp_path / "all", serve_plan.parse_plan("iso:auto:0:128:1")[0], BASE
        )
    )
    assert len(every["tokenizer"].output) == len(every["preprocessing_gigatoken"].output) == 11
    assert serve_plan.parse_plan("iso:auto:0:128:1")[0].outputs == "all"
    with pytest.raises(ValueError):
        serve_plan.parse_plan("iso:auto:0:128:1:some")
    with pytest.raises(ValueError):
        serve_plan.keep_outputs('output [\n  { name: "A" }\n]\n', ("B",))


def test_ceiling_is_the_baseline_with_no_tokenizer(tmp_path):
    """preprocessing_ceiling is built from the gigatoken baseline's folder: the same config
    (outputs, batching, instances edited alike) under its own name, `ceiling` true; the
    baseline's own copy keeps it false."""
    setting = serve_plan.parse_plan("batch:auto:4:4k:64")[0]
    repo = serve_plan.build_repository(
        tmp_path / "r", setting, ("preprocessing_gigatoken", "preprocessing_ceiling")
    )
    configs = _configs(repo)
    ceiling, base = configs["preprocessing_ceiling"], configs["preprocessing_gigatoken"]
    assert ceiling.name == "preprocessing_ceiling" and base.name == "preprocessing_gigatoken"
    assert ceiling.parameters["ceiling"].string_value == "true"
    assert base.parameters["ceiling"].string_value == "false"
    assert (
        [g.count for g in ceiling.instance_group] == [4] == [g.count for g in base.instance_group]
    )
    assert [o.name for o in ceiling.output] == [o.name for o in base.output]
    assert (repo / "preprocessing_ceiling/1/model.py").read_bytes() == (
        repo / "preprocessing_gigatoken/1/model.py"
    ).read_bytes()
