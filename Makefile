# Two commands set up a fresh clone and run mgemm: `make demo` and `make test`.
# On a GPU machine add the CUDA stack: `make demo EXTRAS=test,cuda13` (or cuda12).
PYTHON ?= python3
VENV ?= .venv
EXTRAS ?= test
BIN := $(VENV)/bin

.PHONY: demo test install kernels clean

$(BIN)/mgemm: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

install: $(BIN)/mgemm

demo: install
	$(BIN)/mgemm demo

test: install
	$(BIN)/python -m pytest -q

kernels:
	bash .ci/compile-kernels.sh

clean:
	rm -rf $(VENV) build *.egg-info
