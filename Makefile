# Two entry points: `make demo` and `make test`. Both create the virtualenv when missing.
# The virtualenv gets uv from requirements-uv.lock (pip --require-hashes), then the dependencies
# from requirements.lock with uv and --require-hashes (every file checked against the sha256
# pinned there; uv refuses anything unpinned or with another hash; uv instead of pip: 95 s → under
# 10 s with a warm cache), then bookindex itself as an editable install (no dependency
# resolution: --no-deps), which gives the `bookindex` command and `import bookindex` from this
# checkout. Bytecode: uv does not compile what it installs, and compiling the whole venv
# (--compile-bytecode) took 65 s of `make venv`; instead every recipe here runs with
# PYTHONDONTWRITEBYTECODE unset (`unexport`, below), so the first process that imports a module
# writes its bytecode and the next ones read it (torch, transformers, spaCy, Ray and the rest
# the tests import: 28 s once, then 9.5 s an import chain, the same as a compiled venv). Where
# PYTHONDONTWRITEBYTECODE stayed set, as this machine's shell sets it, a venv without bytecode
# compiled them from source again in every process that imports them (every Ray worker, model
# host and command the tests start: 17-18 s against 7-8 s). uv reads no pip
# configuration: a local wheel directory in PIP_FIND_LINKS (where the CPU torch wheel lies on
# this machine) is passed on as --find-links.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV_INSTALL := $(BIN)/uv pip install --python $(BIN)/python
FIND_LINKS := $(if $(PIP_FIND_LINKS),--find-links $(PIP_FIND_LINKS))
SAMPLE := data/sample_corpus
INDEX := data/sample_index
# the first import of a module writes its bytecode into the venv (see above)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-slow unit lint format venv clean bench wheel docs

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock requirements-uv.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --no-compile --require-hashes -r requirements-uv.lock
	$(UV_INSTALL) -q --require-hashes -r requirements.lock $(FIND_LINKS)
	$(UV_INSTALL) -q --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/bookindex sample $(SAMPLE)
	$(BIN)/bookindex index $(SAMPLE) --out $(INDEX)
	$(BIN)/bookindex show $(INDEX)
	$(BIN)/bookindex ask "How many tables are in Chapter 2?" --index $(INDEX)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The two tiers run one after the other: the unit tier first (no Ray), then the integration
# tier (Ray, Serve, subprocess jobs), which runs even when the unit tier fails; either failing
# fails the target. The unit tier is CPU-bound and runs as two pytest processes, one per core:
# UNIT_HALF and the rest of tests/unit (a new folder lands in the rest: nothing is left out),
# each with one thread for torch, ONNX Runtime and BLAS (OMP_NUM_THREADS=1): two processes of
# two threads each on 2 cores spun and waited on each other (the tier 150-155 s against 176 s,
# the two settings in turn on this machine).
# (The two tiers side by side took longer than in turn on 2 cores: 1,547 s for the integration
# tier beside the unit tier, against 967 s + 250 s alone; the integration tier waits on Ray and
# its jobs' start-ups, which a busy CPU slows.) Tests marked slow (kill and resume, concurrent
# jobs, the cluster Job API: each starts Ray clusters of its own) are left to `make test-slow`,
# so that CI stays under 20 minutes.
# The halves by measured time (`pytest --durations=0` on each half, one process a core): models,
# pipelines, walks, eval and parsing; structure, query, graph and the rest (in one CI run with
# graph in the first half: 271 s against 227 s; graph's tests take about 24 s).
UNIT_HALF := tests/unit/models tests/unit/pipelines tests/unit/walks tests/unit/eval \
	tests/unit/parsing
test: lint
	@half_log=$$(mktemp); \
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m "not slow" -p no:cacheprovider --durations=5 \
		$(UNIT_HALF) \
		> $$half_log 2>&1 & half_pid=$$!; \
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m "not slow" --durations=5 tests/unit \
		$(foreach d,$(UNIT_HALF),--ignore=$(d)); rest=$$?; \
	wait $$half_pid; half=$$?; \
	echo "---- the other half of the unit tier ($(UNIT_HALF)) ----"; cat $$half_log; rm -f $$half_log; \
	$(BIN)/python -m pytest -q -m "not slow" --durations=30 tests/integration; integration=$$?; \
	echo "unit tier exit $$half and $$rest, integration tier exit $$integration"; \
	[ $$half -eq 0 ] && [ $$rest -eq 0 ] && [ $$integration -eq 0 ]

unit: lint  # the fast tier alone: no Ray, no Serve
	$(BIN)/python -m pytest -q tests/unit

test-slow: $(STAMP)  # the tests marked slow (about 10 minutes on 2 cores), which make test leaves out
	$(BIN)/python -m pytest -q -m slow --durations=10 tests

clean:
	rm -rf $(SAMPLE) $(INDEX)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.tree_accuracy --corpus hips
	$(BIN)/python -m benchmarks.index_throughput

wheel: $(STAMP)  # dist/bookindex-*.whl (real files under bookindex/ only)
	rm -rf build dist
	$(BIN)/python -m pip wheel -q --no-deps --no-build-isolation -w dist .

docs: $(STAMP)  # the generated reference pages (tests/unit/test_docs.py checks they are current)
	$(BIN)/bookindex config --markdown > docs/configuration.md
	$(BIN)/bookindex schema --markdown > docs/tables.md
