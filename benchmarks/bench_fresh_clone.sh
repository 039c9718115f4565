#!/usr/bin/env bash
# Benchmark: a fresh clone to paper/figures/figure-3.pdf, environment creation included (target < 3 min).
# Uses an empty package cache, so every wheel is downloaded as on a new machine.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/clone"
cd "$work/clone"
export UV_CACHE_DIR="$work/uv-cache" PIP_NO_CACHE_DIR=1
unset MLFLOW_TRACKING_URI
start=$(date +%s%N)
make -s figure-3 >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
end=$(date +%s%N)
test -s paper/figures/figure-3.pdf
elapsed=$(( (end - start) / 1000000 ))
echo "fresh clone -> make figure-3: $((elapsed / 1000)).$(( (elapsed % 1000) / 100 )) s (target < 180 s)"
