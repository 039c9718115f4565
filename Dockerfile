# The images of the scaling study, two flavours of one recipe and one lock (requirements.lock):
#   FLAVOUR=gpu (default): TensorFlow and MXNet on NVIDIA GPUs, Horovod with NCCL, Gloo and MPI
#   FLAVOUR=cpu: TensorFlow (CPU) and MXNet on Debian bookworm's Python 3.11, Horovod with Gloo and MPI
# Build with `FLAVOUR=cpu|gpu scripts/container.sh docker` (make docker, make image-cpu); docs/containers.md says
# everything below at length. No `# syntax=` line: it would make BuildKit fetch a frontend image, and offline
# builds (scripts/image.sh makes the Debian base from Debian's archive) have no registry.
#
# WHAT RUNS WHERE (GPU flavour):
#   - TensorFlow on the GPU in /opt/venv: TF 2.15 is built for CUDA 12.2 and cuDNN 8.9, hence the base image
#     below. The lock pins tensorflow-cpu (CPU flavour, machines without a GPU) and `tensorflow` (the GPU
#     build) at the same version; both wheels declare identical dependencies.
#   - MXNet on the GPU in a second environment, /opt/venv-mxnet: MXNet 1.9.1's GPU wheel (mxnet-cu117, the
#     lock's pin) is a CUDA 11 build whose libmxnet.so needs CUDA 11's libcudart.so.11.0, libcublas.so.11, ...
#     and a CUDA 11 libcudnn.so.8, whose soname clashes with TF's CUDA 12 cuDNN. That environment holds the
#     CUDA 11 runtime libraries as NVIDIA's pip wheels (nvidia-*-cu11, pinned in the lock), and libmxnet.so and
#     Horovod's MXNet library find them by their RPATH (set with patchelf), never through the system's
#     library path: a process loads one CUDA or the other. Its Horovod (NCCL, Gloo, MPI) is built in a CUDA 11
#     stage (mxnet-cuda11 below). The MXNet runner takes it for device=gpu (SCALESTUDY_MXNET_GPU_PYTHON).
#   - /opt/venv keeps the lock's CPU `mxnet` too, for device=cpu jobs (mxnet-cu117 cannot even be imported
#     without the CUDA driver). Horovod's CMake refuses a GPU build against a CPU-only MXNet, so /opt/venv's
#     Horovod is built twice: (1) CPU, MXNet only, gives horovod/mxnet/mpi_lib; (2) the installed GPU build
#     (NCCL) with TensorFlow; (1)'s MXNet library goes into (2). Each framework's mpi_lib is self-contained.
#   - Python 3.11 from the deadsnakes PPA (Ubuntu 22.04's own python3.11 is an early 3.11.0 build).
#
# The GPU bases are pinned by tag and, once resolved on a machine that reaches the registry, by digest:
# `make refresh-digest` (scripts/container.sh refresh-digest) writes it into CUDA_BASE_DIGEST below.
ARG CUDA_BASE_TAG=12.2.2-cudnn8-devel-ubuntu22.04
# UNRESOLVED: empty until `make refresh-digest` is run where Docker Hub can be reached (sha256:...).
ARG CUDA_BASE_DIGEST=
# The CUDA 11 stage that builds MXNet's GPU environment (mxnet-cu117 is built for CUDA 11.7).
ARG CUDA11_BASE_TAG=11.7.1-cudnn8-devel-ubuntu22.04
ARG CUDA11_BASE_DIGEST=
# The CPU flavour's base: Docker Hub's debian:bookworm, or where no registry answers the same release made
# from Debian's archive (scripts/image.sh base: mmdebstrap --variant=minbase bookworm | docker import).
ARG CPU_BASE=debian:bookworm
ARG FLAVOUR=gpu

