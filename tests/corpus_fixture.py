"""Corpus access for tests: ``load_corpus("ci")`` -> list[str] documents.

Builds the pinned corpus if missing (bench/corpus.py: Debian .debs via apt-get, sha256
checked; ``ci`` ~4 MB, ~16 s the first time, then a cached jsonl read, ~0.1 s).
``corpus`` is a session-scoped pytest fixture with the ``ci`` profile; set
``GPUTOK_CORPUS=bench`` to run corpus tests on the full ~85 MB corpus instead.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

_BENCH = str(Path(__file__).resolve().parents[1] / "bench")
if _BENCH not in sys.path:
    sys.path.insert(0, _BENCH)

import corpus as _corpus  # noqa: E402  (bench/corpus.py)

try:
    import pytest
except ImportError:  # usable from scripts without pytest
    pytest = None


@functools.cache
def _load(profile: str) -> tuple[str, ...]:
    return tuple(_corpus.load_corpus(profile))


def load_corpus(profile: str = "ci") -> list[str]:
    """Documents of ``profile`` ("ci" | "bench"), built and hash-verified if needed."""
    return list(_load(profile))


def load_corpus_with_sources(profile: str = "ci") -> list[tuple[str, str]]:
    """[(src, text)], src like ``man-ja:usr/share/man/ja/man1/ls.1.gz#0`` (for messages)."""
    return _corpus.load_corpus_with_sources(profile)


def corpus_profile() -> str:
    return os.environ.get("GPUTOK_CORPUS", "ci")


if pytest is not None:

    @pytest.fixture(scope="session")
    def corpus() -> list[str]:
        return load_corpus(corpus_profile())
