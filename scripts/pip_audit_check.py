"""Run pip-audit on pinned requirement files and a venv; decide the exit status (scripts/audit.sh).

Standard library only. Exit 0: no findings, only findings listed with a justification in the
ignore file, or the vulnerability service was unreachable (a WARNING says that nothing was
audited). Exit 1: a finding that is not listed, or an ignore-file line without a justification.

Why the checks look like this (measured on the 2-core CPU machine, 2026-11-22): behind its
proxy pypi.org's JSON API answers 404 for every package, so pip-audit's default service
reports each one as "Dependency not found on PyPI" and exits 0 as if clean; api.osv.dev does
not resolve, so `-s osv` dies with a ConnectionError traceback. Both count as "unreachable".
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

NETWORK_ERRORS = (
    "ConnectionError",
    "NameResolutionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "ReadTimeout",
    "ConnectTimeout",
    "timed out",
)
# Our own packages (editable installs in the venv) are not on PyPI; skipping them is expected.
OWN = {"gputok", "gputok-client", "gputok_client"}


@dataclass
class Report:
    target: str
    audited: int = 0
    skipped: list[str] = field(default_factory=list)
    findings: list[tuple[str, str, str, list[str]]] = field(
        default_factory=list
    )  # id, pkg, ver, fix
    # Other names of a finding (CVE, GHSA, PYSEC): the PyPI and OSV services may report the same
    # advisory under different primary IDs, so the ignore file matches any of them.
    aliases: dict[str, list[str]] = field(default_factory=dict)
    unreachable: str = ""


def parse_ignore(text: str) -> tuple[dict[str, str], list[str]]:
    """{vuln id: justification} and errors (lines without a justification)."""
    ignored, errors = {}, []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^(\S+)\s+(\S+)\s+--\s+(\S.*)$", line)
        if not m:
            errors.append(f"line {n}: {line!r} (want '<ID> <package> -- <justification>')")
            continue
        ignored[m.group(1)] = f"{m.group(2)}: {m.group(3)}"
    return ignored, errors


def classify(target: str, returncode: int, stdout: str, stderr: str) -> Report:
    """Turn one pip-audit run (-f json) into a Report."""
    r = Report(target)
    try:
        data = json.loads(stdout) if stdout.strip() else None
    except json.JSONDecodeError:
        data = None
    if data is None:
        if any(s in stderr for s in NETWORK_ERRORS):
            last = [ln for ln in stderr.strip().splitlines() if ln.strip()][-1:]
            r.unreachable = f"vulnerability service unreachable: {(last or ['?'])[0][:300]}"
        else:
            r.unreachable = f"pip-audit failed (exit {returncode}): {stderr.strip()[-500:]}"
        return r
    deps = data.get("dependencies", []) if isinstance(data, dict) else data
    for d in deps:
        name = d.get("name", "?")
        if d.get("skip_reason"):
            if name.lower() not in OWN:
                r.skipped.append(f"{name}: {d['skip_reason']}")
            continue
        r.audited += 1
        for v in d.get("vulns", []):
            r.findings.append(
                (v.get("id", "?"), name, d.get("version", "?"), v.get("fix_versions", []))
            )
            if v.get("aliases"):
                r.aliases[v.get("id", "?")] = list(v["aliases"])
    if r.audited == 0 and r.skipped and all("not found on PyPI" in s for s in r.skipped):
        r.unreachable = (
            "vulnerability service unusable: every package was 'not found on PyPI' "
            f"({len(r.skipped)} skipped; is pypi.org's JSON API reachable?)"
        )
    return r


def run_pip_audit(pip_audit: str, args: list[str], service: str) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "audit.json"
        cmd = [pip_audit, *args, "-s", service, "-f", "json", "-o", str(out)]
        cmd += ["--progress-spinner", "off", "--timeout", "20"]
        p = subprocess.run(cmd, capture_output=True, text=True, check=False)
        return p.returncode, out.read_text() if out.exists() else "", p.stderr


def triage_reason(rep: Report, vid: str, ignored: dict[str, str]) -> str | None:
    """The ignore file's reason for finding ``vid`` under any of its names, else None."""
    names = [vid, *rep.aliases.get(vid, [])]
    return next((ignored[n] for n in names if n in ignored), None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("requirements", nargs="*", type=Path)
    ap.add_argument("--pip-audit", default="pip-audit")
    ap.add_argument("--ignore-file", type=Path, default=Path("security/pip-audit-ignore.txt"))
    ap.add_argument("--service", default="pypi", choices=["pypi", "osv"])
    ap.add_argument("--venv-site", help="site-packages of the project venv to audit too")
    a = ap.parse_args(argv)

    ignored, errors = parse_ignore(a.ignore_file.read_text() if a.ignore_file.exists() else "")
    for e in errors:
        print(f"[audit] ERROR in {a.ignore_file}: {e}", file=sys.stderr)

    targets = [(str(f), ["--no-deps", "--disable-pip", "-r", str(f)]) for f in a.requirements]
    if a.venv_site:
        targets.append((f"venv {a.venv_site}", ["--path", a.venv_site]))
    reports = []
    for name, args in targets:
        rep = classify(name, *run_pip_audit(a.pip_audit, args, a.service))
        reports.append(rep)
        if rep.unreachable:  # the same service for every target: stop asking
            break

    bad = bool(errors)
    for rep in reports:
        if rep.unreachable:
            print(
                f"[audit] WARNING: {rep.unreachable}. Dependencies were NOT audited "
                f"(service {a.service}); run scripts/audit.sh where the network is available.",
                file=sys.stderr,
            )
            return 1 if bad else 0
        print(f"[audit] {rep.target}: {rep.audited} packages audited, {len(rep.findings)} findings")
        for s in rep.skipped:
            print(f"[audit]   skipped {s}")
        for vid, pkg, ver, fix in rep.findings:
            why = triage_reason(rep, vid, ignored)
            tag = f"ignored ({why})" if why else "NOT TRIAGED"
            print(f"[audit]   {vid} {pkg}=={ver} fix {', '.join(fix) or '-'}: {tag}")
            bad |= why is None
    if bad:
        print(
            "[audit] FAIL: triage the findings above in docs/security.md and either bump the pin "
            f"or list them with a justification in {a.ignore_file}",
            file=sys.stderr,
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
