# Every target creates .venv on first use; nothing is installed outside it.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
FLASK  := $(VENV)/bin/flask --app app
HOST   ?= 127.0.0.1
PORT   ?= 5000

.PHONY: run test test-fast lint format clean bench bench-smoke lock

# Every dependency is installed from a lock pinning it with its hashes (requirements/*.txt,
# made by `make lock` from pyproject.toml), then the project itself without dependencies.
# --no-build-isolation: the build backend comes from the lock too (requirements/build.in).
define install_locked
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements/$(1).txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@$(PY) -m pip check >/dev/null || { $(PY) -m pip check; \
		echo "requirements/$(1).txt does not match pyproject.toml: run make lock"; exit 1; }
endef

$(VENV)/.installed-run: pyproject.toml requirements/run.txt
	$(call install_locked,run)
	touch $@

$(VENV)/.installed-dev: pyproject.toml requirements/dev.txt
	$(call install_locked,dev)
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
# A worker left idle takes tests queued for another (worksteal): the suite has single tests of
# a minute and more (the bench smoke run, the pages' axe checks), which would otherwise end
# the run on one worker while the other waits.
# Each pass ends with its 15 slowest tests: where the CI budget goes is in every CI log.
WORKERS ?= auto
PYTEST  := $(PY) -m pytest -n $(WORKERS) --dist worksteal --durations=15

# Bytecode for the app's modules, written once before a run: every CLI test and test server
# is a new process importing them, and where PYTHONDONTWRITEBYTECODE is set (as on the CI
# machines) none would be cached, each process compiling all of them again (0.3 s a start).
COMPILE := $(PY) -m compileall -q -j 0 webapp bench app.py >/dev/null

# The whole suite on SQLite, then again on PostgreSQL when TEST_DATABASE_URL is set.
test: $(VENV)/.installed-dev
	$(COMPILE)
	TEST_DATABASE_URL= $(PYTEST) $(PYTEST_ARGS)
	@if [ -n "$$TEST_DATABASE_URL" ]; then \
		$(PYTEST) $(PYTEST_ARGS); \
	else \
		echo "TEST_DATABASE_URL is not set: the PostgreSQL run was skipped."; \
	fi

# The quick subset: every test not marked slow, on SQLite only (78 s on a 2-core machine, 2026-11-27).
test-fast: $(VENV)/.installed-dev
	$(COMPILE)
	TEST_DATABASE_URL= $(PYTEST) -m "not slow" $(PYTEST_ARGS)

# The development lock holds the bench extra too: one lock for development and CI.
$(VENV)/.installed-bench: pyproject.toml requirements/dev.txt
	$(call install_locked,dev)
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

# The locks, from pyproject.toml, by a pinned uv in a venv of its own, from PyPI alone: no pip
# or uv configuration of this machine (local wheel folders, other indexes) takes part. Pins
# already in a lock are kept unless pyproject.toml's ranges exclude them; to move every pin to
# the newest release allowed, `make lock LOCK_ARGS=--upgrade`. Resolved for CPython 3.11 on
# x86_64 Linux (glibc): another platform or Python needs its own lock.
UV_VERSION := 0.13.8
LOCK_VENV  := .venv-lock
LOCK_INDEX := https://pypi.org/simple
UV_COMPILE  = env -u UV_INDEX -u UV_INDEX_URL -u UV_EXTRA_INDEX_URL -u UV_FIND_LINKS \
	-u UV_CONSTRAINT -u UV_OVERRIDE $(LOCK_VENV)/bin/uv pip compile --no-config --system-certs --quiet \
	--index-url $(LOCK_INDEX) --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	--generate-hashes --custom-compile-command 'make lock' $(LOCK_ARGS) \
	pyproject.toml requirements/build.in

$(LOCK_VENV)/.uv-$(UV_VERSION):
	test -x $(LOCK_VENV)/bin/python || $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip --isolated --disable-pip-version-check install --quiet \
		--index-url $(LOCK_INDEX) uv==$(UV_VERSION)
	touch $@

lock: $(LOCK_VENV)/.uv-$(UV_VERSION)
	$(UV_COMPILE) --extra postgres -o requirements/run.txt
	$(UV_COMPILE) --extra prod -o requirements/prod.txt
	$(UV_COMPILE) --extra dev --extra postgres --extra bench -o requirements/dev.txt

clean:
	rm -rf $(VENV) $(LOCK_VENV) .pytest_cache .ruff_cache bench.db bench-1x.db bench-2x.db instance-bench
