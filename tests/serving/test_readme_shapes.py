"""The README's model table against model_repository/*/config.pbtxt: every tensor it names
exists on that side of that model, with the data type and the shape a client really sends or
receives (the batch dimension first, then the config's dims; a fixed dim is that number).

The table once said `QUERY` BYTES [1], which Triton refuses for a batching model; a check of
that one cell could not see the same slip in any other cell, so every cell is read here.
"""

from __future__ import annotations

import re

from model_loader import REPO

TYPES = {
    "BYTES": "TYPE_STRING",
    "INT32": "TYPE_INT32",
    "UINT64": "TYPE_UINT64",
    "FP32": "TYPE_FP32",
    "FP16": "TYPE_FP16",
    "BOOL": "TYPE_BOOL",
    "UINT8": "TYPE_UINT8",
}
# one or more `NAME`s (joined by , or /), then a data type and a shape: `A`, `B` INT32 [batch, 1]
CLAIM = re.compile(r"((?:`\w+`\s*(?:[,/]\s*)?)+)\s*(" + "|".join(TYPES) + r")\s*\[([^\]]*)\]")


def model_config(name: str):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    text = (REPO / "model_repository" / name / "config.pbtxt").read_text()
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def readme_rows() -> dict[str, tuple[str, str]]:
    """model -> (inputs cell, outputs cell) of the README's model table."""
    rows = {}
    for line in (REPO / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*`(\w+)`\s*\|(.*)\|(.*)\|\s*$", line)
        if m and (REPO / "model_repository" / m.group(1) / "config.pbtxt").is_file():
            rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def claims(cell: str) -> list[tuple[str, str, list[str]]]:
    """(name, data type, shape) for every tensor a cell states a shape for."""
    out = []
    for names, dtype, shape in CLAIM.findall(cell):
        dims = [d.strip() for d in shape.split(",")]
        out += [(n, dtype, dims) for n in re.findall(r"`(\w+)`", names)]
    return out


def mismatch(cfg, tensors, name: str, dtype: str, dims: list[str]) -> str | None:
    by_name = {t.name: t for t in tensors}
    if name not in by_name:
        return f"{cfg.name}: no tensor {name} on that side"
    t = by_name[name]
    from tritonclient.grpc import model_config_pb2

    want_type = model_config_pb2.DataType.Name(t.data_type)
    if TYPES[dtype] != want_type:
        return f"{cfg.name}.{name}: README {dtype}, config {want_type}"
    want = list(t.dims)
    served = (["batch"] if cfg.max_batch_size > 0 else []) + [str(d) for d in want]
    shown = f"README [{', '.join(dims)}], served as [{', '.join(served)}] (-1: any)"
    if cfg.max_batch_size > 0:
        if dims[0] != "batch" and not dims[0].isdigit():
            return f"{cfg.name}.{name}: {shown}: no batch dimension first"
        dims = dims[1:]
    if len(dims) != len(want) or any(
        d != -1 and got != str(d) for got, d in zip(dims, want, strict=False)
    ):
        return f"{cfg.name}.{name}: {shown}"
    return None


def test_readme_table_names_every_served_model():
    rows = readme_rows()
    served = {p.parent.name for p in (REPO / "model_repository").glob("*/config.pbtxt")}
    assert set(rows) == served


def test_readme_table_shows_true_shapes():
    bad, checked = [], 0
    for model, (ins, outs) in readme_rows().items():
        cfg = model_config(model)
        for cell, tensors in ((ins, cfg.input), (outs, cfg.output)):
            for name, dtype, dims in claims(cell):
                checked += 1
                problem = mismatch(cfg, tensors, name, dtype, dims)
                if problem:
                    bad.append(problem)
    assert checked >= 30, f"only {checked} shapes read from the README's table"
    assert not bad, "\n".join(bad)


def test_the_check_sees_the_old_query_shape():
    """The slip the README had: QUERY BYTES [1] for the batching tokenizer."""
    cfg = model_config("tokenizer")
    ((name, dtype, dims),) = claims("`QUERY` BYTES [1]")
    assert mismatch(cfg, cfg.input, name, dtype, dims)
    assert mismatch(cfg, cfg.input, "QUERY", "BYTES", ["batch", "1"]) is None
