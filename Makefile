# scimech: every target bootstraps .venv on a fresh machine.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export OMP_NUM_THREADS ?= 2
export MPLBACKEND ?= Agg

.PHONY: demo test bench lint install clean

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	# torch first, pinned to the CPU build pip finds on local disk (a looser pin pulls a CUDA build)
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q "torch==2.13.0" -e ".[dev,hpc,bench,models]"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15

demo: $(STAMP)
	$(BIN)/scimech demo --out reports/demo

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

lint: $(STAMP)
	$(BIN)/ruff check scimech ocean astro neuro tests bench

clean:
	rm -rf $(VENV) reports .pytest_cache
