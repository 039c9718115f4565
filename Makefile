# The user's verbs. `make figure-3` and `make test` work on a fresh clone: the Makefile creates the
# Python environment from the lock file, installs Debian packages where a target needs them (as root),
# and imports the published measurements into the MLflow store before the first build.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
UV_VERSION := 0.13.8
# Compile every installed module once: without .pyc files (uv writes none by default, and
# PYTHONDONTWRITEBYTECODE is set on some machines) each run recompiles pandas, matplotlib, TensorFlow...
# from source: `make figure-3` took 7.0 s instead of 2.3 s here, and `import tensorflow` 14.8 s.
UV_INSTALL = $(UV) pip install -q --compile-bytecode
# The training environment: the light group + TensorFlow, MXNet and Horovod (built here with Gloo, CPU).
TRAIN_VENV := .venv-train
TRAIN_PY := $(TRAIN_VENV)/bin/python
HOROVOD_PIN = $(shell grep -E '^horovod==' requirements.lock)
# Horovod compiles against the installed frameworks: rebuilt when one of these pins changes.
HOROVOD_ABI = $(shell grep -E '^(horovod|tensorflow-cpu|mxnet|numpy)==' requirements.lock | tr '\n' ' ')
HOROVOD_BUILD_ENV := HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
	HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_CPU_OPERATIONS=gloo MAKEFLAGS=-j$(shell nproc)
export MLFLOW_TRACKING_URI ?= sqlite:///$(CURDIR)/.mlflow/store.db

