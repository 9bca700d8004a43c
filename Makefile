# Every target creates .venv on first use; nothing is installed outside it.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
FLASK  := $(VENV)/bin/flask --app app
HOST   ?= 127.0.0.1
PORT   ?= 5000

.PHONY: run test test-fast lint format clean bench bench-smoke

$(VENV)/.installed-run: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[postgres]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,postgres]'
	touch $@ $(VENV)/.installed-run

# The development server, and beside it one webhook delivery worker (docs/events.md), which
# stops with it (Ctrl-C reaches both; the trap covers any other exit).
run: $(VENV)/.installed-run
	$(FLASK) db upgrade
	$(FLASK) demo seed
	$(FLASK) events deliver & worker=$$!; \
	trap 'kill $$worker 2>/dev/null' EXIT INT TERM; \
	$(FLASK) run --host $(HOST) --port $(PORT)

# Tests run in parallel, one process per core (pytest-xdist), each with a database of its own.
WORKERS ?= auto
PYTEST  := $(PY) -m pytest -n $(WORKERS)

# The whole suite on SQLite, then again on PostgreSQL when TEST_DATABASE_URL is set.
test: $(VENV)/.installed-dev
	TEST_DATABASE_URL= $(PYTEST) $(PYTEST_ARGS)
	@if [ -n "$$TEST_DATABASE_URL" ]; then \
		$(PYTEST) $(PYTEST_ARGS); \
	else \
		echo "TEST_DATABASE_URL is not set: the PostgreSQL run was skipped."; \
	fi

# The quick subset: every test not marked slow, on SQLite only (under two minutes).
test-fast: $(VENV)/.installed-dev
	TEST_DATABASE_URL= $(PYTEST) -m "not slow" $(PYTEST_ARGS)

$(VENV)/.installed-bench: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,postgres,bench]'
	touch $@ $(VENV)/.installed-dev $(VENV)/.installed-run

# Every scenario on SQLite (and on PostgreSQL when BENCH_DATABASE_URL is set) as one table of
# app figure, reference figure and ratio. Needs wrk (apt-get install wrk). The data sets are
# generated on first use (bench.db, bench-1x.db, bench-2x.db) and kept; see bench/README.md.
bench: $(VENV)/.installed-bench
	$(PY) -m bench.run $(BENCH_ARGS)

# Seconds: small data sets, every scenario once, same numbers (also part of `make test`).
bench-smoke: $(VENV)/.installed-bench
	$(PY) -m pytest -q tests/test_bench_smoke.py tests/test_bench_http.py

# Style, types (mypy, configured in pyproject.toml), the layers (import-linter's contracts in
# pyproject.toml: no import upwards, no circle) and complexity: no function in webapp/
# may rank worse than C in radon's cyclomatic complexity (radon itself always exits 0).
lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	PYTHONPATH=. $(VENV)/bin/lint-imports --no-cache
	@worse=$$($(VENV)/bin/radon cc --min D --show-complexity webapp); \
	if [ -n "$$worse" ]; then echo "radon: functions ranked D or worse:"; echo "$$worse"; exit 1; fi

format: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache bench.db bench-1x.db bench-2x.db instance-bench