# ---------------------------------------------------------------------------------------------------------
# The GPU flavour's system: CUDA 12 base, Python 3.11, compilers and Open MPI for the Horovod build.
FROM nvidia/cuda:${CUDA_BASE_TAG}${CUDA_BASE_DIGEST:+@}${CUDA_BASE_DIGEST} AS system-gpu
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Distribution packages: no versions here (Ubuntu's archive keeps only the current ones; the base digest and
# the lock are the pins).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends software-properties-common gpg-agent \
 && add-apt-repository -y ppa:deadsnakes/ppa \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      python3.11 python3.11-dev python3.11-venv \
      build-essential cmake git unzip patchelf \
      openmpi-bin libopenmpi-dev \
      libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv

# ---------------------------------------------------------------------------------------------------------
# The CPU flavour's system: Debian bookworm and its own Python 3.11, compilers and Open MPI.
# hadolint ignore=DL3006
FROM ${CPU_BASE} AS system-cpu
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3.11 python3.11-dev python3.11-venv \
      g++ make cmake unzip \
      openmpi-bin libopenmpi-dev \
      libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv

# ---------------------------------------------------------------------------------------------------------
# MXNet on the GPU, built on CUDA 11 (GPU flavour only; BuildKit builds a stage only when the target needs it).
FROM nvidia/cuda:${CUDA11_BASE_TAG}${CUDA11_BASE_DIGEST:+@}${CUDA11_BASE_DIGEST} AS mxnet-cuda11
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends software-properties-common gpg-agent \
 && add-apt-repository -y ppa:deadsnakes/ppa \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-dev python3.11-venv \
      build-essential cmake patchelf openmpi-bin libopenmpi-dev \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv-mxnet
WORKDIR /opt/scalestudy
COPY pyproject.toml requirements.lock ./
ARG HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,90
ARG HOROVOD_MAKE_JOBS=8
# The extra `mxnet-gpu` (mxnet-cu117 and the CUDA 11 runtime wheels) with the light group and the harness's
# (not the CPU `mxnet`: both are the package `mxnet`), within the lock.
# libmxnet.so and Horovod's MXNet library get the wheels' lib/ folders added to their RPATH ($ORIGIN-relative,
# so the environment can be copied whole into the image; DT_RPATH, not RUNPATH: it also serves what those
# libraries load, libcublasLt.so.11 for libcublas.so.11, and comes before LD_LIBRARY_PATH). Horovod links NCCL statically (its default) from this CUDA 11
# base. A libcuda.so.1 stub lets MXNet import (and Horovod's CMake query it) without a driver, in the build only.
# hadolint ignore=DL3013,SC3001
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle SSL_CERT_FILE=/run/secrets/ca-bundle; fi \
 && export PATH=/opt/venv-mxnet/bin:$PATH VIRTUAL_ENV=/opt/venv-mxnet \
 && python -m pip install --no-cache-dir "$(grep -E '^uv==' requirements.lock)" \
 && uv pip install --python /opt/venv-mxnet/bin/python --no-cache --compile-bytecode -r pyproject.toml \
      --extra build --extra train --extra mxnet-gpu -c requirements.lock --excludes <(printf 'horovod\nmxnet\n') \
 && SITE="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && NVLIBS="$(find "${SITE}/nvidia" -maxdepth 2 -name lib -type d | sort | tr '\n' ':')" \
 && mkdir -p /tmp/stubs && ln -s /usr/local/cuda/lib64/stubs/libcuda.so /tmp/stubs/libcuda.so.1 \
 && export LD_LIBRARY_PATH="/tmp/stubs:${NVLIBS}${LD_LIBRARY_PATH:-}" MAKEFLAGS="-j${HOROVOD_MAKE_JOBS}" \
 && RPATH_MXNET="$(echo "${NVLIBS%:}" | sed "s|${SITE}|\$ORIGIN/..|g")" \
 && OLD_RPATH="$(patchelf --print-rpath "${SITE}/mxnet/libmxnet.so")" \
 && patchelf --force-rpath --set-rpath "${OLD_RPATH:+${OLD_RPATH}:}${RPATH_MXNET}" "${SITE}/mxnet/libmxnet.so" \
 && python -c 'import mxnet; assert mxnet.__version__' \
 && HOROVOD_VERSION="$(sed -n 's/^horovod==//p' requirements.lock)" \
 && HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_WITH_MXNET=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
    HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_CUDA_HOME=/usr/local/cuda \
    pip install --no-deps --no-build-isolation --no-binary=horovod "horovod==${HOROVOD_VERSION}" \
 && for so in "${SITE}"/horovod/mxnet/mpi_lib*.so; do \
      OLD_RPATH="$(patchelf --print-rpath "$so")" \
   && patchelf --force-rpath --set-rpath "${OLD_RPATH:+${OLD_RPATH}:}\$ORIGIN/../../mxnet:$(echo "${NVLIBS%:}" | sed "s|${SITE}|\$ORIGIN/../..|g")" "$so"; \
    done \
 && python -c 'import horovod.mxnet as m; assert m.nccl_built() and m.gloo_built() and m.mpi_built(), "NCCL/Gloo/MPI"' \
 && pip check \
 && rm -r /tmp/stubs
# Every library resolves through the RPATHs alone (no LD_LIBRARY_PATH; the driver's libcuda.so.1 comes from
# the container runtime on a GPU node).
COPY scripts/ldd-check.sh ./
RUN SITE="$(/opt/venv-mxnet/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && env -u LD_LIBRARY_PATH LDD_ALLOW=libcuda.so.1 ./ldd-check.sh "${SITE}/mxnet/libmxnet.so" "${SITE}"/horovod/mxnet/mpi_lib*.so

# ---------------------------------------------------------------------------------------------------------
# Both flavours from here: the lock's packages, Horovod, the project.
# hadolint ignore=DL3006
FROM system-${FLAVOUR} AS deps
ARG FLAVOUR
ARG HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,90
ARG HOROVOD_MAKE_JOBS=8
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH}
WORKDIR /opt/scalestudy

