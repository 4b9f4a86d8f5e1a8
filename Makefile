# MedCopilot: `make demo` and `make test` create or reuse .venv, install everything, and run.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_OUT ?= demo-output
SYSTEM_PACKAGES := chromium libgl1 libegl1 libxkbcommon0 libfontconfig1 libglib2.0-0 libdbus-1-3 \
	openjdk-17-jdk-headless libturbojpeg0 dicom3tools \
	orthanc orthanc-dicomweb orthanc-wsi tesseract-ocr
# what a Qt window needs under X (xcb platform plugin) and VTK's offscreen 3D view (Mesa EGL)
QT_PACKAGES := libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 libxcb-xinerama0 \
	libxcb-randr0 libxcb-render-util0 libxcb-image0 libegl-mesa0 libgl1-mesa-dri

# one pytest worker per core; a test file stays on one worker (its module fixtures are made once); files are handed
# out in collection order, the longest first (tests/conftest.py), not by their number of tests
PARALLEL := -p xdist.plugin -n auto --dist loadfile --no-loadscope-reorder

.PHONY: demo test test-fast lint sysdeps venv lock bench clean screenshots

# The environment comes from requirements.lock (every package pinned with its hashes, resolved once by `make lock`),
# installed by uv without resolving: a clean clone's venv in 45-110 s with uv's cache cold and 16 s warm, against
# 2.3-5.5 min for pip resolving pyproject.toml and 80-180 s for pip installing the same lock (2 cores, loaded): uv
# even when its cache is cold and pip's is warm. uv reads pip's package sources (mirror, local wheel folders) from `pip config`.
# torch is installed apart, so each machine gets its own build (CPU here, CUDA where present).
LOCK := requirements.lock
UV_VERSION := 0.13.9
UV_SOURCES = $$($(PY) -m pip config list 2>/dev/null | awk '{k = $$0; sub(/=.*/, "", k); sub(/^.*\./, "", k); \
	v = $$0; sub(/^[^=]*=/, "", v); gsub(/'"'"'/, "", v); n = split(v, a, " "); \
	if (k == "find-links" || k ~ /index-url$$/) for (i = 1; i <= n; i++) if (!seen[k a[i]]++) printf "--%s %s ", k, a[i]}')
UV_PIP = $(BIN)/uv pip install -q -p $(BIN)/python $(UV_SOURCES) --index-strategy unsafe-best-match
# Bytecode: no installer compiles every module it installs (a minute of CPU); Python writes the .pyc of what is
# imported, once, under .venv/pycache (never beside the sources), which every later process then reuses.
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml $(LOCK)
	@$(MAKE) --no-print-directory sysdeps
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q uv==$(UV_VERSION)
	$(UV_PIP) --require-hashes --no-deps -r $(LOCK)
	$(UV_PIP) torch==2.13.0  # the CPU build (VISTA3D runs on CPU here; CUDA where present)
	$(UV_PIP) --no-deps -e .
	@touch $(STAMP)

venv: $(STAMP)

# Resolve requirements.lock again after a dependency in pyproject.toml changed: pip resolves it in a scratch venv,
# uv writes the pins with their hashes.
LOCK_VENV := /tmp/medcopilot-lock-venv
lock:
	rm -rf $(LOCK_VENV) && $(PY) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install -q torch==2.13.0 -e '.[dev,vista3d,slicer,inspect]' uv==$(UV_VERSION)
	$(LOCK_VENV)/bin/pip freeze --exclude-editable | grep -v -E '^(torch|uv)==' > $(LOCK_VENV)/pins.txt
	$(LOCK_VENV)/bin/uv pip compile -q --no-deps --generate-hashes --no-annotate --python-version 3.11 \
	  --custom-compile-command "make lock" $(UV_SOURCES) --index-strategy unsafe-best-match $(LOCK_VENV)/pins.txt -o $(LOCK)
	rm -rf $(LOCK_VENV)

