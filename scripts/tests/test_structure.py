"""scripts/check_structure.py: the repository passes it, and each of its rules fails on a
deliberate violation written into a scratch tree (so the rule cannot pass vacuously)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "scripts" / "check_structure.py"
_spec = importlib.util.spec_from_file_location("check_structure", _PATH)
cs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cs)


def test_repository_passes(capsys):
    code = cs.main([])
    assert code == 0, capsys.readouterr().out


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A scratch repository root: write(rel, text) adds a file and returns the file list."""
    monkeypatch.setattr(cs, "ROOT", tmp_path)
    files: list[str] = []

    def write(rel: str, text: str) -> list[str]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if rel not in files:
            files.append(rel)
        return files

    return write


def test_bench_doc_at_most_200_lines(tree):
    files = tree("docs/benchmarks.md", "x\n" * 200)
    assert cs.check_bench_doc(files) == []
    tree("docs/benchmarks.md", "x\n" * 201)
    assert cs.check_bench_doc(files) == ["docs/benchmarks.md: 201 lines > 200"]


@pytest.mark.parametrize(
    "line",
    [
        "# see iss" + "ue 7 for why",
        "the targets of iss" + "ues 5, 6 hold",
        "Iss" + "ue 4's targets",
        "(" + "shared/REFERENCE" + ".md)",
        "cat ../" + "shared/notes.txt",
        "/" + "work/main/bench/x.json",
    ],
)
def test_references_fail(tree, line):
    files = tree("backend_src/gputok/x.py", f"a = 1\n{line}\n")
    errors = cs.check_references(files)
    assert len(errors) == 1 and errors[0].startswith("backend_src/gputok/x.py:2:"), errors


def test_references_pass_public_citations(tree):
    text = "tensorrtllm_backend #192; triton server issues #5317\nshared memory\n"
    assert cs.check_references(tree("docs/serving.md", text)) == []


def test_includes(tree, monkeypatch):
    monkeypatch.setattr(cs, "INCLUDE_ALLOW", {})
    files = tree("backend_src/csrc/vocab.cpp", '#include "vocab.h"\n#include "split.h"\n')
    tree("backend_src/csrc/cuda/merge_x.cu", "#include <snappy/snappy.h>\n")
    tree("backend_src/csrc/corpus/cuda/parquet.cu", '#include "parquet.h"\n')  # corpus code itself
    tree("backend_src/csrc/corpus/parquet.cpp", '#include "pack.h"\n')
    tree("backend_src/bindings/corpus_bindings.cpp", '#include "../csrc/corpus/pack.h"\n')
    tree("backend_src/bindings/core_bindings.cpp", '#include "../csrc/corpus/split.h"\n')
    errors = cs.check_includes(files)
    assert sorted(e.split(":")[0] for e in errors) == [
        "backend_src/bindings/core_bindings.cpp",
        "backend_src/csrc/cuda/merge_x.cu",
        "backend_src/csrc/vocab.cpp",
    ], errors
    # An allowed present exception passes; one that is no longer there is stale.
    monkeypatch.setattr(
        cs,
        "INCLUDE_ALLOW",
        {
            ("backend_src/csrc/vocab.cpp", "split.h"): "",
            ("backend_src/csrc/merge.cpp", "pack.h"): "",
        },
    )
    errors = cs.check_includes(files)
    assert any("merge_x.cu" in e for e in errors)
    assert any("stale" in e and "merge.cpp" in e for e in errors)
    assert not any(e.startswith("backend_src/csrc/vocab.cpp") for e in errors)


def _py_function(name: str, lines: int) -> str:
    return f"def {name}():\n" + "    x = 1\n" * (lines - 1)


def _cpp_function(head: str, lines: int) -> str:
    body = "  int s = 0;  // \"}\" and '{' in literals do not count\n" * (lines - 2)
    return f"namespace a {{\n{head} {{\n{body}}}\n}}  // namespace a\n"


def test_function_lengths(tree, monkeypatch):
    monkeypatch.setattr(cs, "FUNCTION_ALLOW", {})
    monkeypatch.setattr(cs, "MODULE_ALLOW", {})
    files = tree("bench/ok.py", _py_function("short", 80))
    tree("csrc/ok.cu", _cpp_function("__global__ void k(int* p)", 130))
    assert cs.check_lengths(files) == []
    tree("bench/long.py", _py_function("long_one", 81))
    tree("csrc/long.cpp", _cpp_function("static int Foo::bar(int a) const", 81))
    tree("csrc/kern.cu", _cpp_function("__global__ void __launch_bounds__(256) kern(int* p)", 131))
    errors = cs.check_lengths(files)
    assert sorted(errors) == [
        "function bench/long.py::long_one: 81 lines > 80 (new)",
        "function csrc/kern.cu::kern: 131 lines > 130 (new)",
        "function csrc/long.cpp::Foo::bar: 81 lines > 80 (new)",
    ], errors


def test_allow_list_only_shrinks(tree, monkeypatch):
    monkeypatch.setattr(cs, "MODULE_ALLOW", {})
    files = tree("bench/long.py", _py_function("long_one", 90))
    monkeypatch.setattr(cs, "FUNCTION_ALLOW", {"bench/long.py::long_one": 90})
    assert cs.check_lengths(files) == []
    tree("bench/long.py", _py_function("long_one", 91))
    assert cs.check_lengths(files) == [
        "function bench/long.py::long_one: 91 lines, grew from the allowed 90"
    ]
    tree("bench/long.py", _py_function("long_one", 80))
    assert "stale" in cs.check_lengths(files)[0]


def test_module_lengths(tree, monkeypatch):
    monkeypatch.setattr(cs, "FUNCTION_ALLOW", {})
    text = "".join(_py_function(f"f{i}", 50) for i in range(10))  # 500 lines
    monkeypatch.setattr(cs, "MODULE_ALLOW", {})
    files = tree("gputok/m.py", text)
    assert cs.check_lengths(files) == []
    tree("gputok/m.py", text + "y = 2\n")
    assert cs.check_lengths(files) == ["module gputok/m.py: 501 lines > 500 (new)"]
    monkeypatch.setattr(cs, "MODULE_ALLOW", {"gputok/m.py": 501, "gputok/gone.py": 900})
    assert cs.check_lengths(files) == [
        "module gputok/gone.py: stale allow-list entry (900): now within the limit or gone"
    ]


def test_corpus_package_modules_at_most_400_lines(tree, monkeypatch):
    monkeypatch.setattr(cs, "FUNCTION_ALLOW", {})
    monkeypatch.setattr(cs, "MODULE_ALLOW", {})
    text = "".join(_py_function(f"f{i}", 40) for i in range(10))  # 400 lines
    files = tree("backend_src/gputok/corpus/m.py", text)
    tree("backend_src/gputok/other.py", text + "y = 2\n")  # 401: fine outside the package
    assert cs.check_lengths(files) == []
    tree("backend_src/gputok/corpus/m.py", text + "y = 2\n")
    assert cs.check_lengths(files) == [
        "module backend_src/gputok/corpus/m.py: 401 lines > 400 (new)"
    ]


def test_test_layout(tree):
    files = tree("tests/core/test_a.py", "")
    tree("bench/tests/test_b.py", "")
    tree("tests/corpus/helper.py", "")
    assert cs.check_test_layout(files) == []
    tree("tests/test_root.py", "")  # not in a layer folder
    tree("tests/gpu/test_a.py", "")  # a basename twice
    errors = cs.check_test_layout(files)
    assert sorted(e.split(":")[0] for e in errors) == ["tests/gpu/test_a.py", "tests/test_root.py"]
