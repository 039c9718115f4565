# syntax=docker/dockerfile:1
# The GPU image of the scaling study: TensorFlow and MXNet with Horovod (NCCL, Gloo, MPI), the project, its lock.
# Build with `scripts/container.sh docker` (make docker); docs/containers.md says everything below at length.
#
# WHAT RUNS WHERE (the one choice this image makes):
#   - TensorFlow runs on the GPU: TF 2.15 is built for CUDA 12.2 and cuDNN 8.9, hence the base image below.
#     The lock pins tensorflow-cpu (for machines without a GPU); the image installs `tensorflow` (the GPU
#     build) at the SAME version, read from the lock. Both wheels declare identical dependencies, so the
#     rest of the lock stays exact.
#   - MXNet runs on the CPU: the image installs the lock's `mxnet` (CPU) wheel. MXNet 1.9.1's GPU wheels
#     (mxnet-cu112 ... cu117) are built for CUDA 11: their libmxnet.so needs libcudart.so.11.0, libcublas.so.11
#     and a CUDA-11 libcudnn.so.8, whose soname clashes with the CUDA-12 cuDNN that TF needs in this image.
#     MXNet on the GPU needs a second, CUDA 11 image (docs/containers.md, open problems).
#   - Horovod (version from the lock) is built from source twice: Horovod's CMake refuses a GPU build against
#     a CPU-only MXNet ("Horovod build with GPU support was requested but this MXNet installation does not
#     support CUDA"), so (1) a CPU build with MXNet only gives horovod/mxnet/mpi_lib, and (2) the installed
#     GPU build (NCCL) with TensorFlow; the MXNet library of (1) goes into (2). Each framework's mpi_lib is
#     self-contained; the runners import one framework per rank. Both builds: Gloo and MPI controllers.
#   - Python 3.11 from the deadsnakes PPA (Ubuntu 22.04's own python3.11 is an early 3.11.0 build), in a venv
#     at /opt/venv. Open MPI from Ubuntu (for HOROVOD_WITH_MPI and `rendezvous=mpi` on clusters).
#
# The base is pinned by tag and, once resolved on a machine that reaches the registry, by digest:
# `make refresh-digest` (scripts/container.sh refresh-digest) writes it into CUDA_BASE_DIGEST below.
ARG CUDA_BASE_TAG=12.2.2-cudnn8-devel-ubuntu22.04
# UNRESOLVED: empty until `make refresh-digest` is run where Docker Hub can be reached (sha256:...).
ARG CUDA_BASE_DIGEST=
FROM nvidia/cuda:${CUDA_BASE_TAG}${CUDA_BASE_DIGEST:+@}${CUDA_BASE_DIGEST}

ARG CUDA_BASE_TAG
ARG CUDA_BASE_DIGEST
ARG VERSION=unknown
ARG GIT_COMMIT=unknown
ARG LOCK_SHA256=unknown
ARG BUILD_DATE=unknown
# GPU generations the Horovod CUDA kernels are compiled for (V100, T4, A100, A10/A40, H100)
ARG HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,90
ARG HOROVOD_MAKE_JOBS=8

LABEL org.opencontainers.image.title="scalestudy" \
      org.opencontainers.image.description="Horovod throughput scaling study: TensorFlow (GPU) and MXNet (CPU) with Horovod (NCCL, Gloo, MPI)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.created="${BUILD_DATE}" \
      org.opencontainers.image.base.name="docker.io/nvidia/cuda:${CUDA_BASE_TAG}" \
      org.opencontainers.image.base.digest="${CUDA_BASE_DIGEST}" \
      org.scalestudy.lock.sha256="${LOCK_SHA256}"

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH}

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
      build-essential cmake git unzip \
      openmpi-bin libopenmpi-dev \
      libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv

WORKDIR /opt/scalestudy

# Third-party packages: the pyproject extras (build, train, gpu: TensorFlow's GPU build) resolved within the
# lock's pins by uv, the same installer and command as the Makefile's, without Horovod (built below).
COPY pyproject.toml requirements.lock ./
# hadolint ignore=DL3013
RUN python -m pip install --no-cache-dir "$(grep -E '^uv==' requirements.lock)" \
 && uv pip install --python /opt/venv/bin/python --no-cache -r pyproject.toml --extra build --extra train \
      --extra gpu -c requirements.lock --excludes <(echo horovod) \
 && pip check

# Horovod from source, its version from the lock (see the top of this file for why twice).
# The CUDA driver stubs let the build link without a GPU.
RUN HOROVOD_VERSION="$(sed -n 's/^horovod==//p' requirements.lock)" \
 && test -n "${HOROVOD_VERSION}" \
 && export MAKEFLAGS="-j${HOROVOD_MAKE_JOBS}" LD_LIBRARY_PATH="/usr/local/cuda/lib64/stubs:${LD_LIBRARY_PATH}" \
 && HOROVOD_WITH_MXNET=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 \
    HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
    pip wheel --no-deps --no-build-isolation --no-binary=horovod -w /tmp/horovod-cpu "horovod==${HOROVOD_VERSION}" \
 && HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_PYTORCH=1 \
    HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
    pip install --no-deps --no-build-isolation --no-binary=horovod "horovod==${HOROVOD_VERSION}" \
 && HOROVOD_DIR="$(python -c 'import horovod, os; print(os.path.dirname(horovod.__file__))')" \
 && unzip -o -j /tmp/horovod-cpu/horovod-*.whl 'horovod/mxnet/mpi_lib*.so' -d "${HOROVOD_DIR}/mxnet" \
 && rm -rf /tmp/horovod-cpu \
 && pip check \
 && python -c 'import horovod.tensorflow as t; assert t.nccl_built() and t.gloo_built() and t.mpi_built(), "TF: NCCL/Gloo/MPI"' \
 && python -c 'import horovod.mxnet as m; assert m.gloo_built() and m.mpi_built(), "MXNet: Gloo/MPI"' \
 && horovodrun --check-build

# The project itself (editable, so conf/ beside src/ is the configuration it reads).
COPY . /opt/scalestudy
RUN pip install --no-deps --no-build-isolation -e /opt/scalestudy \
 && python -c 'import scalestudy.train, scalestudy.slurm' \
 && useradd --create-home --uid 1000 --user-group --shell /bin/bash scalestudy \
 && mkdir -p /work && chown scalestudy:scalestudy /work

# The image's own configs; results go to the working directory's .mlflow/ (mount one at /work).
ENV SCALESTUDY_CONF=/opt/scalestudy/conf \
    TF_CPP_MIN_LOG_LEVEL=1

USER 1000:1000
WORKDIR /work
ENTRYPOINT ["python", "-m", "scalestudy.train"]
CMD ["--help"]
