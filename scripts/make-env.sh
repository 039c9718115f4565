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

exec 9>"$venv.lock"
flock 9

"$python" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "need Python 3.11, got " + sys.version)'
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$(grep -E '^uv==' "$lock")"
# Compile every installed module once: without .pyc files (uv writes none by default, and
# PYTHONDONTWRITEBYTECODE is set on some machines) each run recompiles pandas, matplotlib, TensorFlow...
# from source: `make figure-3` took 7.0 s instead of 2.3 s here, and `import tensorflow` 14.8 s.
"$venv/bin/uv" pip install -q --compile-bytecode -p "$venv/bin/python" -c "$lock" --excludes <(echo horovod) \
  -e ".[$extras]"

[ "$horovod" = horovod ] || exit 0
# Horovod compiles against the installed frameworks: rebuilt when one of these pins changes.
abi="$(grep -E '^(horovod|tensorflow-cpu|mxnet|numpy)==' "$lock" | tr '\n' ' ')"
if [ "$(cat "$venv/.horovod-abi" 2>/dev/null)" != "$abi" ]; then
  pin="$(grep -E '^horovod==' "$lock")"
  echo "building $pin with TensorFlow, MXNet and Gloo (a few minutes)"
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 \
  HOROVOD_CPU_OPERATIONS=gloo MAKEFLAGS="-j$(nproc)" \
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-cache-dir --no-deps \
      --force-reinstall "$pin"
  printf '%s' "$abi" > "$venv/.horovod-abi"
fi
for fw in tensorflow mxnet; do
  "$venv/bin/python" -c "import horovod.$fw as hvd; assert hvd.gloo_built()" 2>/dev/null \
    || { echo "Horovod in $venv lacks $fw or Gloo: rm $venv/.horovod-abi and make train-env" >&2; exit 1; }
done
