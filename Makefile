# Set-up and everyday commands. Everything runs inside a local virtualenv (.venv).
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
# TVM's CPU thread pool defaults to one thread on this kind of machine; use every core.
export TVM_NUM_THREADS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: install test lint demo bench scipy-fft-suite clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip

install: $(PY)
	$(PY) -m pip install -e ".[dev]"

test:
	$(PY) -m pytest -q --durations=25 tests

lint:
	$(VENV)/bin/ruff check tvm_tailsplit tests bench

# scipy's own FFT tests (test_basic, test_helper, test_multithreading) with tvm_tailsplit.fft as the global backend
scipy-fft-suite:
	$(PY) -m tests.fft.scipy_suite

demo:
	$(PY) -m tvm_tailsplit.split.demo

bench:
	-$(PY) -m pip install pyfftw mkl_fft
	$(PY) -m bench.run_all

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
