#!/usr/bin/env python3
"""Structure rules of the repository, checked by the test suite (scripts/tests/test_structure.py).

1. docs/benchmarks.md is at most 200 lines (current figures; history lives in bench/results/).
2. No doc, script, test or code comment points at a file outside the repository (a session's
   notes folder, an absolute path of a dev machine) or at a bare issue number (the word issue
   and a number): a fact is written out with its public source instead.
3. The tokenizer stands alone: none of its files includes the corpus tool's native code
   (Parquet pages, snappy, split, pack).
4. Functions are at most 80 lines (CUDA kernels 130), modules at most 500 lines (the corpus
   package's at most 400). Today's
   offenders are listed below with their current length: a listed item may shrink, never grow,
   and leaves the list once it is within the limit (a stale entry fails too).
5. Tests by layer: a test module lives in tests/{core,gpu,serving,corpus,e2e} or beside the tool
   it tests (bench/tests, scripts/tests), never in tests/ itself, and no two test modules share a
   basename (pytest's default import mode would collect only one of them).

`python scripts/check_structure.py` prints every violation and exits 1 if there is one;
`--current` prints the measured offenders in the allow-lists' format (to shrink the lists).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BENCH_DOC = "docs/benchmarks.md"
BENCH_DOC_MAX_LINES = 200
FUNCTION_MAX = 80
KERNEL_MAX = 130
MODULE_MAX = 500
# The corpus tool's package is split by job, each module at most 400 lines.
CORPUS_PACKAGE = "backend_src/gputok/corpus/"
CORPUS_MODULE_MAX = 400

# The archive of the old docs/benchmarks.md is kept verbatim, so its words are not rewritten.
REFERENCE_EXEMPT = {"bench/results/2026-11-25-benchmarks-history.md"}
# Built from pieces so that this file does not match itself.
_OUTSIDE = [
    re.compile("REFERENCE" + r"\.md"),
    re.compile(r"\.\./" + "shared/"),
    re.compile(r"(?<![\w.])/" + r"work/(?:main|wt|shared)\b"),
]
# The word issue (or issues) followed by a number: a bare number. A public tracker's "#192" with its
# project's name is a citation and is not matched.
_BARE_ISSUE = re.compile(r"\b[Ii]ssues?\s+\d+")
TEXT_SUFFIXES = {
    ".md", ".py", ".cpp", ".h", ".cu", ".cuh", ".sh", ".pbtxt", ".toml", ".txt", ".cfg",
    ".ini", ".yml", ".yaml",
}  # fmt: skip
TEXT_NAMES = {"Makefile", "Dockerfile", "pa", "run"}

# The tokenizer's native files (every file of backend_src/csrc outside corpus/: types, vocab,
# UTF-8, pretokenize, merge, decode, the encoder, the facade, its GPU object and kernels) and
# its bindings (the _core module's: every file of backend_src/bindings but corpus_bindings.cpp),
# and the corpus code they may not include (csrc/corpus/, the _corpus_native module's).
TOKENIZER_FILES = re.compile(
    r"backend_src/(?:csrc/(?!corpus/)(?:[^/]+|cuda/.+)|bindings/(?!corpus_)[^/]+)$"
)
CORPUS_INCLUDE = re.compile(
    r'^\s*#\s*include\s*[<"](?:[^">]*/)?'
    r'(?:corpus/[^">]*|(?:parquet|split|pack|snappy|gpu_page_decoder|nvcomp)[^/">]*)[">]'
)
# Present exceptions (file, included header): none since the corpus tool's native code became
# its own module. A new one fails.
INCLUDE_ALLOW: dict[tuple[str, str], str] = {}

# Functions over the limit ("path::name": current lines): none since the last ones were split.
# An entry added here may only shrink until it is split. Measure them with --current.
FUNCTION_ALLOW: dict[str, int] = {}
# Modules over 500 lines (path: current lines), same rule: only the generated Unicode table.
MODULE_ALLOW: dict[str, int] = {
    "backend_src/csrc/unicode_tables.h": 801,  # generated (make unicode-tables): data, not code
}


def tracked_files() -> list[str]:
    """The repository's files: git's list when this is a checkout, else a walk."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
        ).stdout.decode()
        files = [f for f in out.split("\0") if f]
        return [f for f in files if (ROOT / f).is_file() and not (ROOT / f).is_symlink()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "__pycache__", "node_modules"}
        return [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if p.is_file() and not skip.intersection(p.relative_to(ROOT).parts)
        ]


