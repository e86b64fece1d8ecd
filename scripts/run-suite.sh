#!/usr/bin/env bash
# The whole suite, as `make test` runs it, in two steps (docs/testing.md):
# 1. everything but what is marked `alone`, WORKERS files side by side (pytest-xdist, one file per
#    worker at a time, so a module's fixtures stay in one process; the longest files first,
#    tests/support/durations.json, in the order collected: --no-loadscope-reorder, else xdist puts
#    the files with the most tests first). More workers than cores: the real servers, fault loops, live
#    alerts and the fleet wait on starts and windows much of their time, and the CPU-bound sweeps
#    fill those waits.
# 2. what is marked `alone` (two timing comparisons), one after another with nothing beside them:
#    they compare timings across their own run.
# pytest's exit 5 (nothing collected) is a failure here. GDX_TEST_TIMELINE=FILE records each test's span,
# the machine's busy cores and the test's own CPU seconds (tests/support/timeline.py); the summary is
# printed at the end.
# Usage: scripts/run-suite.sh PYTHON [WORKERS]
set -uo pipefail
python=$1
workers=${2:-3}
run() {
  local rc=0
  "$python" -m pytest "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then echo "pytest collected no tests: failing"; return 1; fi
  return "$rc"
}
rc=0
run tests -m "not alone" -n "$workers" --dist loadfile --no-loadscope-reorder || rc=$?
# only the files that mark a test `alone`: collecting the whole suite again for two tests took 10 s
alone=$(grep -rlE --include='test_*.py' 'mark\.alone' tests | sort)
run $alone -m alone || rc=$((rc ? rc : $?))
if [ -n "${GDX_TEST_TIMELINE:-}" ] && [ -s "$GDX_TEST_TIMELINE" ]; then
  "$python" -m tests.support.timeline "$GDX_TEST_TIMELINE"
fi
exit "$rc"
