"""The GPU benchmarks' GPU-only measuring code run without a GPU: torch (and cupy) are replaced by a numpy stand-in
of the calls they make (device "cuda" is the CPU). The GEMM benchmarks (``bench_tails_cuda.measure_shape``,
``bench_warpspec_cuda.measure_shape``) run llvm matmuls of the same signature in place of the TVM kernels (C = A @ B,
or A @ B.T for the Hopper kernels; M symbolic); the FFT benchmark's rows (``measure_row``, ``measure_convolution``,
``measure_fused_consumer``) run the CUDA plans and graphs themselves, their schedules compiled for llvm
(``testing.cuda_schedule_for_llvm``) behind ``tvm.cuda`` as the CPU. What runs for real: the operands, the
NaN-poisoned outputs passed through DLPack, the error checks, the side-by-side timing, the sweeps and the rows'
fields, which the markdown renders."""

import functools
import json
import sys
import types

import numpy as np
import pytest
import tvm
from tvm import te

from bench import bench_fft_cuda, bench_tails_cuda, bench_warpspec_cuda, gpu
from tvm_tailsplit.cuda import gpu_available
from tvm_tailsplit.fft import planner
from tvm_tailsplit.split import mma_schedule as ms
from tvm_tailsplit.testing import cuda_schedule_for_llvm


class _Tensor:
    """A numpy array behind the torch.Tensor methods the benchmarks call."""

    def __init__(self, array: np.ndarray) -> None:
        self.a = array

    dtype = property(lambda self: _DTYPES[self.a.dtype])
    shape = property(lambda self: self.a.shape)

    def half(self):
        return _Tensor(self.a.astype(np.float16))

    def float(self):
        return _Tensor(self.a.astype(np.float32))

    def t(self):
        return _Tensor(self.a.T)

    def contiguous(self):
        return _Tensor(np.ascontiguousarray(self.a))

    def __matmul__(self, other):
        return _Tensor(self.a @ other.a)

    def __sub__(self, other):
        return _Tensor(self.a - (other.a if isinstance(other, _Tensor) else other))

    def __mul__(self, other):
        return _Tensor(self.a * (other.a if isinstance(other, _Tensor) else other))

    __rmul__ = __mul__

    def is_complex(self):
        return np.iscomplexobj(self.a)

    def to(self, dtype_or_device):  # a device ("cuda") moves nothing
        return _Tensor(self.a.astype(dtype_or_device.np) if isinstance(dtype_or_device, _DType) else self.a)

    def flatten(self):
        return _Tensor(self.a.reshape(-1))

    def all(self):
        return _Tensor(np.array(self.a.all()))

    def item(self):
        return self.a.item()

    def clone(self):
        return _Tensor(self.a.copy())

    def numel(self):
        return self.a.size

    def element_size(self):
        return self.a.itemsize

    def mul_(self, other):
        self.a *= other.a
        return self

    def fill_(self, value):
        self.a[...] = value
        return self

    def copy_(self, other):
        self.a[...] = other.a
        return self

    def abs(self):
        return _Tensor(np.abs(self.a))

    def square(self):
        return _Tensor(np.square(self.a))

    def cpu(self):
        return self

    def numpy(self):
        return self.a

    def __dlpack__(self, *args, **kwargs):
        return self.a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class _DType:
    def __init__(self, name: str) -> None:
        self.name, self.np = name, np.dtype(name)

    def __str__(self) -> str:
        return f"torch.{self.name}"


class _Generator:
    def __init__(self, device=None) -> None:
        self.rng = np.random.default_rng(0)

    def manual_seed(self, seed: int):
        self.rng = np.random.default_rng(seed)
        return self


_NAMES = ("float16", "float32", "float64", "complex64", "complex128")
_DTYPES = {np.dtype(name): _DType(name) for name in _NAMES}


