# The two commands of the README: `make demo` and `make test`. Both are idempotent.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: demo test lint format bench clean lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Reinstall only when the dependency list or the lock changes. constraints.txt pins every
# package to the version measured (`make lock` rewrites it), so a number measured today is
# the one measured next month.
$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet -c constraints.txt -e .
	touch $@

# The test extras alone, on top of the package `make demo` installed: `make test` never
# reinstalls the package itself. A reinstall rewrites its files in the venv, and a demo
# served beside it then restarted (issue 46; `manage.py demo_server` also runs runserver
# without its autoreloader now, so a demo survives even a reinstall).
$(VENV)/test-requirements.txt: pyproject.toml | $(BIN)/python
	$(BIN)/python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['test']))" > $@

$(VENV)/.installed-test: pyproject.toml constraints.txt $(VENV)/.installed $(VENV)/test-requirements.txt
	$(BIN)/pip install --quiet -c constraints.txt -r $(VENV)/test-requirements.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $@

## Install, migrate SQLite, load the demo studies and serve them with a Celery worker on
## Kombu's filesystem broker (var/broker: no server to install); Ctrl-C stops both.
## load_demo computes the demo's reports before the server starts (Celery eager there).
## The judges page may reach a VLM server on this machine (vLLM, Ollama): the demo lists
## the loopback, which a deployment does not (docs/judges.md, CAPEVAL_JUDGE_ALLOWED_HOSTS).
demo: export CAPEVAL_JUDGE_ALLOWED_HOSTS ?= 127.0.0.1,localhost
demo: $(VENV)/.installed
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py load_demo --url http://$(HOST):$(PORT)/
	@echo "Ctrl-C stops the server and its job worker."
	$(BIN)/python manage.py demo_server $(HOST):$(PORT)

## Install with test dependencies and run lint, the import contracts and the whole suite,
## two pytest-xdist workers per usable core (each with its own test database and browser;
## pytest_xdist_auto_num_workers in tests/conftest.py: the cores this process may use,
## affinity and cgroup quota, not the host's).
test: $(VENV)/.installed-test node_modules/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/pytest -n auto $(PYTEST_ARGS)

## The benchmarks' own tools (pyproject's bench extra: Locust) on top of the test install.
bench: $(VENV)/.installed-test
	$(BIN)/python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['bench']))" > $(VENV)/bench-requirements.txt
	$(BIN)/pip install --quiet -c constraints.txt -r $(VENV)/bench-requirements.txt

lint: $(VENV)/.installed-test
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports

format: $(VENV)/.installed-test
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

## Re-resolve every dependency in a scratch venv and pin the result in constraints.txt.
lock:
	rm -rf var/lock-venv
	$(PYTHON) -m venv var/lock-venv
	var/lock-venv/bin/pip install --quiet --upgrade pip
	var/lock-venv/bin/pip install --quiet -e ".[test,bench]"
	( echo "# Every package make demo, make test, CI and the Dockerfile install, pinned (make lock)."; \
	  var/lock-venv/bin/pip freeze --exclude-editable ) > constraints.txt
	rm -rf var/lock-venv

clean:
	rm -rf $(VENV) node_modules var .pytest_cache .ruff_cache
