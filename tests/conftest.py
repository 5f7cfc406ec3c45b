"""Shared pytest set-up: GPU and nvcc markers skip with the precise reason where the tool is absent."""

import pytest

from tvm_tailsplit.cuda import gpu_available, nvcc_available


def pytest_collection_modifyitems(config, items):
    no_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU with a CUDA driver; none on this machine")
    no_nvcc = pytest.mark.skip(reason="needs nvcc on PATH to compile the generated CUDA; not installed here")
    has_gpu = gpu_available()
    has_nvcc = nvcc_available()
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(no_gpu)
        if "nvcc" in item.keywords and not has_nvcc:
            item.add_marker(no_nvcc)
