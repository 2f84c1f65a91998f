#!/usr/bin/env bash
# The demo: install what is missing, build, and run the resume protocol end
# to end (encode-side sender, language-side receivers, lossy control
# network, verified payload) over the seeds' scenarios and a mixed load.
# Extra arguments go to embgw-sim (e.g. --drop 20 --ranks 4).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
exec ./build/app/embgw-sim/embgw-sim "$@"
