#!/usr/bin/env bash
# Create or bring up to date one Python environment from requirements.lock, holding a lock while it does, so
# that two make commands started at once (`make figure-3 & make figure-4` on a fresh clone) do not build the
# same environment at the same time: the second waits, then finds it done (uv installs nothing twice).
#
#   scripts/make-env.sh VENV EXTRAS [horovod]
#     VENV     the environment's folder (.venv, .venv-train)
#     EXTRAS   the pyproject extras to install, comma separated (build,test)
#     horovod  then build Horovod from source against the installed TensorFlow and MXNet (with Gloo), once per
#              set of the pins it compiles against
# Environment: PYTHON (default python3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$1 extras=$2 horovod=${3:-}
python=${PYTHON:-python3.11}
lock=requirements.lock

# A line per step with the time since the start: the first build takes minutes (the training one ~15).
step() { printf '%s: [%dm%02ds] %s\n' "$venv" $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

exec 9>"$venv.lock"
flock -n 9 || { step "another make is building $venv: waiting for it"; flock 9; }

"$python" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "need Python 3.11, got " + sys.version)'
[ -x "$venv/bin/python" ] || { step "creating the environment with $python"; "$python" -m venv "$venv"; }
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$(grep -E '^uv==' "$lock")"
step "installing the pinned packages of [$extras] from $lock (uv)"
# Compile every installed module once: without .pyc files (uv writes none by default, and
# PYTHONDONTWRITEBYTECODE is set on some machines) each run recompiles pandas, matplotlib, TensorFlow...
# from source: `make figure-3` took 7.0 s instead of 2.3 s here, and `import tensorflow` 14.8 s.
"$venv/bin/uv" pip install -q --compile-bytecode -p "$venv/bin/python" -c "$lock" --excludes <(echo horovod) \
  -e ".[$extras]"

[ "$horovod" = horovod ] || { step "ready"; exit 0; }
# wait_for PID SECONDS: true once PID has ended, false if it still runs after SECONDS.
wait_for() { for _ in $(seq "$2"); do kill -0 "$1" 2>/dev/null || return 0; sleep 1; done; ! kill -0 "$1" 2>/dev/null; }
# Horovod compiles against the installed frameworks: rebuilt when one of these pins changes.
abi="$(grep -E '^(horovod|tensorflow-cpu|mxnet|numpy)==' "$lock" | tr '\n' ' ')"
if [ "$(cat "$venv/.horovod-abi" 2>/dev/null)" != "$abi" ]; then
  pin="$(grep -E '^horovod==' "$lock")"
  log="$venv/horovod-build.log"
  step "compiling $pin with TensorFlow, MXNet and Gloo (5 to 15 min on 2 cores; the compiler's output: $log)"
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 \
  HOROVOD_CPU_OPERATIONS=gloo MAKEFLAGS="-j$(nproc)" \
    "$venv/bin/python" -m pip install -v --disable-pip-version-check --no-build-isolation --no-cache-dir --no-deps \
      --force-reinstall "$pin" >"$log" 2>&1 &
  build=$!
  # Every 30 s: cmake's own progress ("[ 42%] Building CXX object ...") from the log.
  while ! wait_for "$build" 30; do
    done_pct="$(grep -oE '\[ *[0-9]+%\]' "$log" | tail -n 1 | tr -d '[] ' || true)"
    step "compiling Horovod: ${done_pct:-0%} of cmake's targets built"
  done
  wait "$build" || { tail -n 40 "$log" >&2; echo "make-env.sh: the Horovod build failed; all of it in $log" >&2; exit 1; }
  step "Horovod built"
  printf '%s' "$abi" > "$venv/.horovod-abi"
fi
for fw in tensorflow mxnet; do
  "$venv/bin/python" -c "import horovod.$fw as hvd; assert hvd.gloo_built()" 2>/dev/null \
    || { echo "Horovod in $venv lacks $fw or Gloo: rm $venv/.horovod-abi and make train-env" >&2; exit 1; }
done
step "ready"
