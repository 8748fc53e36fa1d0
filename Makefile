# The two commands the README promises: `make run` and `make test`. Both set themselves up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[postgres,dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/urchin demo

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check urchin tests bench
	$(VENV)/bin/mypy urchin

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
