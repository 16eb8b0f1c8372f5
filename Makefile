# scimech: every target bootstraps .venv on a fresh machine.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs
DOCS_OUT := reports/docs
export OMP_NUM_THREADS ?= 2
export MPLBACKEND ?= Agg

.PHONY: demo test test-slow bench lint format docs install clean

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	# torch first, pinned to the CPU build pip finds on local disk (a looser pin pulls a CUDA build)
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q "torch==2.13.0" -e ".[dev,hpc,bench,models]"
	touch $(STAMP)

install: $(STAMP)

# the default tier: every behaviour at small size (about 6 min of pytest on 2 cores)
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15 -m "not slow"

# the slow tier (`@pytest.mark.slow`): notebooks run top to bottom, killed-and-resumed studies,
# whole studies and long trainings, the pages that run for minutes; .ci/run runs it after `make test`
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15 -m slow

demo: $(STAMP)
	$(BIN)/scimech demo --out reports/demo

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

# ruff, the type checker on the core (the strictness of [tool.mypy] in pyproject.toml), then the
# pre-commit hooks on every tracked file (ruff format --check among them: `make format` first)
lint: $(STAMP)
	$(BIN)/ruff check scimech ocean astro neuro tests bench
	$(BIN)/mypy
	$(BIN)/pre-commit run --all-files --show-diff-on-failure

# the formatter over the whole tree (the pre-commit hook formats only the files committed)
format: $(STAMP)
	$(BIN)/ruff format .

# the documentation site: the guides, the gallery (every examples/**/plot_*.py run and its figures
# kept; about 45 s of CPU), the studies' notebooks as committed, and the API reference from the
# docstrings, warnings as errors (a failing example fails the build)
$(DOCS_STAMP): $(STAMP)
	$(BIN)/pip install -q "torch==2.13.0" -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs $(DOCS_OUT)
	@echo "Documentation: $(abspath $(DOCS_OUT))/index.html"

clean:
	rm -rf $(VENV) reports .pytest_cache
