# Two entry points: `make demo` and `make test`. Both create the virtualenv when missing.
# The virtualenv holds the dependencies only: the code runs from this directory (pyproject.toml).
# It is installed from requirements.lock with --require-hashes: every file of the tree is checked
# against the sha256 pinned there (pip refuses anything unpinned or with another hash).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SAMPLE := data/sample_corpus
INDEX := data/sample_index

.PHONY: demo test unit lint format venv clean bench

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip uninstall -q -y bookindex 2>/dev/null || true
	$(BIN)/python -m pip install -q --require-hashes -r requirements.lock
	$(BIN)/python -m pip check
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m jobs.make_sample_corpus --out $(SAMPLE)
	$(BIN)/python -m jobs.index_corpus $(SAMPLE) --out $(INDEX)
	$(BIN)/python -m jobs.show_index $(INDEX)
	$(BIN)/python -m jobs.query "How many tables are in Chapter 2?" --index $(INDEX)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint
	$(BIN)/python -m pytest -q tests/unit
	$(BIN)/python -m pytest -q --durations=30 tests/integration

unit: lint  # the fast tier alone: no Ray, no Serve
	$(BIN)/python -m pytest -q tests/unit

clean:
	rm -rf $(SAMPLE) $(INDEX)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.tree_accuracy --corpus hips
	$(BIN)/python -m benchmarks.index_throughput
