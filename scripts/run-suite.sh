#!/usr/bin/env bash
# The whole suite, as `make test` runs it, in three steps (docs/testing.md):
# 1. the unit and integration tiers side by side (pytest-xdist, one file per worker at a time, so a
#    module's fixtures stay in one process);
# 2. what is marked `serial` (the system tier: real vLLM servers on the CPU, the fault loops, live
#    alerts, the fleet), two files at a time: each waits on servers and windows a good part of its time;
# 3. what is marked `alone` (the demo end to end, the soak, two timing comparisons), one after another
#    with nothing beside them: they compare timings across their own run.
# pytest's exit 5 (nothing collected) is a failure here. GDX_TEST_TIMELINE=FILE records each test's span
# and the machine's busy cores (tests/support/timeline.py); the summary is printed at the end.
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
run tests -m "serial and not alone" -n "$workers" --dist loadfile || rc=$((rc ? rc : $?))
run tests -m alone || rc=$((rc ? rc : $?))
if [ -n "${GDX_TEST_TIMELINE:-}" ] && [ -s "$GDX_TEST_TIMELINE" ]; then
  "$python" -m tests.support.timeline "$GDX_TEST_TIMELINE"
fi
exit "$rc"
