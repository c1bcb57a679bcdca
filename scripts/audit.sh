#!/usr/bin/env bash
# Audit the pinned dependencies (requirements/*.txt) and the project venv with pip-audit.
#
#   scripts/audit.sh              # exit 0: clean, or the service was unreachable (warning)
#                                 # exit 1: a finding not listed in security/pip-audit-ignore.txt
#
# pip-audit lives in its own venv (.cache/audit-venv, pinned by requirements/audit.txt) so it
# never changes the project's .venv. Offline-tolerant: when pip-audit cannot be installed or
# the vulnerability service cannot be reached, it says so in a WARNING and exits 0 (CI must not
# fail on network absence). GPUTOK_AUDIT_SERVICE=osv|pypi (default pypi) picks the service.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
AUDIT_VENV=${GPUTOK_AUDIT_VENV:-$ROOT/.cache/audit-venv}

warn() { printf '\033[1m[audit] WARNING:\033[0m %s\n' "$*" >&2; }

if ! "$AUDIT_VENV/bin/pip-audit" --version >/dev/null 2>&1; then
  if ! { "$PY" -m venv "$AUDIT_VENV" && "$AUDIT_VENV/bin/pip" install -q -r requirements/audit.txt; }; then
    warn "could not install pip-audit (requirements/audit.txt); dependencies were NOT audited"
    exit 0
  fi
fi

VENV_SITE=""
if [ -x .venv/bin/python ]; then
  VENV_SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
fi
exec "$AUDIT_VENV/bin/python" scripts/pip_audit_check.py \
  --pip-audit "$AUDIT_VENV/bin/pip-audit" \
  --ignore-file security/pip-audit-ignore.txt \
  --service "${GPUTOK_AUDIT_SERVICE:-pypi}" \
  ${VENV_SITE:+--venv-site "$VENV_SITE"} \
  requirements/*.txt
