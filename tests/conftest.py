"""Shared pytest set-up: the GPU, nvcc and CPU-feature markers skip with the precise reason where the tool or the
instruction set is absent; ``--fuzz-cases=N`` sets how many random cases the TailSplit fuzzer checks; the FFT plan
cache of the whole session (and of the processes it starts) is a temporary directory, never the user's."""

import os
import pathlib

import pytest

from tvm_tailsplit.cuda import gpu_available, nvcc_available


def cpu_flags() -> set[str]:
    """The host CPU's feature flags as Linux reports them (empty where /proc/cpuinfo is absent)."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def pytest_addoption(parser):
    parser.addoption(
        "--fuzz-cases",
        type=int,
        default=16,
        help="number of random cases of the TailSplit fuzzer (tests/split/test_split_fuzz.py, default 16: about 80 s "
        "on 2 cores); case i uses seed i",
    )


def pytest_collection_modifyitems(config, items):
    flags = cpu_flags()
    requirements = {
        "gpu": (gpu_available(), "needs an NVIDIA GPU with a CUDA driver; none on this machine"),
        "nvcc": (nvcc_available(), "needs nvcc on PATH to compile the generated CUDA; not installed here"),
        "avx512": ("avx512f" in flags, "asserts AVX-512 code (zmm registers, k masks); this CPU has no AVX-512F"),
        "vnni": ({"avx512f", "avx512_vnni"} <= flags, "runs AVX-512 VNNI (vpdpbusd); this CPU has no AVX512_VNNI"),
    }
    for item in items:
        for marker, (available, reason) in requirements.items():
            if marker in item.keywords and not available:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session", autouse=True)
def fft_plan_cache(tmp_path_factory):
    """Point the FFT plan cache (`tvm_tailsplit.fft.cache`) at a directory of this session."""
    saved = {name: os.environ.get(name) for name in ("TVM_TAILSPLIT_CACHE_DIR", "TVM_TAILSPLIT_CACHE")}
    os.environ["TVM_TAILSPLIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("fft-plan-cache"))
    os.environ.pop("TVM_TAILSPLIT_CACHE", None)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def cuda_plans_for_the_default_architecture(request, monkeypatch):
    """On a machine with a GPU, tests not marked `gpu` still plan `target="cuda"` for `cuda.DEFAULT_ARCH`
    (sm_80), the architecture their kernel counts and limits are written for; `gpu` tests plan for the GPU present,
    as users do. (Without a GPU, "cuda" is sm_80 anyway.)"""
    if not gpu_available() or "gpu" in request.keywords:
        yield
        return
    from tvm_tailsplit.fft import planner

    monkeypatch.setattr(planner, "device_arch", lambda: None)
    planner._named_target.cache_clear()
    yield
    planner._named_target.cache_clear()