# System packages (Debian), installed only when missing.
sysdeps:
	@missing=""; for p in $(SYSTEM_PACKAGES) $(QT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then apt-get update -q && apt-get install -y -q $$missing; fi

demo: sysdeps $(STAMP)
	$(BIN)/medcopilot demo --out $(DEMO_OUT)
	@echo "Desktop app: $(BIN)/medcopilot gui $(DEMO_OUT)/cases   (any DICOM folder, NIfTI/NRRD/MHA file or slide too)"

test: $(STAMP)
	@$(MAKE) --no-print-directory sysdeps
	$(BIN)/ruff check copilot tests benchmarks slicer_ext qupath_ext
	PYTHONPATH=slicer_ext/MedCopilot $(BIN)/lint-imports  # the import contracts in pyproject.toml
	$(BIN)/python -m tests.qupath_jvm  # compiles the QuPath API fixture (tests/java) for the bridge's JVM tests
	@# mypy (a minute of CPU without its cache) runs niced beside pytest, on the CPU time pytest leaves idle
	@start=$$(date +%s); nice -n 10 $(BIN)/mypy > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	  $(BIN)/python -m pytest $(PARALLEL) --durations=20; rc=$$?; echo "make test: pytest $$(( $$(date +%s) - start )) s"; \
	  wait $$mypy || rc=1; echo "mypy: $$(tail -n 1 $(VENV)/mypy.log)"; \
	  [ $$rc -eq 0 ] || grep -v '^Success' $(VENV)/mypy.log; exit $$rc

# The core alone in under a minute: no Qt widgets, slicer-core, JVM or servers, no slow test (tests/conftest.py).
test-fast: $(STAMP)
	$(BIN)/ruff check copilot tests benchmarks slicer_ext qupath_ext
	@start=$$(date +%s); $(BIN)/python -m pytest $(PARALLEL) -m "not heavy"; \
	  rc=$$?; echo "make test-fast: $$(( $$(date +%s) - start )) s"; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check copilot tests benchmarks slicer_ext qupath_ext
	$(BIN)/mypy
	PYTHONPATH=slicer_ext/MedCopilot $(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python benchmarks/render.py
	$(BIN)/python benchmarks/observe_http.py
	$(BIN)/python benchmarks/slide.py
	$(BIN)/python benchmarks/gui.py
	$(BIN)/python benchmarks/slicer_backend.py
	$(BIN)/python benchmarks/cases_make.py
	$(BIN)/python benchmarks/desktop_start.py
	$(BIN)/python benchmarks/pacs_fetch.py
	$(BIN)/python benchmarks/prior_align.py
	$(BIN)/python benchmarks/desktop_memory.py

# Screenshots of the desktop app under Xvfb (docs/gui_*.png): brain, PET/CT with fusion and 3D, slide, replay,
# and the PET/CT case written as a DICOM study (orientation letters, HU/SUV under the cursor, selectors)
SHOT := xvfb-run -a -s "-screen 0 1600x900x24" $(BIN)/medcopilot gui
screenshots: sysdeps $(STAMP)
	@dpkg -s xvfb >/dev/null 2>&1 || apt-get install -y -q xvfb xauth >/dev/null
	$(BIN)/medcopilot cases make --module brain_mri --n 1 --seed 0 --out $(DEMO_OUT)/cases
	$(BIN)/medcopilot cases make --module lung_petct --n 1 --seed 4 --out $(DEMO_OUT)/cases
	$(BIN)/medcopilot cases make --module breast_wsi --n 4 --seed 5 --out $(DEMO_OUT)/cases --slide-size 2048x1536 --mpp 1.0
	rm -rf $(DEMO_OUT)/replay_trace
	$(BIN)/medcopilot run --case $(DEMO_OUT)/cases/brain_mri_000_0000 --policy baseline --out $(DEMO_OUT)/replay_trace
	$(SHOT) $(DEMO_OUT)/cases/brain_mri_000_0000 --screenshot docs/gui_brain.png --run baseline
	$(SHOT) $(DEMO_OUT)/cases/lung_petct_004_0000 --screenshot docs/gui_petct_3d.png --run baseline --fusion PET_AC
	$(SHOT) $(DEMO_OUT)/cases/breast_wsi_005_0003 --screenshot docs/gui_slide.jpg --run baseline --cursor 1200,700
	rm -rf $(DEMO_OUT)/petct_dicom
	$(BIN)/python -m copilot.cases.dicom_study $(DEMO_OUT)/cases/lung_petct_004_0000 $(DEMO_OUT)/petct_dicom
	$(SHOT) $(DEMO_OUT)/petct_dicom --series 2,4 --fusion "PET AC" --layout four_up --cursor=-92.6,-54.9,-0.1 \
		--screenshot docs/gui_dicom_petct.png
	$(SHOT) $(DEMO_OUT)/replay_trace --screenshot docs/gui_replay.png
	QT_QPA_PLATFORM= xvfb-run -a -s "-screen 0 1600x900x24" $(BIN)/python -m tests.study_screenshots docs
	QT_QPA_PLATFORM= xvfb-run -a -s "-screen 0 1600x900x24" $(BIN)/python -m tests.reading_screenshots docs
	QT_QPA_PLATFORM= xvfb-run -a -s "-screen 0 1600x900x24" $(BIN)/python -m tests.banner_screenshot docs
	QT_QPA_PLATFORM= xvfb-run -a -s "-screen 0 1600x900x24" $(BIN)/python -m tests.stored_screenshot docs
	$(BIN)/python -m tests.qupath_jvm  # the host panels below: Slicer's (no Slicer needed) and QuPath's (fixture JVM)
	MEDCOPILOT_SCREENSHOTS=docs QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q tests/test_slicer_panel.py \
	  tests/test_qupath_host.py -k "panel"

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache .hypothesis
