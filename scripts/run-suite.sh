#!/usr/bin/env bash
# The whole suite, as `make test` runs it: the unit and integration tiers side by side (pytest-xdist,
# one file per worker at a time, so a module's fixtures stay in one process), then what is marked
# `serial` alone: the system tier (real vLLM servers on the CPU, soaks, fault loops, live alerts) and
# the few other tests that time what they see. pytest's exit 5 (nothing collected) is a failure here.
# Usage: scripts/run-suite.sh PYTHON [WORKERS]
set -uo pipefail
python=$1
workers=${2:-2}
run() {
  local rc=0
  "$python" -m pytest "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then echo "pytest collected no tests: failing"; return 1; fi
  return "$rc"
}
rc=0
run tests/unit tests/integration -m "not serial" -n "$workers" --dist loadfile || rc=$?
run tests -m serial || rc=$((rc ? rc : $?))
exit "$rc"
