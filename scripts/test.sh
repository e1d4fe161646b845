#!/usr/bin/env bash
# The test command: every test, offline, with a virtual X server for the desktop tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DISPLAY:-}" ] && command -v xvfb-run >/dev/null; then
  exec xvfb-run -a -s "-screen 0 1920x1080x24" cargo test "$@"
fi
exec cargo test "$@"
