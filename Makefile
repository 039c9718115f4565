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
# The training environment: the light group + TensorFlow, MXNet and Horovod (built here with Gloo, CPU).
TRAIN_VENV := .venv-train
TRAIN_PY := $(TRAIN_VENV)/bin/python
export PYTHON
# Python may write bytecode here even where the machine sets PYTHONDONTWRITEBYTECODE: without it every process
# recompiles the project's modules, and pytest rewrites the asserts of every test file, on each run (collecting the
# fast tests took 8.7 s instead of 4.4 s, in each xdist worker). The .pyc files go to __pycache__/, which git and
# the image's build context ignore.
export PYTHONDONTWRITEBYTECODE :=
export MLFLOW_TRACKING_URI ?= sqlite:///$(CURDIR)/.mlflow/store.db

# The published runs are imported once per store and again when a reference file or importer changes: all of
# them for `make import`, `make figures|tables|all|paper|ui`; for `make figure-N` and `make table-N` only the
# datasets that figure or table draws (python -m scalestudy.ingest --list --for figure-N), one stamp per dataset.
STORE_KEY := $(shell printf '%s' "$(MLFLOW_TRACKING_URI)" | cksum | cut -d' ' -f1)
IMPORTED := .mlflow/imported-$(STORE_KEY).stamp
DATASET_STAMPS := .mlflow/imported-$(STORE_KEY)
REFERENCE_FILES := $(shell find experiments/reference -type f | sort)
INGEST_CODE := $(wildcard src/scalestudy/ingest/*.py) src/scalestudy/schema.py $(wildcard src/scalestudy/store/*.py)
# Third-party raw files (listed by URL and SHA-256 in each source.yaml) are fetched into a cache
# (SCALESTUDY_DATA_CACHE, default ~/.cache/scalestudy), from SCALESTUDY_DATA_MIRROR where set: by default the
# mirror beside the checkout, ../shared/reference, where it exists (CI, machines without internet).
export SCALESTUDY_DATA_MIRROR ?= $(if $(wildcard ../shared/reference),$(abspath ../shared/reference))

# `make figure-1 source=measured` or `make figures ARGS='figure.plot.median=false'`
BUILD_ARGS := $(if $(source),source=$(source)) $(ARGS)

APT_PAPER := latexmk texlive-latex-recommended texlive-fonts-recommended lmodern poppler-utils
APT_UI := chromium chromium-driver
APT_SLURM := munge slurmctld slurmd slurm-client
APT_BUILD := g++ cmake
# The CPU image's test: Debian's Docker 20.10 (its CLI does BuildKit without buildx) and mmdebstrap (the base
# where no registry answers); its SIF without Apptainer: squashfs-tools and siftool write it (scripts/sif.py),
# squashfuse, fuse3 and bubblewrap run it (scripts/sif-exec).
APT_IMAGE := docker.io mmdebstrap squashfs-tools siftool squashfuse fuse3 bubblewrap
apt_install = if [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian packages: $(1)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(1) >/dev/null; \
	else echo "missing Debian packages: $(1) (run 'sudo apt-get install $(1)' or make as root)" >&2; exit 1; fi

.PHONY: help env train-env import import-for import-datasets figures tables all paper ui compare test test-fast test-train clean distclean lock \
	accept-runs bench-build bench-harness data-cifar10 system-paper system-ui system-slurm system-build docker sif refresh-digest \
	container-check lint model-sizes mutation-check mutation-lists system-image image-cpu image-test \
	cluster-up cluster-status cluster-down

# The figures and tables that exist (conf/figure/*.yaml, conf/table/*.yaml), in order: `make help` lists them, and
# `make figure-99` stops here with one error naming them, before any environment or store is touched.
FIGURE_TARGETS := $(shell ls conf/figure | sed -n 's/\.yaml$$//p' | sort -V)
TABLE_TARGETS := $(shell ls conf/table | sed -n 's/\.yaml$$//p' | sort -V)
UNKNOWN_TARGETS := $(filter-out $(FIGURE_TARGETS) $(TABLE_TARGETS),$(filter figure-% table-%,$(MAKECMDGOALS)))
ifneq ($(UNKNOWN_TARGETS),)
$(error unknown target $(firstword $(UNKNOWN_TARGETS)): the figures are $(FIGURE_TARGETS), the tables $(TABLE_TARGETS))
endif

help: ## this list (from the `##` comments of the Makefile) and the figures and tables that exist
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z%][a-zA-Z0-9_%-]*:[^#]*## / \
	  {printf "  make %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@printf '\n  figure-N: N = %s\n  table-N:  N = %s\n' "$(FIGURE_TARGETS:figure-%=%)" "$(TABLE_TARGETS:table-%=%)"

# ---------------------------------------------------------------------------------------------
# Environment: one lock file (requirements.lock) constrains every install (scripts/make-env.sh, which holds a
# lock per environment: two make commands at once build it once).
$(VENV)/.build.stamp: pyproject.toml requirements.lock scripts/make-env.sh
	scripts/make-env.sh $(VENV) build
	@touch $@

$(VENV)/.test.stamp: $(VENV)/.build.stamp
	scripts/make-env.sh $(VENV) build,test
	@touch $@

env: $(VENV)/.build.stamp ## the light environment .venv (figures, tables, paper, UI)

# Horovod last, from source, against the frameworks just installed (--no-build-isolation); ~5 min on 2 cores.
$(TRAIN_VENV)/.train.stamp: $(VENV)/.build.stamp pyproject.toml requirements.lock scripts/make-env.sh | system-build
	scripts/make-env.sh $(TRAIN_VENV) build,train,cpu,test horovod
	@touch $@

train-env: $(TRAIN_VENV)/.train.stamp ## the training environment .venv-train (TensorFlow, MXNet, Horovod built with Gloo)

# Regenerate the lock from pyproject.toml (needs the network to PyPI); commit the result.
lock: $(VENV)/.build.stamp ## regenerate requirements.lock from pyproject.toml (needs PyPI)
	$(UV) pip compile pyproject.toml --all-extras --python-version 3.11 \
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

# Only as root: elsewhere tests/integration/test_image_integration.py runs with the Docker engine it finds, or says why it skips.
system-image:
	@PATH=$$PATH:/usr/sbin; [ -x /usr/bin/docker ] && command -v dockerd >/dev/null && command -v mmdebstrap >/dev/null \
	  && command -v mksquashfs >/dev/null && command -v siftool >/dev/null && command -v squashfuse >/dev/null \
	  && command -v fusermount3 >/dev/null && command -v bwrap >/dev/null \
	  || { if [ "$$(id -u)" = 0 ]; then $(call apt_install,$(APT_IMAGE)); \
	       else echo "missing some of $(APT_IMAGE) here and not root: the image tests will skip" >&2; fi; }

# ---------------------------------------------------------------------------------------------
# MLflow store
# Every dataset; each dataset's own stamp is touched too, so a later `make figure-N` imports nothing again.
touch_imported = mkdir -p $(DATASET_STAMPS) && touch $(IMPORTED) \
	$$($(PY) -m scalestudy.ingest --list | sed 's|.*|$(DATASET_STAMPS)/&.stamp|')

$(IMPORTED): $(VENV)/.build.stamp $(REFERENCE_FILES) $(INGEST_CODE)
	$(PY) -m scalestudy.ingest
	@$(touch_imported)

import: $(VENV)/.build.stamp ## (re)import the published measurements of experiments/reference into MLflow
	$(PY) -m scalestudy.ingest
	@$(touch_imported)

# Measured runs changed after they were written are refused by the builder until measured again or accepted here.
accept-runs: $(VENV)/.build.stamp ## accept measured runs as the store holds them now (RUNS='id ...'; logged in .mlflow/store-ledger.log)
	$(PY) -m scalestudy.store accept $(RUNS)

# One dataset, again when its files or the importers change.
.SECONDEXPANSION:
$(DATASET_STAMPS)/%.stamp: $(VENV)/.build.stamp $$(shell find experiments/reference/$$* -type f) $(INGEST_CODE)
	$(PY) -m scalestudy.ingest $*
	@mkdir -p $(@D) && touch $@

# The datasets a figure or table draws (make import-for TARGET=figure-3), each imported where its stamp is stale.
import-for: $(VENV)/.build.stamp
	@$(MAKE) --no-print-directory import-datasets \
	  DATASETS="$$($(PY) -m scalestudy.ingest --list --for $(TARGET))"

import-datasets: $(foreach dataset,$(DATASETS),$(DATASET_STAMPS)/$(dataset).stamp)

# ---------------------------------------------------------------------------------------------
# Figures, tables, paper
figure-%: $(VENV)/.build.stamp ## one figure: paper/figures/figure-N.{pdf,png,json} (source=measured|all, ARGS=overrides)
	@$(MAKE) --no-print-directory import-for TARGET=$@
	$(PY) -m scalestudy.paper $@ $(BUILD_ARGS)

table-%: $(VENV)/.build.stamp ## one table: paper/tables/table-N.{tex,json}
	@$(MAKE) --no-print-directory import-for TARGET=$@
	$(PY) -m scalestudy.paper $@ $(BUILD_ARGS)

figures: $(IMPORTED) ## every figure (one store query)
	$(PY) -m scalestudy.paper figures $(BUILD_ARGS)

tables: $(IMPORTED) ## every table
	$(PY) -m scalestudy.paper tables $(BUILD_ARGS)

all: $(IMPORTED) ## every figure and table
	$(PY) -m scalestudy.paper all $(BUILD_ARGS)

# Your runs beside the study's (docs/compare.md): the experiment EXPERIMENT (imported logs or measured runs) drawn
# as its own series in the figures FIGURES, written to compare/EXPERIMENT/ (never paper/).
COMPARE_FIGURES ?= figure-1 figure-2 figure-9 figure-10
compare: $(VENV)/.build.stamp ## your experiment beside the study: make compare EXPERIMENT=NAME [FIGURES='figure-2 figure-10']
	@test -n "$(EXPERIMENT)" || { echo "error: name your experiment: make compare EXPERIMENT=NAME (docs/compare.md)" >&2; exit 2; }
	@for target in $(or $(FIGURES),$(COMPARE_FIGURES)); do $(MAKE) --no-print-directory import-for TARGET=$$target; done
	$(PY) -m scalestudy.paper $(or $(FIGURES),$(COMPARE_FIGURES)) compare=$(EXPERIMENT) $(ARGS)

paper: all system-paper ## figures, tables and paper/main.pdf (latexmk)
	latexmk -pdf -interaction=nonstopmode -halt-on-error -cd -quiet paper/main.tex
	@echo "paper/main.pdf"

# The UI links each figure and table to its runs through its sidecar (paper/figures|tables/NAME.json). Each sidecar is
# a file of make's own, built from its config, the shared configs, the builder's code and the store's import: `make ui`
# serves at once when all are up to date (after `make figures tables` or `make all`), and otherwise rebuilds only
# those out of date, in one builder process (each stale sidecar's rule names it in UI_STALE, the ui rule builds the
# list). A target that does not build is reported and left out; the UI starts all the same. (Runs measured here by
# `make run-figure-N` change the store without an import: `make figure-N` redraws that figure.)
UI_FIGURES := $(basename $(notdir $(wildcard conf/figure/figure-*.yaml)))
UI_TABLES := $(basename $(notdir $(wildcard conf/table/table-*.yaml)))
UI_SIDECARS := $(UI_FIGURES:%=paper/figures/%.json) $(UI_TABLES:%=paper/tables/%.json)
BUILD_CODE := $(filter-out src/scalestudy/ui/% src/scalestudy/harness/% src/scalestudy/train.py,\
	$(shell find src/scalestudy -name '*.py'))
SHARED_CONF := $(filter-out conf/figure/% conf/table/% conf/experiment/% conf/cluster/%,$(shell find conf -name '*.yaml')) \
	$(wildcard paper/templates/*.j2)
UI_STALE := .mlflow/ui-stale-$(STORE_KEY).list

# Sources, made by no rule (else `figure-%` and `table-%` would match conf/figure/figure-3.yaml as a target).
$(wildcard conf/figure/*.yaml conf/table/*.yaml) $(SHARED_CONF): ;

paper/figures/%.json: conf/figure/%.yaml $(IMPORTED) $(BUILD_CODE) $(SHARED_CONF)
	@mkdir -p $(dir $(UI_STALE)) && echo $* >> $(UI_STALE)

paper/tables/%.json: conf/table/%.yaml $(IMPORTED) $(BUILD_CODE) $(SHARED_CONF)
	@mkdir -p $(dir $(UI_STALE)) && echo $* >> $(UI_STALE)

ui: $(UI_SIDECARS) ## the study's home page on http://127.0.0.1:5000 (each figure and table linking to its runs), MLflow's UI under /mlflow/ (ARGS=--auth)
	@if [ -s $(UI_STALE) ]; then \
	  echo "building what changed: $$(sort -u $(UI_STALE) | tr '\n' ' ')"; \
	  $(PY) -m scalestudy.paper $$(sort -u $(UI_STALE)) \
	    || echo "some figures or tables did not build: the UI links those that did" >&2; \
	  rm -f $(UI_STALE); fi
	$(PY) -m scalestudy.ui $(ARGS)

# A figure's sweep (conf/experiment/figure-N.yaml) here, through horovodrun, 1 and 2 ranks. By default sized for
# a 2-core machine with no GPU and no CIFAR-10 (synthetic 75 px images, a few minutes); SIZE=full runs the sweep
# as configured, e.g. on a GPU node:
#   make run-figure-1 SIZE=full ARGS='device=gpu data.path=/data/cifar-10-python.tar.gz workers=1,2,4'
# (a sweep on the command line, `workers=1,2,4`, replaces the same key of the experiment's hydra.sweeper.params).
CPU_RUN := data=synthetic data.image_size=75 data.num_images=256 batch_per_worker=8 steps=30 warmup_steps=5
RUN_ARGS_1 := $(CPU_RUN)
RUN_ARGS_2 := $(CPU_RUN)
RUN_ARGS_5 := $(CPU_RUN) model=resnet50
RUN_ARGS_6 := $(CPU_RUN) model=resnet50 epochs=1
RUN_ARGS_9 := $(CPU_RUN) steps=15 warmup_steps=3
run-figure-%: $(TRAIN_VENV)/.train.stamp ## figure N's sweep measured here (N = 1, 2, 5, 6, 9; 1 and 2 CPU ranks; SIZE=full as configured)
	$(TRAIN_PY) -m scalestudy.train -m experiment=figure-$* $(if $(filter full,$(SIZE)),,$(RUN_ARGS_$*)) $(ARGS)

# CIFAR-10 for the figure sweeps on GPUs (data=cifar10): into the data cache, as the published raw files are.
data-cifar10: $(VENV)/.build.stamp ## fetch CIFAR-10 (170 MB) into the data cache by URL and SHA-256; prints its path for data.path=
	@$(PY) -m scalestudy.ingest data cifar10

# The models' gradient sizes, counted in Keras and Gluon (the scaling model reads the committed table).
model-sizes: $(TRAIN_VENV)/.train.stamp ## recount the models' trainable parameters and FLOPs (src/scalestudy/scaling/gradient_sizes.csv)
	$(TRAIN_PY) -m scalestudy.scaling sizes

# ---------------------------------------------------------------------------------------------
# The rehearsal cluster (scripts/cluster.py), as root: a login host (this machine) and two Slurm nodes, node1 and node2,
# each in its own network, UTS and mount namespaces; every file in .cluster/. A sweep across both nodes:
#   export SLURM_CONF=$PWD/.cluster/slurm.conf   (what cluster-up prints)
#   .venv-train/bin/python -m scalestudy.train -m cluster=rehearsal experiment=figure-1 model=resnet50 \
#     data=synthetic data.num_images=128 data.image_size=32 batch_per_worker=4 warmup_steps=2 workers=1,2,4
cluster-up: system-slurm ## start the rehearsal Slurm cluster: login + node1, node2 in namespaces (root; prints SLURM_CONF)
	@$(PYTHON) scripts/cluster.py up

cluster-status: ## the rehearsal cluster's nodes (sinfo), or that it is down
	@$(PYTHON) scripts/cluster.py status

cluster-down: ## stop the rehearsal cluster: its jobs, daemons, namespaces and links
	@$(PYTHON) scripts/cluster.py down

# ---------------------------------------------------------------------------------------------
# Containers (docs/containers.md): build where the engine exists; say so, exit 3, where it does not.
docker: ## the GPU image from the Dockerfile (where a Docker engine runs)
	scripts/container.sh docker

image-cpu: system-image ## the CPU image scalestudy:cpu (a private Docker engine started as root where none runs; the Debian base made here if it cannot be pulled)
	@out="$$(scripts/image.sh daemon-start)"; pid="$$(echo "$$out" | sed -n 's/^PID=//p')"; \
	  [ -z "$$pid" ] || echo "started a private Docker engine (pid $$pid; scripts/image.sh daemon-stop $$pid stops it)"; \
	  host="$$(echo "$$out" | sed -n 's/^DOCKER_HOST=//p')"; DOCKER_HOST="$${host:-$${DOCKER_HOST:-}}" scripts/image.sh build cpu

# Builds the CPU image (a private dockerd when none answers, stopped afterwards) and runs it: --help, figure-3,
# 2-rank TensorFlow and MXNet jobs into a store on the host, Singularity.def's %test, ldd, a broken lock.
image-test: $(VENV)/.test.stamp system-image ## build the CPU image here and test it (root, or a running Docker)
	$(PY) -m pytest -v tests/integration/test_image_integration.py

# Without apptainer: scripts/sif.py writes the SIF from the local Docker image (make sif IMAGE=scalestudy:cpu).
# IMAGE: the Docker image it starts from (scalestudy:cpu for the CPU one; default scalestudy:local), SIF: the file,
# SIF_NOTEST=1: without running its %test at the end.
sif: ## scalestudy.sif from Singularity.def and the Docker image IMAGE (apptainer where it runs; else scripts/sif.py)
	$(if $(IMAGE),IMAGE=$(IMAGE)) $(if $(SIF),SIF=$(SIF)) $(if $(SIF_NOTEST),SIF_NOTEST=1) scripts/container.sh sif

refresh-digest: ## pin the Dockerfile's base image by digest (needs the registry)
	scripts/container.sh refresh-digest

container-check: $(VENV)/.test.stamp ## the recipe checks that need no engine (hadolint, Singularity.def)
	scripts/container.sh check

# ---------------------------------------------------------------------------------------------
# The whole suite runs in the training environment (it holds the light group too), so nothing is skipped.
# $(IMPORTED): the import fetches every listed third-party raw file into the cache, where the tests find them.
test: $(TRAIN_VENV)/.train.stamp $(IMPORTED) system-paper system-ui system-slurm system-image ## lint, then every test (installs what it needs; the image test as root or with Docker)
	$(TRAIN_VENV)/bin/ruff check src tests benchmarks scripts
	$(TRAIN_VENV)/bin/ruff format --check src tests benchmarks scripts
	SCALESTUDY_REQUIRE_ALL=1 $(TRAIN_PY) -m pytest -q  # a skip here is a failure (tests/require_all.py)

# Two pytest-xdist workers; the controller imports the published runs and builds their figures beside them
# (tests/published.py): on 2 cores that overlaps the ~27 s of MLflow writes and drawing with the other tests. The
# build is kept in .pytest_cache for the next session with the same inputs (any change to src/, conf/, experiments/).
test-fast: $(VENV)/.test.stamp ## lint and the fast tests (no browser, LaTeX, Slurm or Horovod)
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/ruff format --check src tests benchmarks scripts
	$(PY) -m pytest -q -m "not integration" -n 2

# mutmut mutates the modules of [tool.mutmut] (pyproject.toml) in mutants/ and runs the fast tests that call each
# mutated function; the report (per module, each survivor's diff and triage) goes to benchmarks/out/mutation/report.md.
# Hours on 2 cores; stopped, it resumes where it was. One module: make mutation-check ARGS='scalestudy.derive*'
mutation-check: $(VENV)/.test.stamp ## mutation testing with mutmut over the modules that compute, parse, fetch and store
	$(PY) scripts/mutation_report.py --run $(ARGS)

mutation-lists: $(VENV)/.test.stamp ## plant scripts/mutations.yaml's hand-written bugs one at a time in a scratch copy
	$(PY) scripts/mutation_check.py $(ARGS)

lint: $(VENV)/.test.stamp ## ruff: fix what it can, format, and list the rest
	$(VENV)/bin/ruff check --fix src tests benchmarks scripts
	$(VENV)/bin/ruff format src tests benchmarks scripts

test-train: $(TRAIN_VENV)/.train.stamp ## the harness tests only
	$(TRAIN_PY) -m pytest -q tests/integration/test_train_integration.py tests/test_launch.py tests/test_timing.py

bench-harness: $(TRAIN_VENV)/.train.stamp ## the harness against a bare Horovod loop, same model, batch and ranks
	$(TRAIN_PY) benchmarks/bench_harness.py $(ARGS)

bench-build: $(VENV)/.build.stamp ## the builder's speed benchmarks (figure-3; a 10,000-run store)
	$(PY) benchmarks/bench_build.py

clean: ## remove built figures, tables and the PDF
	-latexmk -C -cd paper/main.tex >/dev/null 2>&1
	rm -rf paper/figures paper/tables paper/main.pdf benchmarks/out

distclean: clean ## also the rehearsal cluster (stopped first), the environments, the store, the job folders and the tests' kept build (.pytest_cache)
	@if [ -f .cluster/cluster.json ]; then $(PYTHON) scripts/cluster.py down; fi
	rm -rf $(VENV) $(TRAIN_VENV) .mlflow outputs multirun mutants .pytest_cache .cluster