def _fake_torch() -> types.ModuleType:
    torch = types.ModuleType("torch")
    for dtype in _DTYPES.values():
        setattr(torch, dtype.name, dtype)
    torch.Generator = _Generator
    torch.rand = lambda *shape, device, generator: _Tensor(generator.rng.random(shape, dtype=np.float32))
    torch.full = lambda shape, value, device: _Tensor(np.full(shape, value, np.float32))
    torch.isfinite = lambda tensor: _Tensor(np.isfinite(tensor.a))
    torch.linalg = types.SimpleNamespace(vector_norm=lambda tensor: _Tensor(np.array(np.linalg.norm(tensor.a))))
    torch.cuda = types.SimpleNamespace(synchronize=lambda: None)
    torch.backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True)))

    def mm(a, b, out_dtype=None):  # cuBLAS: fp32 sums, fp32 output with out_dtype
        product = a.a.astype(np.float32) @ b.a.astype(np.float32)
        return _Tensor(product if out_dtype is torch.float32 else product.astype(np.float16))

    torch.mm = mm

    def randn(*shape, dtype=torch.float32, device, generator):
        values = generator.rng.standard_normal(shape)
        if dtype.np.kind == "c":
            values = values + 1j * generator.rng.standard_normal(shape)
        return _Tensor(values.astype(dtype.np))

    def same_precision(x, result):  # numpy computes in float64: the input's precision, as torch
        single = x.a.dtype in (np.float32, np.complex64)
        return result.astype((np.complex64 if np.iscomplexobj(result) else np.float32) if single else result.dtype)

    def into(result, out):
        if out is None:
            return _Tensor(result)
        out.a[...] = result
        return out

    torch.randn = randn
    torch.empty = lambda *shape, dtype=torch.float32, device: _Tensor(np.empty(shape, dtype.np))
    torch.empty_like = lambda tensor: _Tensor(np.empty_like(tensor.a))
    torch.full_like = lambda tensor, value: _Tensor(np.full_like(tensor.a, value))
    torch.from_numpy = _Tensor
    torch.device = str
    torch.view_as_real = lambda tensor: _Tensor(tensor.a.view(tensor.a.real.dtype).reshape(*tensor.a.shape, 2))
    torch.fft = types.SimpleNamespace(
        fft=lambda x, out=None: into(same_precision(x, np.fft.fft(x.a)), out),
        rfft=lambda x, n=None, out=None: into(same_precision(x, np.fft.rfft(x.a, n)), out),
        irfft=lambda x, n=None, out=None: into(same_precision(x, np.fft.irfft(x.a, n)), out))
    return torch


def _fake_cupy() -> types.ModuleType:
    cupy = types.ModuleType("cupy")
    cupy.from_dlpack = lambda tensor: np.from_dlpack(tensor.a)
    cupy.fft = types.SimpleNamespace(fft=np.fft.fft, rfft=np.fft.rfft, irfft=np.fft.irfft)
    return cupy


@pytest.fixture
def fake_torch(monkeypatch):
    """The numpy stand-in as `torch` (tvm_ffi, imported already, never sees it), timings of a millisecond."""
    monkeypatch.setitem(sys.modules, "torch", _fake_torch())
    monkeypatch.setattr(gpu, "MIN_SECONDS", 0.001)


