# The commands the README promises: `make run`, `make test` and `make install`. Each sets itself up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test test-fast lint bench install uninstall clean

# `make install`: the `urchin` command for your user, pipx-style: a venv of its own (not the repo's
# .venv, so `make clean` cannot break it) with a non-editable install, linked into BIN_DIR.
BIN_DIR ?= $(HOME)/.local/bin
INSTALL_VENV ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/urchin-cli/venv

# `make run` needs the runtime (with the embedded PostgreSQL) only; tests, linters and browsers come
# with the first `make test`, `make test-fast` or `make lint`.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[postgres]'
	touch $(STAMP)

# The runtime and the dev tools in one pip call on the venv, not the runtime's first and the dev extra
# after it, which resolved the runtime again and built the editable project a second time (its isolated
# build fetching setuptools again): 2026-12-06, a new venv, 112 -> 108 HTTP requests (44 -> 42 wheels).
# The venv without the interpreter's bundled pip (ensurepip installed pip 23.2 only for the next line to
# replace it): the interpreter's own pip puts the current one in, where it can (`--python`, pip >= 22.3).
# 2026-12-06, load 7-10: 6.8 -> 2.8 CPU-s, 26 -> 10 s of wall for the venv and its pip.
$(DEV_STAMP): pyproject.toml
	$(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) -m pip --python $(PY) install --quiet --upgrade pip 2>/dev/null || \
	  { $(PY) -m ensurepip --default-pip && $(PY) -m pip install --quiet --upgrade pip; }
	$(PY) -m pip install --quiet -e '.[postgres,dev]'
	touch $(STAMP) $(DEV_STAMP)

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
# 1-1.5 s of a core less per daemon start, about 100 of them; 02:00: 659-662 s from a clean clone, 1,842 tests,
# 19 CPU-minutes, so at least 570 s on two cores whatever the scheduling;
# the budget missed by 182 s). 03:00-04:10, shared machine at load 10-16 (read CPU, not wall):
# URCHIN_TEST_CPU=1 prints each module's CPU, its processes' included (tests/cpu_meter.py), and
# `python scripts/cputime.py <command>` a whole run's, daemonized PostgreSQL and the embedder included:
# 1,277 s (1,016 s inside modules); the privacy, trust and parity modules now make most CLI calls
# in-process (tests/cli_inprocess.py), 184 -> ~96 s of them (about 7% of the run). Every test
# starts hundreds of Python processes (CLI calls, daemons, hooks): with PYTHONDONTWRITEBYTECODE set in
# the environment (as on this machine) each one compiled Urchin's modules again (~0.1 s a CLI call, more
# a daemon), so the package is compiled once first and the suite may write its bytecode. 04:35, a
# clean clone on an idle machine: 1,949 tests in 633 s (698 s with the installs; 984 s user + 100 s
# sys CPU counted), still over the 480 s budget. 09:05-10:25 (s9-suite), one full run at load 20-33
# with URCHIN_TEST_CPU=1: 1,285 CPU-s inside modules (test_daemon_postgres_lifecycle 66, test_team 46,
# test_parity 33, test_dist 32, test_viewer 31; the costliest tests: test_parity's module fixture 24,
# test_doctor's orphan sweep 17, test_mcp_inspector 14, test_properties' PostgreSQL property 13);
# test_mcp_relay and test_mcp_daemon then shared one daemon among the tests that only ask it,
# 45.1 -> 39.9 CPU-s for the two (same sitting, A/B). 10:44, a clean clone on an idle machine: 2,039
# tests in 552 s (~610 s of `make test`), over the budget by ~70 s. 12:10-13:05 (s10-suite), load
# 16-33, CPU only (a full run at nice 15 got through 36% in 20 min: not repeated). The daemon's digest
# warm-up (cc0aa11) is not what grew the suite: its thread costs 0 CPU-s on an empty journal (most test
# daemons), 0.07 s at 10-120 events, 0.25 s at 1,000 events in 16 workspaces; 7 alternating daemon
# starts on a 60-event journal, start + 4 s: median 1.26 vs 1.16 CPU-s without it; over the first 36%
# of a run, 10 warm-ups finished, 0.29 CPU-s in all. So it stays as it is. initdb is ~1 CPU-s and
# many fsyncs (19 s of wall at load 20), a copy of its files 0.1 s: homes whose test is not about the
# first start copy one initdb per worker (tests/pg_fixture.py `initdb_done`, own_pg), A/B same sitting,
# `URCHIN_TEST_CPU=1 nice -n 15 pytest -n 0 MODULE`: test_daemon_postgres_lifecycle 59.1 -> 52.4,
# test_doctor 22.7 -> 13.9 CPU-s; the CLI's input-check cases in-process (one real process each):
# test_cli's 17 5.7 -> 0.8, test_hostile_input's 13 3.8 -> 0.5. Every test's daemons and the PostgreSQL
# data of its homes (as root ~40 MB each in /var/lib/urchin/pg, which pytest's basetemp clean-up never
# reached: each later daemon start and `doctor --fix` then swept them, inside some test) are removed
# at its teardown, even when it fails (tests/conftest.py). The
# test embedder is installed first, once. It starts (torch's imports: 8.7 CPU-s, 23 s to /health at load
# 10) while the venv installs (pip: one core and the network), not beside the workers' first tests; pytest's
# controller waits for it (URCHIN_TEST_EMBEDDER_URL, tests/embedder_fixture.py), both workers use it, and
# this shell stops it. The modules go to the two workers longest first (tests/schedule.py).
# `URCHIN_TEST_EMBEDDER_URL` set: that running embedder, none started here.
RUN_TESTS = $(MAKE_COMMAND) --no-print-directory $(DEV_STAMP) && \
	echo "$(PY) -m compileall -q urchin tests" && $(PY) -m compileall -q urchin tests && \
	echo "PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 --dist loadscope" && \
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 --dist loadscope
test:
	sh scripts/browser.sh
	@if [ -n "$$URCHIN_TEST_EMBEDDER_URL" ]; then \
	  echo "test embedder: $$URCHIN_TEST_EMBEDDER_URL (given)" && $(RUN_TESTS); exit; fi; \
	bash scripts/test-embedder.sh install && \
	port=$$($(PYTHON) -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') && \
	log=$$(mktemp "$${TMPDIR:-/tmp}/urchin-test-embedder-XXXXXX") && \
	{ URCHIN_TEST_EMBEDDER_TIMEOUT=180 bash scripts/test-embedder.sh start $$port >$$log 2>&1 </dev/null & } && \
	pid=$$! && trap 'kill -TERM $$pid 2>/dev/null; wait $$pid 2>/dev/null; rm -f $$log' EXIT && \
	trap 'exit 130' INT TERM HUP && \
	export URCHIN_TEST_EMBEDDER_URL=http://127.0.0.1:$$port URCHIN_TEST_EMBEDDER_LOG=$$log URCHIN_TEST_EMBEDDER_PID=$$pid && \
	$(RUN_TESTS)

# The inner loop: in-process tests only (no daemon, PostgreSQL, embedder, browser or CLI process;
# conftest marks those `slow`). `make test` before a commit.
test-fast: $(DEV_STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 --dist loadscope -m "not slow"

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check urchin tests bench
	$(VENV)/bin/mypy urchin

bench: $(DEV_STAMP)
	$(PY) -m pip install --quiet -e '.[postgres,dev,bench]'
	@echo "benchmarks: $(PY) bench/<name>.py (bench/RESULTS.md lists them); rg: $(VENV)/bin/rg"

# The wheel is built from a copy of the source (scripts/dist.sh): no build/ or *.egg-info is left here.
install:
	$(PYTHON) -m venv $(INSTALL_VENV)
	$(INSTALL_VENV)/bin/python -m pip install --quiet --upgrade pip
	@dist=$$(mktemp -d) && trap 'rm -rf "$$dist"' EXIT && \
	  sh scripts/dist.sh "$$dist" $(INSTALL_VENV)/bin/python >/dev/null && \
	  whl=$$(ls "$$dist"/*.whl) && $(INSTALL_VENV)/bin/python -m pip install --quiet "$$whl[postgres]" && \
	  $(INSTALL_VENV)/bin/python -m pip install --quiet --force-reinstall --no-deps "$$whl"
	mkdir -p $(BIN_DIR)
	ln -sf $(INSTALL_VENV)/bin/urchin $(BIN_DIR)/urchin
	@echo "installed $(BIN_DIR)/urchin -> $(INSTALL_VENV)/bin/urchin"
	@case ":$$PATH:" in *":$(BIN_DIR):"*) ;; *) echo "note: $(BIN_DIR) is not on your PATH; add it (e.g. export PATH=\"$(BIN_DIR):\$$PATH\")";; esac

# Hooks first, while an `urchin` is still there to remove them (left behind, each would fail with exit
# 127 on every prompt); the data stays (README: Uninstall).
uninstall:
	@for urchin in $(INSTALL_VENV)/bin/urchin $(VENV)/bin/urchin; do \
	  if [ -x "$$urchin" ]; then "$$urchin" uninstall-hooks || exit 1; break; fi; \
	done
	rm -f $(BIN_DIR)/urchin
	rm -rf $(dir $(INSTALL_VENV))
	@echo "your events and settings stay in $${URCHIN_HOME:-~/.local/share/urchin} (README: Uninstall)"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
