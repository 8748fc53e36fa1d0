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

# The main job: the daemon in the foreground (HTTP API on 127.0.0.1:18799, hot views).
run: $(STAMP)
	@echo "urchin serve: API on http://127.0.0.1:$${URCHIN_PORT:-18799}; token in $${URCHIN_HOME:-~/.local/share/urchin}/token; stop with Ctrl-C"
	$(VENV)/bin/urchin serve

test: $(STAMP)
	sh scripts/browser.sh
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check urchin tests bench
	$(VENV)/bin/mypy urchin

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