def _read(rel: str) -> str:
    return (ROOT / rel).read_text(encoding="utf-8", errors="replace")


def check_bench_doc(files: list[str]) -> list[str]:
    if BENCH_DOC not in files:
        return [f"{BENCH_DOC}: missing"]
    n = len(_read(BENCH_DOC).splitlines())
    return [] if n <= BENCH_DOC_MAX_LINES else [f"{BENCH_DOC}: {n} lines > {BENCH_DOC_MAX_LINES}"]


def _is_text(rel: str) -> bool:
    p = Path(rel)
    return p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES


def check_references(files: list[str]) -> list[str]:
    errors = []
    for rel in files:
        if rel in REFERENCE_EXEMPT or not _is_text(rel):
            continue
        for lineno, line in enumerate(_read(rel).splitlines(), 1):
            for pat in _OUTSIDE:
                if m := pat.search(line):
                    errors.append(f"{rel}:{lineno}: file outside the repository: {m.group(0)!r}")
            if m := _BARE_ISSUE.search(line):
                errors.append(f"{rel}:{lineno}: bare issue number: {m.group(0)!r}")
    return errors


def check_includes(files: list[str]) -> list[str]:
    errors, seen = [], set()
    for rel in files:
        if not TOKENIZER_FILES.search(rel):
            continue
        for lineno, line in enumerate(_read(rel).splitlines(), 1):
            m = CORPUS_INCLUDE.match(line)
            if not m:
                continue
            header = re.search(r'[<"]([^">]*)[">]', line).group(1).rsplit("/", 1)[-1]
            key = (rel, header)
            if key in INCLUDE_ALLOW:
                seen.add(key)
            else:
                errors.append(f"{rel}:{lineno}: the tokenizer includes corpus code {header!r}")
    errors += [
        f"INCLUDE_ALLOW: stale entry {k} (no longer included)" for k in INCLUDE_ALLOW.keys() - seen
    ]
    return errors


# ---- function lengths ------------------------------------------------------------------------


def python_functions(rel: str, source: str) -> list[tuple[str, int, bool]]:
    """(qualified name, lines, is_kernel) of every def in a Python file, nested ones included."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out.append((name, child.end_lineno - child.lineno + 1, False))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def strip_cpp(source: str) -> str:
    """Comments, string and char literals and preprocessor lines blanked; newlines kept."""
    out, i, n = [], 0, len(source)
    while i < n:
        c = source[i]
        two = source[i : i + 2]
        if two == "//":
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif two == "/*":
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * source.count("\n", i, j))
            i = j
        elif c == '"' or (c == "'" and not (out and out[-1][-1:].isalnum())):
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            out.append(" ")
            i = j + 1
        elif c == "#" and source[source.rfind("\n", 0, i) + 1 : i].strip() == "":
            j = i
            while True:  # a directive, with its backslash continuations
                k = source.find("\n", j)
                if k < 0:
                    k = n
                    break
                if source[k - 1] != "\\":
                    break
                j = k + 1
            out.append("\n" * source.count("\n", i, k))
            i = k
        else:
            out.append(c)
            i += 1
    return "".join(out)


_SCOPE_WORDS = re.compile(r"\b(namespace|class|struct|union|enum|extern)\b")
_CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try)\b")
_NOT_NAME = {"__launch_bounds__", "alignas", "__attribute__", "decltype", "noexcept", "__declspec"}


def _function_name(header: str) -> str | None:
    """The declared name in a definition's header, or None when it is not a function."""
    if _CONTROL.match(header) or "(" not in header:
        return None
    scope = _SCOPE_WORDS.search(header)
    if scope and scope.start() < header.index("("):
        return None
    for m in re.finditer(r"([~\w:]+(?:<[^(){};]*>)?)\s*\(", header):
        name = m.group(1)
        if name.rsplit("::", 1)[-1] not in _NOT_NAME:
            return name
    return None


