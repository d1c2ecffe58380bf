# delta_connect_py developer commands. Prerequisites: Python 3.11, Java 17, make, pip reaching PyPI,
# mvn reaching Maven Central (make test only).
#
#   make demo    describe a conformance table on the embedded local Spark Connect server
#   make test    unit, thin-client integration/conformance, embedded, and delta-spark tests
#   make lint    ruff check, ruff format --check, mypy
#   make test-spark40  conformance + a subset against a pip Spark 4.0 server, 4.1 and 4.0 clients
#
# Environments (created on first use, reinstalled when pyproject.toml changes):
#   .venv         pip install -e '.[local,test,dev]'  full pyspark + Java: runs the server
#   .venv-worker  pyarrow + pandas only              the server's Python workers
#   .venv-thin    pip install -e '.[client,test]'    thin pyspark-client only, no jars
#   .delta-jars   server/fetch-delta-jars.sh (mvn)   delta-spark jars for the oracle server

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
WORKER := .venv-worker
THIN := .venv-thin
CONFORMANCE ?= $(or $(DELTA_CONFORMANCE_DIR),../shared/conformance)
DEMO_TABLE ?= $(CONFORMANCE)/delta-rs/table_with_deletion_logs/delta
PYTEST_ARGS ?=
PIP := pip install --quiet --disable-pip-version-check

# pyspark-client (the [client] extra, or an earlier install) and full pyspark (the [local]
# extra) install into the same pyspark/ folder; whichever pip installs last wins. Reinstall full
# pyspark over it so the Python files match the jars.
define fix_pyspark_overlay
$(1)/bin/python -c 'import importlib.metadata as m, pyspark, sys; sys.exit(pyspark.__version__ != m.version("pyspark"))' \
	|| $(1)/bin/$(PIP) --no-deps --force-reinstall \
	"pyspark==$$($(1)/bin/python -c 'import importlib.metadata as m; print(m.version("pyspark"))')"
endef

.PHONY: help demo venvs test test-unit test-integration test-embedded test-delta-spark \
	test-spark40 delta-jars lint server \
	compose-config compose-up compose-down clean-venvs

help:
	@sed -n '3,14p' Makefile | sed 's/^# \{0,1\}//'

# --- environments -----------------------------------------------------------------------------

$(VENV)/.installed-local: pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/$(PIP) -e '.[local]'
	$(call fix_pyspark_overlay,$(VENV))
	touch $@

$(VENV)/.installed-dev: pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/$(PIP) -e '.[local,test,dev]'
	$(call fix_pyspark_overlay,$(VENV))
	touch $@ $(VENV)/.installed-local

$(WORKER)/.installed: server/worker-requirements.txt
	test -x $(WORKER)/bin/python || $(PYTHON) -m venv $(WORKER)
	$(WORKER)/bin/$(PIP) -r server/worker-requirements.txt
	! $(WORKER)/bin/python -c 'import delta_connect_py' 2>/dev/null
	touch $@

$(THIN)/.installed: pyproject.toml
	test -x $(THIN)/bin/python || $(PYTHON) -m venv $(THIN)
	$(THIN)/bin/$(PIP) -e '.[client,test]'
	$(THIN)/bin/python -c "import pyspark, pathlib; \
		assert not (pathlib.Path(pyspark.__file__).parent / 'jars').exists(), 'full pyspark in $(THIN)'"
	touch $@

venvs: $(VENV)/.installed-dev $(WORKER)/.installed $(THIN)/.installed

# --- demo ---------------------------------------------------------------------------------------

demo: $(VENV)/.installed-local
	$(VENV)/bin/delta-connect describe $(DEMO_TABLE)

# --- tests --------------------------------------------------------------------------------------

# Runs every test phase even when one fails, then fails if any did.
test:
	@start=$$SECONDS; \
	$(MAKE) --no-print-directory venvs; \
	echo "== venvs: $$((SECONDS - start)) s"; \
	status=0; \
	for phase in test-unit test-integration test-embedded test-delta-spark; do \
		start=$$SECONDS; \
		$(MAKE) --no-print-directory $$phase || status=1; \
		echo "== $$phase: $$((SECONDS - start)) s"; \
	done; \
	exit $$status

# (a) no Spark at all, from the thin client.
test-unit: $(THIN)/.installed
	$(THIN)/bin/pytest tests/unit $(PYTEST_ARGS)

# (b) a standalone server (from .venv, workers .venv-worker) on a free port; the tests run from
# the thin client through SPARK_REMOTE.
test-integration: $(VENV)/.installed-dev $(WORKER)/.installed $(THIN)/.installed
	DELTA_CONNECT_WORKER_PYTHON=$(CURDIR)/$(WORKER)/bin/python \
		server/with-local-server.sh \
		$(THIN)/bin/pytest -m "integration and not embedded and not delta_spark" tests $(PYTEST_ARGS)

# (c) tests that start the embedded server themselves (full pyspark); none collected is fine.
test-embedded: $(VENV)/.installed-dev $(WORKER)/.installed
	env -u SPARK_REMOTE DELTA_CONNECT_WORKER_PYTHON=$(CURDIR)/$(WORKER)/bin/python \
		$(VENV)/bin/pytest -m embedded tests $(PYTEST_ARGS) || test $$? -eq 5

# (d) delta-spark itself as the oracle: fetch its jars (cached in .delta-jars/; Maven Central on
# a fresh machine), then compare with a delta-spark Connect server (started by the tests, beside
# the vanilla one). DELTA_SPARK_REQUIRED: missing jars or a server that does not start fail.
test-delta-spark: $(VENV)/.installed-dev $(WORKER)/.installed delta-jars
	env -u SPARK_REMOTE DELTA_SPARK_REQUIRED=1 \
		DELTA_CONNECT_WORKER_PYTHON=$(CURDIR)/$(WORKER)/bin/python \
		$(VENV)/bin/pytest -m delta_spark tests/integration/delta_spark $(PYTEST_ARGS) \
		|| test $$? -eq 5

# (e) a stock Spark 4.0 Connect server (pip pyspark 4.0 in .venv-spark40), from the 4.1 thin
# client and from a 4.0 thin client (.venv-thin40, also checking pip left its pyspark-client
# alone); server/spark40-ci.sh builds and caches both venvs.
test-spark40: $(WORKER)/.installed $(THIN)/.installed
	server/spark40-ci.sh $(PYTEST_ARGS)

delta-jars:
	server/fetch-delta-jars.sh

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# --- servers ------------------------------------------------------------------------------------

# The standalone server in the foreground on 127.0.0.1:15002 (Ctrl-C stops it).
server: $(VENV)/.installed-dev $(WORKER)/.installed
	server/start-local.sh 15002 $(CURDIR)/$(WORKER)/bin/python

compose-config:
	docker compose -f compose.yaml config

compose-up:
	docker compose -f compose.yaml up -d --wait

compose-down:
	docker compose -f compose.yaml down

clean-venvs:
	rm -rf $(VENV) $(WORKER) $(THIN)
