#!/usr/bin/env bash
# The Docker side of `make image-test` (tests/integration/test_image_integration.py drives it; usable by hand too):
#
#   scripts/image.sh daemon-start     # a private dockerd when no engine answers: prints DOCKER_HOST=... and PID=...
#   scripts/image.sh daemon-stop PID  # stops that daemon, by its PID (never by name)
#   scripts/image.sh base             # the CPU flavour's base: pulled, else made here (mmdebstrap + docker import)
#   scripts/image.sh build cpu|gpu    # scripts/container.sh docker with FLAVOUR=cpu|gpu, timed
#
# Debian's docker.io (20.10) and mmdebstrap are what this needs (make system-image installs them as root). The
# docker CLI is the package's own /usr/bin/docker: a newer CLI earlier on PATH refuses BuildKit without buildx.
# Environment: DOCKER_HOST (an engine to use), SCALESTUDY_DOCKER_ROOT (the private daemon's data root, kept
# between runs so that its layer cache makes the next build warm; default /var/lib/scalestudy-docker),
# CPU_BASE (default debian:bookworm), LOCAL_BASE (the name a locally made base gets: local/debian:bookworm).
# Exit codes: 0 done, 1 failed, 2 usage, 3 the engine or a tool is missing here.
set -euo pipefail
cd "$(dirname "$0")/.."

DOCKER="${DOCKER:-/usr/bin/docker}"
ROOT="${SCALESTUDY_DOCKER_ROOT:-/var/lib/scalestudy-docker}"
RUNDIR="${SCALESTUDY_DOCKER_RUN:-/run/scalestudy-docker}"
CPU_BASE="${CPU_BASE:-debian:bookworm}"
LOCAL_BASE="${LOCAL_BASE:-local/debian:bookworm}"

die() { local code=$1; shift; echo "image.sh: $*" >&2; exit "$code"; }
[ -x "$DOCKER" ] || die 3 "no $DOCKER: install Debian's docker.io (make system-image, as root)"

daemon_start() {
  if "$DOCKER" info >/dev/null 2>&1; then
    echo "DOCKER_HOST=${DOCKER_HOST:-}"
    echo "PID="
    return
  fi
  local sock="unix://$RUNDIR/docker.sock"
  if DOCKER_HOST="$sock" "$DOCKER" info >/dev/null 2>&1; then  # another session's private daemon: not ours to stop
    echo "DOCKER_HOST=$sock"
    echo "PID="
    return
  fi
  [ "$(id -u)" = 0 ] || die 3 "no Docker engine answers and a private one needs root"
  local dockerd
  dockerd="$(command -v dockerd || echo /usr/sbin/dockerd)"
  [ -x "$dockerd" ] || die 3 "no dockerd: install Debian's docker.io (make system-image)"
  mkdir -p "$ROOT" "$RUNDIR"
  local log="$ROOT/dockerd.log"
  # vfs works on any file system (no overlay mounts in a container); no bridge or iptables: containers and
  # builds use the host's network (--network host).
  setsid "$dockerd" --storage-driver=vfs --iptables=false --ip6tables=false --bridge=none \
    --data-root "$ROOT/data" --exec-root "$RUNDIR/exec" --pidfile "$RUNDIR/dockerd.pid" -H "$sock" \
    >"$log" 2>&1 </dev/null &
  local pid=$!
  for _ in $(seq 60); do
    if DOCKER_HOST="$sock" "$DOCKER" info >/dev/null 2>&1; then
      echo "DOCKER_HOST=$sock"
      echo "PID=$pid"
      return
    fi
    kill -0 "$pid" 2>/dev/null || die 1 "dockerd exited: $(tail -n 3 "$log")"
    sleep 1
  done
  kill "$pid" || true
  die 1 "dockerd did not answer on $sock within 60 s: $(tail -n 3 "$log")"
}

daemon_stop() {
  local pid=${1:?daemon-stop PID}
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
  kill -9 "$pid" 2>/dev/null || true
}

