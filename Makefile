# Every target creates .venv on first use; nothing is installed outside it.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
FLASK  := $(VENV)/bin/flask --app app
HOST   ?= 127.0.0.1
PORT   ?= 5000

.PHONY: run test lint format clean bench bench-smoke

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

run: $(VENV)/.installed-run
	$(FLASK) db upgrade
	$(FLASK) demo seed
	$(FLASK) run --host $(HOST) --port $(PORT)

# The whole suite on SQLite, then again on PostgreSQL when TEST_DATABASE_URL is set.
test: $(VENV)/.installed-dev
	TEST_DATABASE_URL= $(PY) -m pytest $(PYTEST_ARGS)
	@if [ -n "$$TEST_DATABASE_URL" ]; then \
		$(PY) -m pytest $(PYTEST_ARGS); \
	else \
		echo "TEST_DATABASE_URL is not set: the PostgreSQL run was skipped."; \
	fi

# The report against a hand-written reference SQL on DATABASE_URL (default: bench.db, made on
# first use: 600,000 DDIs in 10,000 companies, about 2 minutes).
bench: $(VENV)/.installed-dev
	@if [ -z "$$DATABASE_URL" ] && [ ! -f bench.db ]; then \
		$(PY) -m bench.generate --ddis 600000 --companies 10000; \
	fi
	$(PY) -m bench.report_plan

# Seconds: a small data set, both queries, same numbers (also part of `make test`).
bench-smoke: $(VENV)/.installed-dev
	$(PY) -m pytest -q tests/test_bench_smoke.py

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache bench.db
