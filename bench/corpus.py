#!/usr/bin/env python3
"""Deterministic, diverse, multilingual text corpus for gputok's tests and benchmarks.

Why not a repeated book: a repeated text makes every pretoken cache look perfect. This
corpus mixes English prose (CPython and Linux kernel reST docs), code (Python stdlib,
kernel device-tree YAML) and man pages in Japanese, Chinese, Russian, German, French and
Polish, taken from pinned Debian bookworm packages.

Pinning (``bench/corpus_manifest.json``, checked in):
  * each .deb by version, URL and sha256 (downloaded with ``apt-get download`` into
    ``.cache/corpus/debs``; read with ``dpkg-deb --fsys-tarfile``, nothing installed);
  * each profile's final ``corpus-<profile>.jsonl`` by sha256, size and document count.
Any mismatch fails loudly; ``--repin`` rewrites the manifest from what was built. Fetching and
reading the .debs lives in ``bench/corpus_debs.py``.

Documents: one per source file, files longer than 16 KiB split at line boundaries into
pieces of at most 16 KiB (a single longer line stays whole). Exact duplicates are
dropped, so no text is repeated. Order: by sha256 of the text, which interleaves the
sources deterministically without an RNG.

Profiles:
  * ``ci``    ~4 MB, every source but linux-doc (so CI downloads ~32 MB of .debs, not 69);
  * ``bench`` ~85 MB: every document of every source, linux-doc capped at 20 MB.
A profile's documents depend only on each source's own documents, so ``ci`` built from
the debs equals ``ci`` derived from the ``bench`` jsonl (``derive``/bundle path).

GPU machine (no network): ``python bench/corpus.py bundle`` writes
``.carry/corpus-bench.jsonl.xz`` (~15 MB); there ``python bench/corpus.py unbundle``
(or ``load_corpus("bench")``) rebuilds ``.cache/corpus/corpus-bench.jsonl`` and checks its
sha256. ``ci`` is derived from the bench corpus when the debs are absent.

Output line format: ``{"text": ..., "src": "<source>:<path>#<piece>"}`` (ensure_ascii=False).

CLI (times on the 2-core CPU machine)::

    python bench/corpus.py ensure --profile ci|bench   # cheapest way to a verified corpus
    python bench/corpus.py build --profile ci|bench [--repin]   # ci ~15 s, bench ~35 s
    python bench/corpus.py bundle [--out PATH]         # ~3 min (xz -9e, one core)
    python bench/corpus.py unbundle [--bundle PATH]    # ~7 s
    python bench/corpus.py info
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import lzma
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corpus_debs import (  # beside this file, in bench/
    DEB_CACHE,
    CorpusError,
    fetch_deb,
    iter_deb_files,
    log,
    sha256_file,
)

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "bench" / "corpus_manifest.json"
CACHE = REPO / ".cache" / "corpus"
BUNDLE = REPO / ".carry" / "corpus-bench.jsonl.xz"
MAX_DOC_BYTES = 16 * 1024
PROFILES = ("ci", "bench")


# ---------------------------------------------------------------- sources


@dataclass(frozen=True)
class Source:
    name: str  # short id used in "src"
    package: str  # Debian binary package
    select: Callable[[str], bool]  # member path (no leading "./") -> take it?
    gunzip: bool  # members are .gz


def _py_doc(p: str) -> bool:
    return p.startswith("usr/share/doc/python3.11/html/_sources/") and p.endswith(".rst.txt")


_LINUX_EXT = (".rst.gz", ".txt.gz", ".yaml.gz", ".py.gz", ".sh.gz")


def _linux_doc(p: str) -> bool:
    # Documentation/ only: html/_sources/*.rst.txt are copies of the same reST.
    return p.startswith("usr/share/doc/linux-doc-6.1/Documentation/") and p.endswith(_LINUX_EXT)


def _stdlib(p: str) -> bool:
    return p.startswith("usr/lib/python3.11/") and p.endswith(".py")


def _man(p: str) -> bool:
    return p.startswith("usr/share/man/") and p.endswith(".gz")


SOURCES: tuple[Source, ...] = (
    Source("python-doc", "python3.11-doc", _py_doc, False),
    Source("python-stdlib", "libpython3.11-stdlib", _stdlib, False),
    Source("python-stdlib-core", "libpython3.11-minimal", _stdlib, False),  # os.py, re/, ...
    Source("man-ja", "manpages-ja", _man, True),
    Source("man-zh", "manpages-zh", _man, True),
    Source("man-ru", "manpages-ru", _man, True),
    Source("man-de", "manpages-de", _man, True),
    Source("man-fr", "manpages-fr", _man, True),
    Source("man-pl", "manpages-pl", _man, True),
    # Last: dedup keeps the first occurrence in this order, so putting the one source that
    # ``ci`` lacks last keeps every other source's documents identical in both profiles
    # (which is what lets ``derive`` make ``ci`` from the bench corpus).
    Source("linux-doc", "linux-doc-6.1", _linux_doc, True),
)

# Byte quota per source per profile (None = take everything). Documents are taken in
# sha256 order until the quota is reached, so a quota picks a pseudo-random sample.
QUOTAS: dict[str, dict[str, int | None]] = {
    "ci": {
        "python-doc": 1_200_000,
        "python-stdlib": 600_000,
        "python-stdlib-core": 200_000,
        "man-ja": 350_000,
        "man-zh": 350_000,
        "man-ru": 350_000,
        "man-de": 350_000,
        "man-fr": 350_000,
        "man-pl": 350_000,
    },
    # ~85 MB (the GPU batch figures need >= 64 MB). linux-doc is capped at 20 MB so English reST does
    # not dominate and the xz bundle stays ~15 MB (the GPU machine's carry limit is 64 MiB).
    "bench": {s.name: (20_000_000 if s.name == "linux-doc" else None) for s in SOURCES},
}


def profile_packages(profile: str) -> list[str]:
    return [s.package for s in SOURCES if s.name in QUOTAS[profile]]


# ---------------------------------------------------------------- manifest


def load_manifest() -> dict:
    if MANIFEST.is_file():
        return json.loads(MANIFEST.read_text())
    return {"debian": {}, "profiles": {}}


def save_manifest(m: dict) -> None:
    MANIFEST.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    log(f"wrote {MANIFEST.relative_to(REPO)}")


# ---------------------------------------------------------------- documents


def split_doc(text: str, max_bytes: int = MAX_DOC_BYTES) -> list[str]:
    """Split at line boundaries into pieces of at most ``max_bytes`` UTF-8 bytes."""
    if len(text.encode("utf-8")) <= max_bytes:
        return [text]
    pieces: list[str] = []
    cur: list[str] = []
    cur_len = 0
    for line in text.splitlines(keepends=True):
        n = len(line.encode("utf-8"))
        if cur and cur_len + n > max_bytes:
            pieces.append("".join(cur))
            cur, cur_len = [], 0
        cur.append(line)
        cur_len += n
    if cur:
        pieces.append("".join(cur))
    return pieces


def source_docs(src: Source, deb: Path) -> list[tuple[str, str]]:
    """(src_id, text) documents of one source, in path order, UTF-8 strict (files that
    are not valid UTF-8 are skipped and counted)."""
    files = []
    bad = 0
    for path, data in iter_deb_files(deb, src.select):
        if src.gunzip:
            data = gzip.decompress(data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            bad += 1
            continue
        files.append((path, text))
    files.sort()
    if bad:
        log(f"{src.name}: skipped {bad} files that are not UTF-8")
    docs = []
    for path, text in files:
        for i, piece in enumerate(split_doc(text)):
            if piece.strip():
                docs.append((f"{src.name}:{path}#{i}", piece))
    return docs


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def select_profile(
    docs_by_source: dict[str, list[tuple[str, str]]], profile: str
) -> list[tuple[str, str]]:
    """Dedup (first occurrence in source order wins), apply quotas, order by text hash."""
    seen: set[str] = set()
    chosen: list[tuple[str, str, str]] = []
    for src in SOURCES:  # fixed order makes dedup deterministic
        if src.name not in QUOTAS[profile]:
            continue
        quota = QUOTAS[profile][src.name]
        keyed = []
        for sid, text in docs_by_source[src.name]:
            k = _text_key(text)
            if k in seen:
                continue
            seen.add(k)
            keyed.append((k, sid, text))
        keyed.sort()
        total = 0
        for k, sid, text in keyed:
            if quota is not None and total >= quota:
                break
            chosen.append((k, sid, text))
            total += len(text.encode("utf-8"))
    chosen.sort()
    return [(sid, text) for _, sid, text in chosen]


def jsonl_bytes(docs: list[tuple[str, str]]) -> bytes:
    return "".join(
        json.dumps({"text": t, "src": s}, ensure_ascii=False) + "\n" for s, t in docs
    ).encode("utf-8")


def read_jsonl(path: Path) -> list[tuple[str, str]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append((d["src"], d["text"]))
    return out


def corpus_path(profile: str) -> Path:
    return CACHE / f"corpus-{profile}.jsonl"


def _stats(docs: list[tuple[str, str]], data: bytes) -> dict:
    per: dict[str, list[int]] = {}
    for sid, text in docs:
        e = per.setdefault(sid.split(":", 1)[0], [0, 0])
        e[0] += 1
        e[1] += len(text.encode("utf-8"))
    return {
        "sha256": hashlib.sha256(data).hexdigest(),
        "jsonl_bytes": len(data),
        "text_bytes": sum(v[1] for v in per.values()),
        "docs": len(docs),
        "sources": {k: {"docs": v[0], "text_bytes": v[1]} for k, v in sorted(per.items())},
    }


def _write_verified(profile: str, docs, manifest: dict, repin: bool) -> Path:
    data = jsonl_bytes(docs)
    st = _stats(docs, data)
    pin = manifest["profiles"].get(profile)
    if repin or pin is None:
        manifest["profiles"][profile] = st
        log(
            f"pinned {profile}: sha256 {st['sha256']}, {st['text_bytes'] / 1e6:.1f} MB, {st['docs']} docs"
        )
    elif pin["sha256"] != st["sha256"]:
        raise CorpusError(
            f"corpus {profile}: sha256 {st['sha256']} != pinned {pin['sha256']} "
            f"({st['docs']} docs / {st['text_bytes']} B vs {pin['docs']} / {pin['text_bytes']}); "
            f"rerun with --repin only if the change is intended"
        )
    out = corpus_path(profile)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    log(f"{profile}: {out} ({len(data) / 1e6:.1f} MB, {st['docs']} docs, sha256 ok)")
    return out


def build(profile: str, repin: bool = False) -> Path:
    """Build ``corpus-<profile>.jsonl`` from the pinned debs and verify its sha256."""
    manifest = load_manifest()
    t0 = time.time()
    docs_by_source = {}
    for src in SOURCES:
        if src.name not in QUOTAS[profile]:
            continue
        deb = fetch_deb(src.package, manifest, repin)
        docs_by_source[src.name] = source_docs(src, deb)
        log(f"{src.name}: {len(docs_by_source[src.name])} docs ({time.time() - t0:.1f} s)")
    docs = select_profile(docs_by_source, profile)
    out = _write_verified(profile, docs, manifest, repin)
    if repin:
        save_manifest(manifest)
    return out


def derive(profile: str, from_profile: str = "bench") -> Path:
    """Build ``profile`` from an existing, verified ``from_profile`` jsonl (no debs)."""
    manifest = load_manifest()
    src_path = ensure(from_profile, allow_build=False)
    by_source: dict[str, list[tuple[str, str]]] = {s.name: [] for s in SOURCES}
    for sid, text in read_jsonl(src_path):
        by_source[sid.split(":", 1)[0]].append((sid, text))
    for v in by_source.values():
        v.sort()  # back to path order, as source_docs yields
    docs = select_profile(by_source, profile)  # valid: from_profile has no quota on these
    return _write_verified(profile, docs, manifest, repin=False)


def verify(profile: str) -> bool:
    p = corpus_path(profile)
    pin = load_manifest()["profiles"].get(profile)
    return (
        bool(pin)
        and p.is_file()
        and p.stat().st_size == pin["jsonl_bytes"]
        and sha256_file(p) == pin["sha256"]
    )


# ---------------------------------------------------------------- bundle


def bundle(out: Path = BUNDLE, profile: str = "bench") -> Path:
    """Write an xz bundle of the verified ``profile`` corpus (for a machine with no network).

    The bundle holds the same lines in source-path order, not the corpus's hash order:
    similar documents side by side compress ~17% better (xz -9e: ~15 MB for ~85 MB of
    text, ~3-4 min on one core). ``unbundle`` restores the hash order and checks sha256."""
    src = ensure(profile)
    docs = sorted(read_jsonl(src))
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    tmp = out.with_suffix(".tmp")
    with lzma.open(tmp, "wb", preset=9 | lzma.PRESET_EXTREME) as fo:
        fo.write(jsonl_bytes(docs))
    tmp.replace(out)
    log(f"bundle {out} ({out.stat().st_size / 1e6:.1f} MB, {time.time() - t0:.0f} s)")
    return out


def unbundle(path: Path = BUNDLE, profile: str = "bench") -> Path:
    pin = load_manifest()["profiles"][profile]
    with lzma.open(path, "rb") as fi:
        lines = fi.read().decode("utf-8").splitlines()
    docs = [(d["src"], d["text"]) for d in map(json.loads, lines)]
    docs.sort(key=lambda st: _text_key(st[1]))  # the corpus's order (keys are unique)
    data = jsonl_bytes(docs)
    got = hashlib.sha256(data).hexdigest()
    if got != pin["sha256"]:
        raise CorpusError(f"bundle {path}: corpus sha256 {got} != pinned {pin['sha256']}")
    out = corpus_path(profile)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    log(f"unbundled {out} ({len(docs)} docs, sha256 ok)")
    return out


# ---------------------------------------------------------------- entry points


def _have_debs(profile: str) -> bool:
    m = load_manifest()["debian"]
    return all(p in m and (DEB_CACHE / m[p]["file"]).is_file() for p in profile_packages(profile))


def ensure(profile: str, allow_build: bool = True) -> Path:
    """Path of a verified ``corpus-<profile>.jsonl``; makes it if missing, preferring the
    cheapest way: existing file, bundle, derive from bench, debs in cache, download."""
    if verify(profile):
        return corpus_path(profile)
    if profile == "bench" and BUNDLE.is_file():
        return unbundle(BUNDLE, profile)
    if profile != "bench" and not _have_debs(profile) and (verify("bench") or BUNDLE.is_file()):
        return derive(profile, "bench")
    if not allow_build:
        raise CorpusError(f"corpus {profile} missing and building is not allowed here")
    return build(profile)


def load_corpus(profile: str = "ci") -> list[str]:
    """The documents of ``profile`` as a list of str (built and verified if needed)."""
    return [t for _, t in read_jsonl(ensure(profile))]


def load_corpus_with_sources(profile: str = "ci") -> list[tuple[str, str]]:
    return read_jsonl(ensure(profile))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="gputok corpus builder (see module docstring)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build a profile from pinned debs and verify it")
    b.add_argument("--profile", choices=PROFILES, default="ci")
    b.add_argument(
        "--repin", action="store_true", help="accept current debs/corpus, rewrite manifest"
    )
    e = sub.add_parser("ensure", help="make a verified profile by the cheapest available way")
    e.add_argument("--profile", choices=PROFILES, default="ci")
    bu = sub.add_parser("bundle", help="write an xz bundle of the bench corpus")
    bu.add_argument("--out", type=Path, default=BUNDLE)
    un = sub.add_parser("unbundle", help="rebuild the bench corpus from a bundle, check sha256")
    un.add_argument("--bundle", type=Path, default=BUNDLE)
    sub.add_parser("info", help="print the manifest's profiles and local state")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "build":
            print(build(args.profile, args.repin))
        elif args.cmd == "ensure":
            print(ensure(args.profile))
        elif args.cmd == "bundle":
            print(bundle(args.out))
        elif args.cmd == "unbundle":
            print(unbundle(args.bundle))
        elif args.cmd == "info":
            m = load_manifest()
            for p, st in m["profiles"].items():
                print(
                    f"{p}: {st['text_bytes'] / 1e6:.1f} MB text, {st['docs']} docs, "
                    f"sha256 {st['sha256']}, local {'ok' if verify(p) else 'missing'}"
                )
    except CorpusError as err:
        print(f"corpus: FAILED: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
