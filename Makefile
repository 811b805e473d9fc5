# Two entry points: `make demo` and `make test`. Both create the virtualenv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SAMPLE := data/sample_corpus
INDEX := data/sample_index

.PHONY: demo test lint format venv clean bench

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c requirements.lock -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m jobs.make_sample_corpus --out $(SAMPLE)
	$(BIN)/python -m jobs.index_corpus $(SAMPLE) --out $(INDEX)
	$(BIN)/python -m jobs.show_index $(INDEX)
	$(BIN)/python -m jobs.query "How many tables are in Chapter 2?" --index $(INDEX)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(SAMPLE) $(INDEX)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.tree_accuracy --corpus hips
	$(BIN)/python -m benchmarks.index_throughput