def _matmul(n: int, k: int, transposed: bool):
    """An llvm kernel main(A, B, C) of C = A @ B (B k x n) or A @ B.T (B n x k), fp16 in, fp32 sums and out,
    M symbolic."""
    a = te.placeholder((te.var("m"), k), "float16", name="A")
    b = te.placeholder((n, k) if transposed else (k, n), "float16", name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((a.shape[0], n), lambda i, j: te.sum(
        a[i, r].astype("float32") * (b[j, r] if transposed else b[r, j]).astype("float32"), axis=r), name="C")
    return tvm.compile(te.create_prim_func([a, b, c]), target="llvm")


@pytest.mark.parametrize(("m", "n", "k", "symbolic"), [(33, 64, 64, True), (24, 40, 48, False),
                                                        (24, 40, 41, False)])
def test_tails_measure_shape_runs_every_column_and_sweep(fake_torch, m, n, k, symbolic):
    tiling = bench_tails_cuda.dispatched_tiling(m, n, k, 132) if symbolic else ms.choose_tiling(m, n, k, 132)
    plain, transposed = _matmul(n, k, False), _matmul(n, k, True)
    executables = dict.fromkeys(("guarded", "pad_einsum", "guard_chains", "tailsplit", "dlight"), plain)
    if not symbolic:  # the (e) kernel of the divisible shape (symbolic: the (d) kernel)
        executables["divisible"] = _matmul(*bench_tails_cuda.divisible_shape(m, n, k, tiling)[1:], False)
    absent = bench_tails_cuda.hopper_unsupported(k, "sm_90")
    if absent is None:
        executables["hopper"] = transposed
    sweep = {t.name(): plain for t in bench_tails_cuda.sweep_tilings(None if symbolic else m, k)[:2]}
    hopper_sweep = {} if absent else {bench_tails_cuda.hopper_tiling_name(w): transposed for w in (64, 256)}
    row = bench_tails_cuda.measure_shape(executables, m, n, k, 2, seed=1, symbolic=symbolic, tiling=tiling,
                                         sweep=sweep, hopper_absent=absent, hopper_width=None if absent else 256,
                                         hopper_sweep=hopper_sweep)
    columns = {*bench_tails_cuda.COLUMNS, *(() if absent else ("hopper",))}
    assert row["ok"] and set(row["us"]) == set(row["errors"]) == columns
    assert (absent is None) == ("d/h" in row["ratios"])
    assert all(error < 1e-6 for error in row["errors"].values()) and row["cublas_output"] == "torch.float32"
    assert row["sweep_best"] in sweep and (absent is not None or row["hopper_sweep_best"] in hopper_sweep)
    report = {"machine": {"gpu": "-", "arch": "sm_90", "cpu": "-", "date": "-", "torch": "-", "cuda": "-", "tvm": "-"},
              "sm_count": 132, "rounds": 2, "quick": True, "tilings": True, "hopper_absent": None, "rows": [row],
              "compile_seconds": {}, "command": bench_tails_cuda.command(True, True)}
    assert f"| {'M=' if symbolic else ''}{m}x{n}x{k} | {tiling.name()}" in bench_tails_cuda.markdown(
        json.loads(json.dumps(report)))


def test_warpspec_measure_shape_runs_every_column(fake_torch):
    kernel = _matmul(64, 40, True)
    row = bench_warpspec_cuda.measure_shape(dict.fromkeys(bench_warpspec_cuda.COLUMNS[:-1], kernel), 24, 64, 40, 2, 0)
    assert row["ok"] and set(row["us"]) == set(bench_warpspec_cuda.COLUMNS)
    assert set(row["ratios"]) == set(bench_warpspec_cuda.RATIOS) and max(row["errors"].values()) < 1e-6


@functools.cache
def _llvm_executable(plan):
    return tvm.compile(cuda_schedule_for_llvm(plan.module), target="llvm")


@pytest.fixture
def cuda_on_the_cpu(fake_torch, monkeypatch):
    """CUDA plans run their schedules compiled for llvm, `tvm.cuda(0)` is the CPU, cupy is numpy; rows of 2^10
    points, small convolution and power-spectrum rows. Not on a machine with a GPU: the plans in the process's plan
    cache would keep the CPU tensors of their tables as their device constants."""
    if gpu_available():
        pytest.skip("on a GPU the benchmark's own gpu test runs these rows")
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    monkeypatch.setattr(planner, "gpu_available", lambda: True)
    monkeypatch.setattr(planner.Plan, "_cuda_executable", _llvm_executable)
    monkeypatch.setattr(tvm, "cuda", tvm.cpu)
    monkeypatch.setattr(bench_fft_cuda, "compile_graph",
                        lambda mod, arch: tvm.compile(cuda_schedule_for_llvm(mod), target="llvm"))
    for name, value in (("BATCH_POINTS", 2 ** 10), ("CONSUMER_N", 64), ("CONVOLUTION_N", 128),
                        ("CONVOLUTION_TAPS", 16)):
        monkeypatch.setattr(bench_fft_cuda, name, value)


@pytest.mark.parametrize("row", [("c2c", 64, "complex64"), ("r2c", 64, "complex64"), ("c2r", 64, "complex64"),
                                 ("c2c", 97, "complex64"), ("c2c", 64, "complex128")],
                         ids=lambda row: ":".join(map(str, row)))
def test_fft_measure_row_times_and_checks_the_plan(cuda_on_the_cpu, row):
    result = bench_fft_cuda.measure_row(*row, 2, "sm_90", 100.0)
    assert result["ok"] and result["all_written"] and result["error_vs_float64"] < 1e-6
    assert set(result["us"]) == {"generated", "torch.fft", "cupy.fft", "limit"}


def test_fft_convolution_and_fused_consumer_rows(cuda_on_the_cpu):
    convolution = bench_fft_cuda.measure_convolution(2, "sm_90")
    consumer = bench_fft_cuda.measure_fused_consumer(2, "sm_90")
    for row in (convolution, consumer):
        assert row["ok"] and set(row["errors_vs_torch"]) == set(row["us"]) - {next(iter(row["us"]))}, row
