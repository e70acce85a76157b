# Shared by scripts/test and scripts/demo: make .venv, install the project into it, check the emulator.
# Sourced, not run. Re-installs only when pyproject.toml changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SCHEDULER_DEDUP_VENV:-$ROOT/.venv}"
PYTHON_BIN="${PYTHON:-python3}"

if ! command -v "$PYTHON_BIN" >/dev/null 2>&1; then
  echo "error: $PYTHON_BIN not found; install Python 3.11 or newer (for example apt-get install python3 python3-venv)" >&2
  exit 2
fi
if ! "$PYTHON_BIN" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "error: Python 3.11 or newer is needed, $PYTHON_BIN is $("$PYTHON_BIN" -V 2>&1); set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating virtual environment $VENV"
  "$PYTHON_BIN" -m venv "$VENV" || { echo "error: could not create a venv; install python3-venv" >&2; exit 2; }
fi
STAMP="$VENV/.scheduler-dedup-installed"
# pyproject.toml's ranges, and the pins a deploy archive holds (infra/job/archive.py, each store's registration)
WANT="$(cat "$ROOT/pyproject.toml" "$ROOT/infra/job/archive.py" "$ROOT"/handler/stores/*/__init__.py | sha256sum | cut -c1-16)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "==> installing scheduler-dedup and its dev dependencies into $VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
  # pip's output is shown only when the install fails: on success it is notes that need no action
  # (setuptools' remark on editable installs of a package-dir layout, a machine's pip.conf sources).
  if ! PIP_LOG="$("$VENV/bin/python" -m pip install --quiet -e "$ROOT[dev]" 2>&1)"; then
    echo "$PIP_LOG" >&2
    echo "error: installing scheduler-dedup into $VENV failed (pip's output above)" >&2
    exit 2
  fi
  # The handler's dependencies at the versions a deploy archive pins, whatever newer release the ranges allow: the
  # tests then run against what a deployed handler installs.
  PINS="$("$VENV/bin/python" -c 'from scheduler_dedup.infra.job.archive import tested_pins; print(" ".join(tested_pins()))')"
  # shellcheck disable=SC2086  # one word per pin
  if ! PIP_LOG="$("$VENV/bin/python" -m pip install --quiet $PINS 2>&1)"; then
    echo "$PIP_LOG" >&2
    echo "error: installing the deploy archive's pinned versions ($PINS) into $VENV failed (pip's output above)" >&2
    exit 2
  fi
  echo "$WANT" > "$STAMP"
fi
# Debian packages the suite needs, installed where missing and we may (CI runs as root on Debian): redis-server runs
# the Redis store's tests, demo and campaigns (missing: fail below with the install command); chromium and
# chromium-driver run tests/test_docs_browser.py (missing: those tests skip, and fail under CI=true). apt-get's
# output is shown only when it fails.
apt_install() {  # apt_install COMMAND PACKAGE...: install the packages when COMMAND is not on PATH
  local command="$1"; shift
  if command -v "$command" >/dev/null 2>&1 || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    return 0
  fi
  echo "==> installing $* (apt-get install -y $*)"
  if ! APT_LOG="$( (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@") 2>&1)"; then
    echo "$APT_LOG" >&2
    echo "error: apt-get install -y $* failed (output above)" >&2
    exit 2
  fi
}
apt_install redis-server redis-server
apt_install chromedriver chromium chromium-driver
# Fail early, with the install command, when java, the Firestore emulator jar, the Spanner emulator or redis-server
# is missing.
"$VENV/bin/python" -c '
import sys
from scheduler_dedup.local.servers.firestore_emulator import EmulatorNotFoundError, find_emulator_jar, find_java
from scheduler_dedup.local.servers.redis_server import find_redis_server
from scheduler_dedup.local.servers.spanner_emulator import find_emulator
try:
    find_java(); find_emulator_jar(); find_emulator(); find_redis_server()
except EmulatorNotFoundError as exc:
    sys.exit(f"error: {exc}")
'
# Byte-compile our sources once: every handler process the tests, the demo and run-local start imports them, and
# with PYTHONDONTWRITEBYTECODE set (as on some CI machines) each start would compile them again.
"$VENV/bin/python" -m compileall -q -j 0 "$ROOT/handler" "$ROOT/infra" "$ROOT/policies" "$ROOT/local" >/dev/null || true
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
