# Everyday entry points; each is a plain command you can also run by hand.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install proto proto-check lint typecheck test bench quickstart

install:
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -e '.[dev]'

proto:          ## regenerate libs/common/evalsi/v1alpha1 from proto/
	$(PY) scripts/gen_proto.py

proto-check:    ## fail when the generated code is stale
	$(PY) scripts/gen_proto.py --check

lint:
	$(VENV)/bin/ruff check .

typecheck:      ## mypy over libs/common/evalsi, as configured in pyproject.toml [tool.mypy]
	$(VENV)/bin/mypy

test:           ## everything: install, proto check, lint, pytest
	scripts/test.sh

bench:          ## benchmarks print their figures beside their targets
	$(PY) benchmarks/embedded_evaluate.py
	$(PY) benchmarks/evaluate_latency.py
	$(PY) benchmarks/run_million.py

quickstart:
	$(VENV)/bin/evalsi eval --data examples/quickstart/qa.jsonl --evaluators exact-match,fuzzy-match,numeric-match,latency,cost
