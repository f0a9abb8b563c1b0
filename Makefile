# The two commands a newcomer runs on a fresh machine:
#   make demo   - set everything up, then show the bug and the fix end to end (the main job)
#   make test   - set everything up, then run the test suite
# Each creates .venv and installs the package with the versions we test with (constraints.txt).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.mm-handoff-installed
DEMO_ARGS ?=
PYTEST_ARGS ?=

.PHONY: demo test bench setup clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e ".[hf,test,bench]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/mm-handoff demo $(DEMO_ARGS)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)
	# the core's checks again in an optimised interpreter: nothing may depend on assert
	$(PY) -O -m pytest tests/core -q -p no:cacheprovider

bench: $(STAMP)
	$(VENV)/bin/mm-handoff bench

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .benchmarks
