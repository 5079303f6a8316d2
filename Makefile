# `make app` sets up and starts the dashboard; `make test` sets up and runs the tests.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup app test bench

$(VENV)/.installed: requirements.txt requirements-dev.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

setup: $(VENV)/.installed

app: setup
	$(VENV)/bin/streamlit run app.py

test: setup
	$(PY) -m pytest -q

bench: setup
	$(PY) bench/hidden_states.py
