# `make app` sets up and starts the dashboard; `make test-all` sets up and runs every test (CI);
# `make test` and `make test-fast` are the developer's loops.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup setup-dev app test test-fast test-all bench

# The project installs as a package (editable): the library, the CLI (`readout-geometry`) and the dashboard glue.
$(VENV)/.installed: pyproject.toml requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt requirements-ray.txt
	$(PY) -m pip install --quiet -e ".[dev,ray]"
	touch $@

setup: $(VENV)/.installed

setup-dev: $(VENV)/.installed-dev

app: setup
	$(PY) -m dashboard

# Everything but the browser, the built-in model, Ray and UMAP's compilation.
test: setup-dev
	$(PY) -m pytest -q -m "not slow"

# Unit and property tests: no dashboard page, no CLI process, no browser, no real model.
test-fast: setup-dev
	$(PY) -m pytest -q -m "not slow and not integration"

test-all: setup-dev
	$(PY) -m pytest -q

bench: setup
	$(PY) bench/hidden_states.py