# The image the CPU flavour starts FROM: Docker Hub's debian:bookworm where it can be pulled, else the same
# Debian release made from Debian's archive (minbase: essential packages and apt, as the Docker Hub image).
base() {
  if "$DOCKER" image inspect "$CPU_BASE" >/dev/null 2>&1; then echo "$CPU_BASE"; return; fi
  if timeout 60 "$DOCKER" pull -q "$CPU_BASE" >/dev/null 2>&1; then echo "$CPU_BASE"; return; fi
  if "$DOCKER" image inspect "$LOCAL_BASE" >/dev/null 2>&1; then echo "$LOCAL_BASE"; return; fi
  command -v mmdebstrap >/dev/null || die 3 "$CPU_BASE cannot be pulled and there is no mmdebstrap to make it"
  local suite=${CPU_BASE##*:}
  echo "image.sh: $CPU_BASE cannot be pulled: making $LOCAL_BASE with mmdebstrap --variant=minbase $suite" >&2
  local tar
  tar="$(mktemp --suffix=.tar)"
  # shellcheck disable=SC2064
  trap "rm -f '$tar'" RETURN
  mmdebstrap --quiet --variant=minbase --format=tar "$suite" "$tar" >&2
  "$DOCKER" import --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' \
    --message "mmdebstrap --variant=minbase $suite" "$tar" "$LOCAL_BASE" >/dev/null
  echo "$LOCAL_BASE"
}

build() {
  local flavour=${1:?build cpu|gpu} start
  shift
  case "$flavour" in cpu | gpu) ;; *) die 2 "build cpu|gpu, not $flavour" ;; esac
  local cpu_base=$CPU_BASE
  if [ "$flavour" = cpu ]; then cpu_base="$(base)"; fi
  start=$(date +%s)
  local log status=0
  log="$(mktemp)"
  FLAVOUR=$flavour CPU_BASE=$cpu_base DOCKER="$DOCKER" scripts/container.sh docker "$@" 2>&1 | tee "$log" \
    || status=$?
  if [ "$status" != 0 ]; then
    failed_step "$log" >&2
    rm -f "$log"
    return 1
  fi
  local steps cached
  steps="$(grep -oE '^#[0-9]+ \[[a-z0-9-]+ [0-9]+/[0-9]+\]' "$log" | cut -d' ' -f1 | sort -u)"
  cached="$(grep -E '^#[0-9]+ CACHED$' "$log" | cut -d' ' -f1 | sort -u | grep -cxF -f <(echo "$steps") || true)"
  rm -f "$log"
  echo "build time: $(($(date +%s) - start)) s ($cached of $(echo "$steps" | grep -c .) steps from the layer cache)"
  echo "image size: $("$DOCKER" image inspect --format '{{.Size}}' "$(image_name "$flavour")") bytes"
  prune_earlier "$flavour"
}

# With the vfs storage driver every layer is a whole copy of the file system (about 30 GB for the CPU image and
# its build cache): the images of earlier builds of this flavour (their scalestudy:<commit>[-cpu] tags), dangling
# images and unreferenced build cache go once a build succeeds. The layer cache of this build stays.
prune_earlier() {
  local current suffix="" ref
  current="$("$DOCKER" image inspect --format '{{.Id}}' "$(image_name "$1")")"
  [ "$1" = cpu ] && suffix=-cpu
  while read -r ref id; do
    [[ "$ref" =~ ^scalestudy:[0-9a-f]{12}(-dirty)?$suffix$ ]] && [ "$id" != "$current" ] || continue
    "$DOCKER" rmi "$ref" >/dev/null || echo "image.sh: warning: could not remove $ref" >&2
  done < <("$DOCKER" images --no-trunc --format '{{.Repository}}:{{.Tag}} {{.ID}}' scalestudy)
  # Best effort: the build has succeeded (a cache record of an interrupted build can make BuildKit's prune fail).
  "$DOCKER" image prune -f >/dev/null || echo "image.sh: warning: docker image prune failed" >&2
  "$DOCKER" builder prune -f >/dev/null 2>&1 || echo "image.sh: warning: docker builder prune failed" >&2
}

image_name() {
  if [ -n "${IMAGE:-}" ]; then echo "$IMAGE"; elif [ "$1" = cpu ]; then echo scalestudy:cpu; else echo scalestudy:local; fi
}

# The step that failed, from BuildKit's plain log ("#N ERROR: ..." names the vertex N; "#N [stage i/n] ..." is
# its instruction, "#N <seconds> ..." its output), and the last lines it printed: what to read first, instead of
# a log of thousands of lines. The CA-bundle preamble of the RUN lines is left out of the step's name.
failed_step() {
  local vertex
  vertex="$(sed -n 's/^#\([0-9]*\) ERROR: .*/\1/p' "$1" | tail -n 1)"
  if [ -z "$vertex" ]; then
    echo "image.sh: the build failed before any step ran: $(grep -v '^#' "$1" | grep -v '^\s*$' | tail -n 1)"
    return
  fi
  local step
  step="$(grep -m1 "^#$vertex \[" "$1" | sed -e "s/^#$vertex //" -e 's/--mount=type=secret,id=ca-bundle *//' \
    -e 's/if \[ -s \/run\/secrets\/ca-bundle \]; then export [^;]*; fi *&& *//' -e 's/  */ /g')"
  [ "${#step}" -le 200 ] || step="${step:0:197}..."
  echo "image.sh: the build failed at step $step"
  grep "^#$vertex [0-9][0-9.]* " "$1" | sed "s/^#$vertex [0-9.]* */image.sh:   /" | tail -n 5
  grep "^#$vertex ERROR: " "$1" | sed 's/.*\(exit code: [0-9]*\).*/image.sh:   (\1)/' | tail -n 1
}

case "${1:-}" in
  daemon-start) daemon_start ;;
  daemon-stop) daemon_stop "${2:-}" ;;
  base) base ;;
  build) shift; build "$@" ;;
  *) die 2 "usage: scripts/image.sh daemon-start|daemon-stop PID|base|build cpu|gpu" ;;
esac