# Third-party packages: the pyproject extras (build, train, and `cpu` or `gpu`: TensorFlow's CPU or GPU build)
# resolved within the lock's pins by uv, the same installer and command as the Makefile's, without Horovod
# (built below). The host's CA bundle, where a TLS-intercepting proxy needs it, is a build secret (id
# ca-bundle), never a layer. Only pyproject.toml and the lock are copied first: a change under src/ or conf/
# leaves this layer and Horovod's cached.
COPY pyproject.toml requirements.lock ./
# hadolint ignore=DL3013,SC3001
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle SSL_CERT_FILE=/run/secrets/ca-bundle; fi \
 && python -m pip install --no-cache-dir "$(grep -E '^uv==' requirements.lock)" \
 && uv pip install --python /opt/venv/bin/python --no-cache --compile-bytecode -r pyproject.toml \
      --extra build --extra train --extra "${FLAVOUR}" -c requirements.lock --excludes <(echo horovod) \
 && pip check

# Horovod from source, its version from the lock. CPU: one build with TensorFlow and MXNet. GPU: twice (see
# the top of this file); the CUDA driver stubs let the build link without a GPU.
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && HOROVOD_VERSION="$(sed -n 's/^horovod==//p' requirements.lock)" \
 && test -n "${HOROVOD_VERSION}" \
 && export MAKEFLAGS="-j${HOROVOD_MAKE_JOBS}" HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
 && if [ "${FLAVOUR}" = cpu ]; then \
      HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MXNET=1 \
      pip install --no-deps --no-build-isolation --no-binary=horovod "horovod==${HOROVOD_VERSION}"; \
    else \
      export LD_LIBRARY_PATH="/usr/local/cuda/lib64/stubs:${LD_LIBRARY_PATH:-}" \
   && HOROVOD_WITH_MXNET=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
      pip wheel --no-deps --no-build-isolation --no-binary=horovod -w /tmp/horovod-cpu "horovod==${HOROVOD_VERSION}" \
   && HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
      pip install --no-deps --no-build-isolation --no-binary=horovod "horovod==${HOROVOD_VERSION}" \
   && HOROVOD_DIR="$(python -c 'import horovod, os; print(os.path.dirname(horovod.__file__))')" \
   && unzip -o -j /tmp/horovod-cpu/horovod-*.whl 'horovod/mxnet/mpi_lib*.so' -d "${HOROVOD_DIR}/mxnet" \
   && rm -rf /tmp/horovod-cpu \
   && python -c 'import horovod.tensorflow as t; assert t.nccl_built(), "TF: NCCL"'; \
    fi \
 && pip check \
 && python -c 'import horovod.tensorflow as t; assert t.gloo_built() and t.mpi_built(), "TF: Gloo/MPI"' \
 && python -c 'import horovod.mxnet as m; assert m.gloo_built() and m.mpi_built(), "MXNet: Gloo/MPI"' \
 && horovodrun --check-build

