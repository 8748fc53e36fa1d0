# The commands the README promises: `make run`, `make test` and `make install`. Each sets itself up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-fast lint bench install uninstall clean

# `make install`: the `urchin` command for your user, pipx-style: a venv of its own (not the repo's
# .venv, so `make clean` cannot break it) with a non-editable install, linked into BIN_DIR.
BIN_DIR ?= $(HOME)/.local/bin
INSTALL_VENV ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/urchin-cli/venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[postgres,dev]'
	touch $(STAMP)

# The main job: the daemon in the foreground (HTTP API on 127.0.0.1:18799, hot views).
run: $(STAMP)
	@echo "urchin serve: API on http://127.0.0.1:$${URCHIN_PORT:-18799}; token in $${URCHIN_HOME:-~/.local/share/urchin}/token"
	@echo "this terminal now runs the daemon (stop with Ctrl-C); in another one: make install, then urchin ..."
	$(VENV)/bin/urchin serve

# Two workers (the machine has two cores; most tests wait on real processes), a module to a worker
# (--dist loadscope: a module's daemon, database or parity fixture starts once, not once per worker;
# 2026-12-04 23:00: 692-786 s from a clean clone, 1,705 tests, CPU-bound: ~21 CPU-minutes on two cores;
# the costliest modules are test_daemon_lifecycle, test_privacy, test_trust_files_secrets and
# test_trust_attack. 2026-12-05: a test's daemon loads the MCP SDK only where it asks `--with-mcp`,
# 1-1.5 s of a core less per daemon start, about 100 of them). The
# test embedder is installed first, once; pytest's controller starts it and both workers use it.
test: $(STAMP)
	sh scripts/browser.sh
	bash scripts/test-embedder.sh install
	$(PY) -m pytest -q -n 2 --dist loadscope

# The inner loop: in-process tests only (no daemon, PostgreSQL, embedder, browser or CLI process;
# conftest marks those `slow`). `make test` before a commit.
test-fast: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadscope -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check urchin tests bench
	$(VENV)/bin/mypy urchin

bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[postgres,dev,bench]'
	@echo "benchmarks: $(PY) bench/<name>.py (bench/RESULTS.md lists them); rg: $(VENV)/bin/rg"

install:
	$(PYTHON) -m venv $(INSTALL_VENV)
	$(INSTALL_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(INSTALL_VENV)/bin/python -m pip install --quiet '.[postgres]'
	mkdir -p $(BIN_DIR)
	ln -sf $(INSTALL_VENV)/bin/urchin $(BIN_DIR)/urchin
	@echo "installed $(BIN_DIR)/urchin -> $(INSTALL_VENV)/bin/urchin"
	@case ":$$PATH:" in *":$(BIN_DIR):"*) ;; *) echo "note: $(BIN_DIR) is not on your PATH; add it (e.g. export PATH=\"$(BIN_DIR):\$$PATH\")";; esac

uninstall:
	rm -f $(BIN_DIR)/urchin
	rm -rf $(dir $(INSTALL_VENV))

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
