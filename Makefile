# MedCopilot: `make demo` and `make test` create or reuse .venv, install everything, and run.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_OUT ?= demo-output
SYSTEM_PACKAGES := chromium

.PHONY: demo test lint sysdeps venv bench clean

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory sysdeps
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0  # the CPU build (VISTA3D runs on CPU here; CUDA where present)
	$(BIN)/pip install -q -e '.[dev,vista3d]'
	@touch $(STAMP)

venv: $(STAMP)

# System packages (Debian), installed only when missing.
sysdeps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then apt-get update -q && apt-get install -y -q $$missing; fi

demo: $(STAMP)
	$(BIN)/medcopilot demo --out $(DEMO_OUT)

test: $(STAMP)
	$(BIN)/ruff check copilot tests benchmarks slicer_ext qupath_ext
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check copilot tests benchmarks slicer_ext qupath_ext

bench: $(STAMP)
	$(BIN)/python benchmarks/render.py
	$(BIN)/python benchmarks/slide.py

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache .hypothesis