# Every library each framework's extension needs resolves (its own step: a change of the check rebuilds no
# Horovod). TensorFlow's own folder stands for `import tensorflow`, which loads libtensorflow_framework.so.2
# before Horovod's library; in the GPU flavour the driver's libcuda.so.1 comes from the container runtime.
COPY scripts/ldd-check.sh ./
RUN SITE="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && LDD_ALLOW="$([ "${FLAVOUR}" = gpu ] && echo libcuda.so.1)" LDD_LIBRARY_PATH="${SITE}/tensorflow" ./ldd-check.sh \
      "${SITE}"/horovod/tensorflow/mpi_lib*.so "${SITE}"/horovod/mxnet/mpi_lib*.so "${SITE}/mxnet/libmxnet.so"

FROM deps AS extras-cpu

# MXNet's CUDA 11 environment beside TensorFlow's (see the top of this file).
FROM deps AS extras-gpu
COPY --from=mxnet-cuda11 /opt/venv-mxnet /opt/venv-mxnet
ENV SCALESTUDY_MXNET_GPU_PYTHON=/opt/venv-mxnet/bin/python

# ---------------------------------------------------------------------------------------------------------
# hadolint ignore=DL3006
FROM extras-${FLAVOUR} AS image

# The project itself (editable, so conf/ beside src/ is the configuration it reads), in each environment.
# The user comes before the COPY so that a change of src/ or conf/ rebuilds only these two layers.
RUN useradd --create-home --uid 1000 --user-group --shell /bin/bash scalestudy \
 && mkdir -p /work && chown scalestudy:scalestudy /work
COPY . /opt/scalestudy
RUN pip install --no-cache-dir --no-deps --no-build-isolation -e /opt/scalestudy \
 && python -c 'import scalestudy.train, scalestudy.harness.slurm' \
 && if [ -x /opt/venv-mxnet/bin/python ]; then \
      /opt/venv-mxnet/bin/python -m pip install --no-cache-dir --no-deps --no-build-isolation -e /opt/scalestudy; fi

# Labels last: the build date and commit change on every build, and BuildKit reruns every RUN after an ARG
# whose value changed.
ARG FLAVOUR
ARG VERSION=unknown
ARG GIT_COMMIT=unknown
ARG LOCK_SHA256=unknown
ARG BUILD_DATE=unknown
# The base as scripts/container.sh names it (the CUDA image's tag and digest, or the Debian image).
ARG BASE_NAME=unknown
LABEL org.opencontainers.image.title="scalestudy" \
      org.opencontainers.image.description="Horovod throughput scaling study (${FLAVOUR}): TensorFlow and MXNet with Horovod" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.created="${BUILD_DATE}" \
      org.opencontainers.image.base.name="${BASE_NAME}" \
      org.scalestudy.flavour="${FLAVOUR}" \
      org.scalestudy.lock.sha256="${LOCK_SHA256}"
# Figures and runs made in the image name the commit it was built from (it holds no .git).
ENV SCALESTUDY_GIT_COMMIT="${GIT_COMMIT}"

# The image's own configs; results go to the working directory's .mlflow/ (mount one at /work).
# PYTHONNOUSERSITE: under Apptainer the home folder is bound in, and its ~/.local must not shadow the image's
# packages (kept by every route to a SIF, `apptainer build x.sif docker://...` too).
ENV SCALESTUDY_CONF=/opt/scalestudy/conf \
    TF_CPP_MIN_LOG_LEVEL=1 \
    PYTHONNOUSERSITE=1

USER 1000:1000
WORKDIR /work
ENTRYPOINT ["python", "-m", "scalestudy.train"]
CMD ["--help"]
