"""Read and change Triton `config.pbtxt` files through their protobuf schema.

One helper for every tool that edits a model configuration (gputok-serve's isolated copy, the
test fixtures' variants): `google.protobuf.text_format` with tritonclient's `model_config_pb2`
(both pinned in requirements/serve.txt), instead of regular expressions over the text. A
field that does not exist in the schema is an error, not a silent no-op. Writing drops the
comments of the original, so it is meant for throwaway copies, not for model_repository/.
"""

from __future__ import annotations

from pathlib import Path


def _pb():
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    return text_format, model_config_pb2


def read_config(path: Path):
    """The `ModelConfig` message of a config.pbtxt; ValueError naming the file if malformed."""
    text_format, pb = _pb()
    try:
        return text_format.Parse(Path(path).read_text(), pb.ModelConfig())
    except text_format.ParseError as e:
        raise ValueError(f"{path}: {e}") from e


def write_config(config, path: Path) -> None:
    text_format, _ = _pb()
    Path(path).write_text(text_format.MessageToString(config))


def parameters(path: Path) -> dict:
    """The `parameters` of a config, shaped as Triton hands them to a Python model."""
    return {k: {"string_value": v.string_value} for k, v in read_config(path).parameters.items()}


def set_parameter(path: Path, key: str, value: str) -> None:
    """Set an existing `parameters { key: ... }` string value; KeyError if the key is absent."""
    config = read_config(path)
    if key not in config.parameters:
        raise KeyError(f"{path}: no parameter {key}")
    config.parameters[key].string_value = value
    write_config(config, path)


def rename(path: Path, name: str) -> None:
    config = read_config(path)
    config.name = name
    write_config(config, path)


def set_instance_count(path: Path, count: int) -> None:
    """Set `count` on every instance group (the configs here have one)."""
    config = read_config(path)
    if not config.instance_group:
        raise KeyError(f"{path}: no instance_group")
    for group in config.instance_group:
        group.count = count
    write_config(config, path)


def has_string_input(config) -> bool:
    _, pb = _pb()
    return any(i.data_type == pb.DataType.TYPE_STRING for i in config.input)


def drop_dynamic_batching(path: Path) -> bool:
    """Remove `dynamic_batching` (each request then executes alone); True if there was one."""
    config = read_config(path)
    if not config.HasField("dynamic_batching"):
        return False
    config.ClearField("dynamic_batching")
    write_config(config, path)
    return True
