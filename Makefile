# The two commands of the quick start:
#   make serve   create .venv if missing, install, serve the labs on http://127.0.0.1:8000
#   make test    install what the tests need (torch CPU build, triton, pytest, playwright...) and run them
# Browser tests drive Debian's Chromium (/usr/bin/chromium); `make test` installs it when run as root.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# The CPU build of torch lies on the project's machines; a bare `torch` would pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: serve test chromium bench calibrate-cpu clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[kernels,test]"
	touch $@ $(VENV)/.base

serve: $(VENV)/.base
	$(BIN)/pdlab serve --host $(HOST) --port $(PORT)

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "chromium missing: browser tests will be skipped (as root: apt-get install -y chromium)"; fi; }

test: $(VENV)/.test chromium
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.test
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

calibrate-cpu: $(VENV)/.test
	$(BIN)/pdlab calibrate --device cpu --quick --out cpu-measured.json

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis test-artifacts *.egg-info