def cpp_functions(rel: str, source: str) -> list[tuple[str, int, bool]]:
    """(name, lines, is_kernel) of every function body at namespace or class scope, found by
    matching braces; a constructor's brace initialisers and lambdas count in their function."""
    text = strip_cpp(source)
    out = []
    stack: list[str] = []  # scope kinds: "ns" (search inside), "fn", "other"
    header_start = 0
    fn_start: tuple[str, int, bool] | None = None
    for i, c in enumerate(text):
        if c in ";":
            if not stack or stack[-1] == "ns":
                header_start = i + 1
        elif c == "{":
            if stack and stack[-1] != "ns":
                stack.append("other")
                continue
            header = text[header_start:i]
            name = _function_name(header)
            if name:
                offset = header_start + len(header) - len(header.lstrip())
                first = text.count("\n", 0, offset) + 1
                fn_start = (name, first, "__global__" in header)
                stack.append("fn")
            elif _SCOPE_WORDS.search(header) and "=" not in header:
                stack.append("ns")
                header_start = i + 1
            else:
                stack.append("other")
        elif c == "}":
            if not stack:
                continue
            kind = stack.pop()
            if kind == "fn" and fn_start is not None:
                name, first, kernel = fn_start
                out.append((name, text.count("\n", 0, i) + 1 - first + 1, kernel))
                fn_start = None
            if not stack or stack[-1] == "ns":
                header_start = i + 1
    return out


CODE_SUFFIXES = {".py", ".cpp", ".h", ".cu", ".cuh"}


def measure(files: list[str]) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """Functions over their limit ("path::name" -> (lines, limit)) and every module's length."""
    functions: dict[str, tuple[int, int]] = {}
    modules: dict[str, int] = {}
    for rel in files:
        if Path(rel).suffix not in CODE_SUFFIXES:
            continue
        source = _read(rel)
        modules[rel] = len(source.splitlines())
        finder = python_functions if rel.endswith(".py") else cpp_functions
        for name, lines, kernel in finder(rel, source):
            limit = KERNEL_MAX if kernel else FUNCTION_MAX
            key = f"{rel}::{name}"
            while key in functions:
                key += "'"
            if lines > limit:
                functions[key] = (lines, limit)
    return functions, modules


def _ratchet(kind: str, current: dict[str, int], allow: dict[str, int], limit_of) -> list[str]:
    errors = []
    for key, lines in sorted(current.items()):
        limit = limit_of(key)
        if lines <= limit:
            continue
        if key not in allow:
            errors.append(f"{kind} {key}: {lines} lines > {limit} (new)")
        elif lines > allow[key]:
            errors.append(f"{kind} {key}: {lines} lines, grew from the allowed {allow[key]}")
    for key, allowed in sorted(allow.items()):
        if current.get(key, 0) <= limit_of(key):
            errors.append(
                f"{kind} {key}: stale allow-list entry ({allowed}): now within the limit or gone"
            )
    return errors


def _module_limit(rel: str) -> int:
    return CORPUS_MODULE_MAX if rel.startswith(CORPUS_PACKAGE) else MODULE_MAX


def check_lengths(files: list[str]) -> list[str]:
    functions, modules = measure(files)
    over = {k: v[0] for k, v in functions.items()}
    limits = {k: v[1] for k, v in functions.items()}
    errors = _ratchet("function", over, FUNCTION_ALLOW, lambda k: limits.get(k, FUNCTION_MAX))
    errors += _ratchet("module", modules, MODULE_ALLOW, _module_limit)
    return errors


TEST_LAYERS = ("tests/core/", "tests/gpu/", "tests/serving/", "tests/corpus/", "tests/e2e/")


def check_test_layout(files: list[str]) -> list[str]:
    errors, seen = [], {}
    for rel in files:
        name = Path(rel).name
        if not (name.startswith("test_") and name.endswith(".py")):
            continue
        if rel.startswith("tests/") and not rel.startswith(TEST_LAYERS):
            errors.append(f"{rel}: a test module outside the layer folders {TEST_LAYERS}")
        if name in seen:
            errors.append(f"{rel}: same basename as {seen[name]}")
        seen.setdefault(name, rel)
    return errors


CHECKS = {
    "bench-doc": check_bench_doc,
    "references": check_references,
    "includes": check_includes,
    "lengths": check_lengths,
    "test-layout": check_test_layout,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--current", action="store_true", help="print today's offenders")
    parser.add_argument("--only", choices=sorted(CHECKS), help="run one check")
    args = parser.parse_args(argv)
    files = tracked_files()
    if args.current:
        functions, modules = measure(files)
        for key, (lines, _) in sorted(functions.items()):
            print(f'    "{key}": {lines},')
        print()
        for key, lines in sorted(modules.items()):
            if lines > MODULE_MAX:
                print(f'    "{key}": {lines},')
        return 0
    errors = []
    for name, check in CHECKS.items():
        if args.only in (None, name):
            errors += check(files)
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