# The published runs are imported once per store and again when a reference file or importer changes.
STORE_KEY := $(shell printf '%s' "$(MLFLOW_TRACKING_URI)" | cksum | cut -d' ' -f1)
IMPORTED := .mlflow/imported-$(STORE_KEY).stamp
REFERENCE_FILES := $(shell find experiments/reference -type f | sort)
INGEST_CODE := $(wildcard src/scalestudy/ingest/*.py) src/scalestudy/schema.py src/scalestudy/tracking.py

FIGURES := $(sort $(patsubst conf/figure/%.yaml,%,$(wildcard conf/figure/figure-*.yaml)))
TABLES := $(sort $(patsubst conf/table/%.yaml,%,$(wildcard conf/table/table-*.yaml)))
# `make figure-1 source=measured` or `make figures ARGS='figure.plot.median=false'`
BUILD_ARGS := $(if $(source),source=$(source)) $(ARGS)

APT_PAPER := latexmk texlive-latex-recommended texlive-fonts-recommended lmodern poppler-utils
APT_UI := chromium chromium-driver
APT_SLURM := munge slurmctld slurmd slurm-client
APT_BUILD := g++ cmake
apt_install = if [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian packages: $(1)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(1) >/dev/null; \
	else echo "missing Debian packages: $(1) (run 'sudo apt-get install $(1)' or make as root)" >&2; exit 1; fi

.PHONY: help env train-env import figures tables all paper ui test test-fast test-train clean distclean lock \
	bench-build bench-harness system-paper system-ui system-slurm system-build docker sif refresh-digest \
	container-check $(FIGURES) $(TABLES)

help:
	@echo "make figure-N     build paper/figures/figure-N.{pdf,png,json} (N = 1..7; source=measured|all)"
	@echo "make figures      all figures;  make tables: paper/tables/table-N.tex;  make paper: paper/main.pdf"
	@echo "make ui           browse every run in the MLflow UI on http://127.0.0.1:5000"
	@echo "make import       (re)import the published measurements of experiments/reference into MLflow"
	@echo "make run-figure-N run figure N's sweep here (1 and 2 CPU ranks), then: make figure-N source=measured"
	@echo "make train-env    the training environment .venv-train (TensorFlow, MXNet, Horovod built with Gloo)"
	@echo "make test         the test suite (installs what it needs)"
	@echo "make docker / sif the GPU image / the Apptainer image (where the engine exists); container-check: lint"
	@echo "make bench-build  time all figures and tables on a store of 10,000 runs"
	@echo "make bench-harness  our harness against a bare Horovod loop, same model, batch and ranks"

# ---------------------------------------------------------------------------------------------
# Environment: one lock file (requirements.lock) constrains every install.
$(VENV)/.build.stamp: pyproject.toml requirements.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "need Python 3.11, got " + sys.version)'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(UV_INSTALL) -p $(PY) -c requirements.lock -e '.[build]'
	@touch $@

$(VENV)/.test.stamp: $(VENV)/.build.stamp
	$(UV_INSTALL) -p $(PY) -c requirements.lock -e '.[build,test]'
	@touch $@

env: $(VENV)/.build.stamp

# Horovod last, from source, against the frameworks just installed (--no-build-isolation); ~5 min on 2 cores.
$(TRAIN_VENV)/.train.stamp: $(VENV)/.build.stamp pyproject.toml requirements.lock | system-build
	@test -x $(TRAIN_PY) || $(PYTHON) -m venv $(TRAIN_VENV)
	$(UV_INSTALL) -p $(TRAIN_PY) -c requirements.lock --excludes <(echo horovod) -e '.[build,train,test]'
	@if [ "$$(cat $(TRAIN_VENV)/.horovod-abi 2>/dev/null)" != "$(HOROVOD_ABI)" ]; then \
	  echo "building $(HOROVOD_PIN) with TensorFlow, MXNet and Gloo (a few minutes)"; \
	  $(HOROVOD_BUILD_ENV) $(TRAIN_PY) -m pip install -q --disable-pip-version-check --no-build-isolation \
	    --no-cache-dir --no-deps --force-reinstall "$(HOROVOD_PIN)" \
	  && printf '%s' "$(HOROVOD_ABI)" > $(TRAIN_VENV)/.horovod-abi; fi
	@for fw in tensorflow mxnet; do $(TRAIN_PY) -c "import horovod.$$fw as hvd; assert hvd.gloo_built()" 2>/dev/null \
	  || { echo "Horovod in $(TRAIN_VENV) lacks $$fw or Gloo: rm $(TRAIN_VENV)/.horovod-abi and make train-env" >&2; exit 1; }; done
	@touch $@

train-env: $(TRAIN_VENV)/.train.stamp

# Regenerate the lock from pyproject.toml (needs the network to PyPI); commit the result.
lock: $(VENV)/.build.stamp
	$(UV) pip compile pyproject.toml --extra build --extra train --extra test --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_28 --quiet -o requirements.lock

system-paper:
	@command -v latexmk >/dev/null && command -v pdftotext >/dev/null && kpsewhich booktabs.sty lmodern.sty >/dev/null \
	  || { $(call apt_install,$(APT_PAPER)); }

system-ui:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { $(call apt_install,$(APT_UI)); }

system-slurm:
	@PATH=$$PATH:/usr/sbin; command -v munged >/dev/null && command -v slurmctld >/dev/null && command -v slurmd \
	  >/dev/null && command -v srun >/dev/null || { $(call apt_install,$(APT_SLURM)); }

system-build:
	@command -v g++ >/dev/null && command -v cmake >/dev/null || { $(call apt_install,$(APT_BUILD)); }

# ---------------------------------------------------------------------------------------------
# MLflow store
$(IMPORTED): $(VENV)/.build.stamp $(REFERENCE_FILES) $(INGEST_CODE)
	@mkdir -p $(@D)
	$(PY) -m scalestudy.ingest
	@touch $@

import: $(VENV)/.build.stamp
	$(PY) -m scalestudy.ingest
	@mkdir -p $(dir $(IMPORTED)) && touch $(IMPORTED)

# ---------------------------------------------------------------------------------------------
# Figures, tables, paper
$(FIGURES) $(TABLES): $(IMPORTED)
	$(PY) -m scalestudy.build $@ $(BUILD_ARGS)

figures: $(IMPORTED)
	$(PY) -m scalestudy.build figures $(BUILD_ARGS)

tables: $(IMPORTED)
	$(PY) -m scalestudy.build tables $(BUILD_ARGS)

all: $(IMPORTED)
	$(PY) -m scalestudy.build all $(BUILD_ARGS)

paper: all system-paper
	latexmk -pdf -interaction=nonstopmode -halt-on-error -cd -quiet paper/main.tex
	@echo "paper/main.pdf"

ui: $(IMPORTED)
	$(PY) -m scalestudy.ui

# A figure's sweep (conf/experiment/figure-N.yaml) here, through horovodrun, 1 and 2 ranks. By default sized for
# a 2-core machine with no GPU and no CIFAR-10 (synthetic 75 px images, a few minutes); SIZE=full runs the sweep
# as configured, e.g. on a GPU node:
#   make run-figure-1 SIZE=full ARGS='device=gpu data.path=/data/cifar-10-python.tar.gz hydra.sweeper.params.workers=1,2,4'
CPU_RUN := data=synthetic data.image_size=75 data.num_images=256 batch_per_worker=8 steps=30 warmup_steps=5
RUN_ARGS_1 := $(CPU_RUN)
RUN_ARGS_2 := $(CPU_RUN)
RUN_ARGS_5 := $(CPU_RUN) hydra.sweeper.params.model=resnet50
RUN_ARGS_6 := $(CPU_RUN) hydra.sweeper.params.model=resnet50 epochs=1
run-figure-%: $(TRAIN_VENV)/.train.stamp
	$(TRAIN_PY) -m scalestudy.train -m +experiment=figure-$* $(if $(filter full,$(SIZE)),,$(RUN_ARGS_$*)) $(ARGS)

# ---------------------------------------------------------------------------------------------
# Containers (docs/containers.md): build where the engine exists; say so, exit 3, where it does not.
docker:
	scripts/container.sh docker

sif:
	scripts/container.sh sif

refresh-digest:
	scripts/container.sh refresh-digest

container-check: $(VENV)/.test.stamp
	scripts/container.sh check

# ---------------------------------------------------------------------------------------------
# The whole suite runs in the training environment (it holds the light group too), so nothing is skipped.
test: $(TRAIN_VENV)/.train.stamp system-paper system-ui system-slurm
	$(TRAIN_PY) -m pytest -q

test-fast: $(VENV)/.test.stamp
	$(PY) -m pytest -q -m "not integration"

test-train: $(TRAIN_VENV)/.train.stamp
	$(TRAIN_PY) -m pytest -q tests/test_train_integration.py tests/test_launch.py tests/test_timing.py

bench-harness: $(TRAIN_VENV)/.train.stamp
	$(TRAIN_PY) benchmarks/bench_harness.py $(ARGS)

bench-build: $(VENV)/.build.stamp
	$(PY) benchmarks/bench_build.py

clean:
	-latexmk -C -cd paper/main.tex >/dev/null 2>&1
	rm -rf paper/figures paper/tables paper/main.pdf benchmarks/out

distclean: clean
	rm -rf $(VENV) $(TRAIN_VENV) .mlflow outputs multirun
