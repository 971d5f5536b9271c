# Two commands set up a fresh clone and run mgemm: `make demo` and `make test`.
# On a GPU machine add the CUDA stack: `make demo EXTRAS=test,cuda13` (or cuda12).
PYTHON ?= python3
VENV ?= .venv
EXTRAS ?= test
BIN := $(VENV)/bin
# one stamp per set of extras: `make demo EXTRAS=test,cuda13` after `make demo` installs the CUDA stack
STAMP := $(VENV)/.installed-$(EXTRAS)

.PHONY: demo test install kernels clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

install: $(STAMP)

demo: install
	$(BIN)/mgemm demo

test: install
	$(BIN)/python -m pytest -q

kernels:
	bash .ci/compile-kernels.sh

clean:
	rm -rf $(VENV) build *.egg-info
