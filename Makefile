# `make app` sets up and starts the dashboard; `make test` sets up and runs the tests.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup setup-dev app test bench

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
	$(VENV)/bin/streamlit run app.py

test: setup-dev
	$(PY) -m pytest -q

bench: setup
	$(PY) bench/hidden_states.py
