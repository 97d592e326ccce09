# KV Cache Lab — the two commands a user needs are `make lab` and `make test` (see README).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build on the course machines (a local wheel there). A CUDA build installed into the venv
# beforehand is kept: this is only installed when the venv has no torch at all.
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.kvlab-installed
PORT ?= 8888

.PHONY: setup lab test test-lib test-notebooks notebooks train clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PY) -c "import lib, torch; print('kv-cache-lab ready: torch', torch.__version__, '| devices:', lib.device.available_devices())"
	touch $(STAMP)

# Command 1: set everything up and open JupyterLab on the notebook map.
lab: setup
	$(PY) -m ipykernel install --user --name kv-cache-lab --display-name "Python (KV Cache Lab)" >/dev/null
	$(VENV)/bin/jupyter lab notebooks/00_index.ipynb --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT)

# Command 2: set everything up and run the whole test suite (unit tests + strict nbval over every notebook).
test: setup
	$(PY) -m pytest -q tests
	$(MAKE) --no-print-directory test-notebooks

test-lib: setup
	$(PY) -m pytest -q tests

test-notebooks: setup
	@if ls notebooks/*.ipynb >/dev/null 2>&1; then \
		$(PY) -m pytest -q --nbval notebooks --nbval-current-env -p no:cacheprovider; \
	else echo "no notebooks yet: nothing for nbval to compare"; fi

# Re-execute every notebook and store its outputs (what nbval then compares against).
notebooks: setup
	$(PY) -m lib.notebooks

# Rebuild the demo weights in assets/ from assets/corpus.txt (deterministic).
train: setup
	$(PY) -m lib.train all

clean:
	rm -rf $(VENV) *.egg-info site .pytest_cache
