"""scripts/pip_audit_check.py: how pip-audit's output becomes the exit status of scripts/audit.sh
(offline -> warning and 0; an untriaged finding -> 1). No network: synthetic pip-audit output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import pip_audit_check as pac  # noqa: E402


def _json(deps) -> str:
    return json.dumps({"dependencies": deps, "fixes": []})


def test_all_not_found_on_pypi_is_unreachable():
    out = _json(
        [{"name": n, "skip_reason": f"Dependency not found on PyPI: {n}"} for n in ("a", "b")]
    )
    r = pac.classify("req.txt", 0, out, "")
    assert r.unreachable and r.audited == 0


def test_connection_error_is_unreachable():
    err = "Traceback ...\nrequests.exceptions.ConnectionError: Max retries exceeded (NameResolutionError)"
    r = pac.classify("req.txt", 1, "", err)
    assert "unreachable" in r.unreachable


def test_other_failure_is_reported_not_unreachable_silently():
    r = pac.classify("req.txt", 2, "", "error: bad requirement line")
    assert r.unreachable.startswith("pip-audit failed")


def test_findings_and_own_packages():
    out = _json(
        [
            {"name": "gputok", "skip_reason": "Dependency not found on PyPI"},
            {"name": "numpy", "version": "1.26.4", "vulns": []},
            {"name": "foo", "version": "1.0", "vulns": [{"id": "GHSA-x", "fix_versions": ["1.1"]}]},
        ]
    )
    r = pac.classify("venv", 1, out, "")
    assert not r.unreachable and r.audited == 2 and not r.skipped
    assert r.findings == [("GHSA-x", "foo", "1.0", ["1.1"])]


def test_ignore_file_needs_justification():
    ok, errors = pac.parse_ignore(
        "# comment\nGHSA-x foo -- only reachable through an API we do not call\nPYSEC-1 bar\n"
    )
    assert ok == {"GHSA-x": "foo: only reachable through an API we do not call"}
    assert len(errors) == 1 and "PYSEC-1" in errors[0]


def test_main_exit_status(tmp_path, monkeypatch):
    ignore = tmp_path / "ignore.txt"
    vuln = _json(
        [{"name": "foo", "version": "1.0", "vulns": [{"id": "GHSA-x", "fix_versions": []}]}]
    )
    monkeypatch.setattr(pac, "run_pip_audit", lambda *a: (1, vuln, ""))
    req = tmp_path / "r.txt"
    req.write_text("foo==1.0\n")
    ignore.write_text("")
    assert pac.main([str(req), "--ignore-file", str(ignore)]) == 1
    ignore.write_text("GHSA-x foo -- not reachable from gputok\n")
    assert pac.main([str(req), "--ignore-file", str(ignore)]) == 0
    monkeypatch.setattr(pac, "run_pip_audit", lambda *a: (1, "", "ConnectionError: Max retries"))
    assert pac.main([str(req), "--ignore-file", str(ignore)]) == 0


def test_finding_is_triaged_under_any_alias(tmp_path, monkeypatch):
    """The PyPI service may name an advisory PYSEC-… where the ignore file lists its GHSA or
    CVE id (and OSV the other way round): any alias counts, an unrelated id does not."""
    vuln = _json(
        [
            {
                "name": "foo",
                "version": "1.0",
                "vulns": [{"id": "PYSEC-9", "fix_versions": [], "aliases": ["GHSA-y", "CVE-1"]}],
            }
        ]
    )
    rep = pac.classify("venv", 1, vuln, "")
    assert (
        pac.triage_reason(rep, "PYSEC-9", {"CVE-1": "foo: not reachable"}) == "foo: not reachable"
    )
    assert pac.triage_reason(rep, "PYSEC-9", {"GHSA-z": "other"}) is None
    monkeypatch.setattr(pac, "run_pip_audit", lambda *a: (1, vuln, ""))
    req = tmp_path / "r.txt"
    req.write_text("foo==1.0\n")
    ignore = tmp_path / "ignore.txt"
    ignore.write_text("GHSA-y foo -- only through an API we do not call\n")
    assert pac.main([str(req), "--ignore-file", str(ignore)]) == 0
    ignore.write_text("GHSA-z foo -- a different advisory\n")
    assert pac.main([str(req), "--ignore-file", str(ignore)]) == 1
