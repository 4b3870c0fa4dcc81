# Two commands do all set-up: `make run` (the main job) and `make test` (the whole suite).
# Both bootstrap uv into .tools/ with pip and build .venv/ from uv.lock.

PYTHON ?= python3
UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
SYNCED := $(VENV)/.synced-from-lock

export UV_PYTHON_DOWNLOADS := never
# Byte-compile the environment once at set-up, not in the first commands and tests that import each package.
export UV_COMPILE_BYTECODE := 1
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: setup run ui test lint validate clean prometheus chromium postgresql

$(UV):
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --target $(TOOLS) uv==$(UV_VERSION)

$(SYNCED): uv.lock pyproject.toml | $(UV)
	$(UV) sync --frozen --python $(PYTHON)
	touch $@

# Machines of this kind set PYTHONDONTWRITEBYTECODE: no process keeps the bytecode of the project's own modules, and
# each command, trial child and test process compiled them again (~0.4 s for the main job's imports). Compiled here,
# where anything changed since (compileall skips what is up to date: ~0.1 s).
setup: $(SYNCED)
	$(VENV)/bin/python -m compileall -q substrate_assets tests bench

run: setup
	$(VENV)/bin/substrate-bench validate
	$(VENV)/bin/substrate-bench run quick-smoke

ui: setup
	$(VENV)/bin/substrate-bench ui

validate: setup
	$(VENV)/bin/substrate-bench validate --steps

# ruff, the layering of docs/architecture.md (import-linter's contracts in pyproject.toml), and the types (mypy,
# strict; pyproject.toml's [tool.mypy] lists the modules not yet strict-clean).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# The harvest tests run against a real Prometheus (Debian's package). As root, install it; otherwise
# those tests skip and say so (CI sets SUBSTRATE_BENCH_REQUIRE_PROMETHEUS=1, which fails them instead).
prometheus:
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null \
	      || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	          prometheus >/dev/null)) && echo "installed Debian's prometheus"; \
	  else echo "note: prometheus/promtool not found and not root: the Prometheus harvest tests will skip"; fi; \
	fi

# The report tests open each report in a real headless Chromium (Debian's package). As root, install it; otherwise
# those tests skip and say so (CI sets SUBSTRATE_BENCH_REQUIRE_CHROMIUM=1, which fails them instead).
postgresql:
	@if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >/dev/null \
	      || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	          postgresql >/dev/null)) && echo "installed Debian's postgresql"; \
	  else echo "note: PostgreSQL not found and not root: the shared-warehouse tests will skip"; fi; \
	fi

chromium:
	@if ! [ -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null \
	      || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	          chromium >/dev/null)) && echo "installed Debian's chromium"; \
	  else echo "note: /usr/bin/chromium not found and not root: the report browser tests will skip"; fi; \
	fi

# Two workers (pytest-xdist), each test file whole on one: most of the suite waits on trials, Dagster and browsers,
# so two files at a time fit two cores.
test: setup prometheus chromium postgresql lint
	$(VENV)/bin/pytest -n 2 --dist loadfile

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .ruff_cache .import_linter_cache .mypy_cache
