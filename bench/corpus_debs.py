"""The Debian packages bench/corpus.py reads its documents from: each .deb fetched by its pin
(version, URL, sha256 in bench/corpus_manifest.json) into ``.cache/corpus/debs`` and read with
``dpkg-deb --fsys-tarfile``, nothing installed."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEB_CACHE = REPO / ".cache" / "corpus" / "debs"


def log(msg: str) -> None:
    print(f"[corpus] {msg}", file=sys.stderr, flush=True)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class CorpusError(RuntimeError):
    pass


def _apt_uri(spec: str) -> tuple[str, str, int, str]:
    """(url, filename, size, sha256) that apt would download for ``spec`` (pkg or pkg=ver)."""
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            ["apt-get", "--print-uris", "download", spec],
            cwd=d,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    for line in out.splitlines():
        if line.startswith("'"):
            url, fname, size, digest = line.split()
            assert digest.startswith("SHA256:"), line
            return url.strip("'"), fname, int(size), digest[len("SHA256:") :]
    raise CorpusError(f"apt-get --print-uris download {spec}: no URI in output:\n{out}")


def fetch_deb(package: str, manifest: dict, repin: bool) -> Path:
    """Return the path of the pinned .deb for ``package``, downloading it if needed."""
    DEB_CACHE.mkdir(parents=True, exist_ok=True)
    pin = manifest["debian"].get(package)
    if pin is None or repin:
        if not shutil.which("apt-get"):
            raise CorpusError(f"{package}: not pinned and apt-get is unavailable")
        url, fname, size, digest = _apt_uri(package)  # apt's current candidate
        if pin is None or pin["sha256"] != digest:
            log(f"repin {package}: {fname}")
        pin = {"url": url, "file": fname, "size": size, "sha256": digest}
        manifest["debian"][package] = pin
    path = DEB_CACHE / pin["file"]
    if not (path.is_file() and sha256_file(path) == pin["sha256"]):
        _download(package, pin, path)
    if "version" not in pin:  # first pin: record what the file says it is
        pin["version"] = _deb_field(path, "Version")
        pin["architecture"] = _deb_field(path, "Architecture")
    return path


def _download(package: str, pin: dict, path: Path) -> None:
    """Fetch the pinned .deb: ``apt-get download pkg=version`` (apt checks the archive's
    signatures), else the recorded URL; either way the sha256 must equal the pin."""
    version = pin.get("version")
    tmp = DEB_CACHE / (pin["file"] + ".part")
    got = False
    if shutil.which("apt-get") and version:
        # apt-get verifies the archive signature chain; it must be the pinned version.
        with tempfile.TemporaryDirectory(dir=DEB_CACHE) as d:
            arch = pin.get("architecture")
            spec = (
                f"{package}:{arch}={version}" if arch and arch != "all" else f"{package}={version}"
            )
            r = subprocess.run(
                ["apt-get", "download", spec],
                cwd=d,
                capture_output=True,
                text=True,
            )
            files = list(Path(d).glob("*.deb"))
            if r.returncode == 0 and len(files) == 1:
                files[0].replace(tmp)
                got = True
            else:
                log(
                    f"apt-get download {spec} failed ({r.stderr.strip()[-200:]}); "
                    f"trying {pin['url']}"
                )
    if not got:
        log(f"downloading {pin['url']}")
        with urllib.request.urlopen(pin["url"], timeout=120) as resp, open(tmp, "wb") as f:
            shutil.copyfileobj(resp, f)
    digest = sha256_file(tmp)
    if digest != pin["sha256"]:
        tmp.unlink()
        raise CorpusError(
            f"{package}: downloaded .deb sha256 {digest} != pinned {pin['sha256']} "
            f"(the archive moved on? rerun with --repin and review the diff)"
        )
    tmp.replace(path)


def _deb_field(path: Path, field: str) -> str:
    return subprocess.run(
        ["dpkg-deb", "-f", str(path), field], check=True, capture_output=True, text=True
    ).stdout.strip()


def iter_deb_files(deb: Path, select: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """Yield (path, bytes) of regular files in the deb's data tarball that ``select``
    accepts. Streams ``dpkg-deb --fsys-tarfile``: nothing is extracted to disk."""
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for m in tar:
                name = m.name[2:] if m.name.startswith("./") else m.name
                if m.isfile() and select(name):  # symlinks/hardlinks skipped: no repeats
                    f = tar.extractfile(m)
                    assert f is not None
                    yield name, f.read()
    finally:
        if proc.stdout:
            proc.stdout.close()
        if proc.wait() != 0:
            raise CorpusError(f"dpkg-deb --fsys-tarfile {deb} failed")
