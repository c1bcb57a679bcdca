"""Pins agree everywhere: the package extras, the client's dependencies and the Dockerfile carry
the versions of requirements/*.txt. `pip install gputok[corpus]` once lacked xxhash (the
default shard hash) and pinned bokeh 3.8.0 where requirements/ had 3.8.2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib")

REPO = Path(__file__).resolve().parents[2]
REQ = REPO / "requirements"


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        r = Requirement(line)
        (spec,) = r.specifier  # every requirements/ line is one exact pin
        assert spec.operator == "==", f"{path.name}: {line} is not pinned"
        out[canonicalize_name(r.name)] = spec.version
    return out


def requirement_pins() -> dict[str, str]:
    """{package: version} over requirements/*.txt; a package pinned twice must agree."""
    seen: dict[str, tuple[str, str]] = {}
    for path in sorted(REQ.glob("*.txt")):
        for name, version in _pins(path).items():
            if name in seen:
                assert seen[name][0] == version, (name, seen[name], (version, path.name))
            seen.setdefault(name, (version, path.name))
    return {k: v for k, (v, _) in seen.items()}


def _project(path: Path) -> dict:
    return tomllib.loads(path.read_text())["project"]


def test_requirements_agree_with_each_other():
    assert len(requirement_pins()) > 30


@pytest.mark.parametrize("pyproject", ["backend_src/pyproject.toml", "client/pyproject.toml"])
def test_package_dependencies_match_requirements(pyproject):
    pins = requirement_pins()
    project = _project(REPO / pyproject)
    deps = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        deps += extra
    assert deps
    for line in deps:
        r = Requirement(line)
        name = canonicalize_name(r.name)
        assert name in pins, f"{pyproject}: {r.name} is not in requirements/"
        assert r.specifier.contains(pins[name]), f"{pyproject}: {line} vs {name}=={pins[name]}"


def test_corpus_extra_installs_what_the_corpus_tool_needs():
    """Every package of requirements/corpus.txt (numpy is a base dependency) is in the extra."""
    extra = _project(REPO / "backend_src" / "pyproject.toml")["optional-dependencies"]["corpus"]
    names = {canonicalize_name(Requirement(x).name) for x in extra}
    want = set(_pins(REQ / "corpus.txt")) - {"numpy"}
    assert "xxhash" in want
    assert want <= names, f"missing from gputok[corpus]: {sorted(want - names)}"


def test_dockerfile_pins_match_or_say_why():
    """A Dockerfile pin that differs from requirements/ must be named in a comment there
    (the image has Python 3.10 and CUDA 12.4-12.6, which some pins cannot run on)."""
    pins = requirement_pins()
    text = (REPO / "Dockerfile").read_text()
    comments = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
    found = re.findall(r"(?<![\w.-])([A-Za-z][\w.-]*)==([\w.]+)", text)
    assert len(found) >= 6
    for name, version in found:
        want = pins.get(canonicalize_name(name))
        if want is None or want == version:
            continue
        assert re.search(
            rf"{re.escape(name)} {re.escape(version)}, not {re.escape(want)}", comments
        ), (
            f"Dockerfile pins {name}=={version}, requirements/ {want}: say why in a comment "
            f"('{name} {version}, not {want}: ...')"
        )
