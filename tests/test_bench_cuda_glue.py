"""The GEMM benchmarks' GPU-only measuring code (``bench_tails_cuda.measure_shape``, ``bench_warpspec_cuda.
measure_shape``) run without a GPU: torch is replaced by a numpy stand-in of the calls they make (device "cuda" is
the CPU) and every TVM kernel by an llvm matmul of the same signature (C = A @ B, or A @ B.T for the Hopper
kernels; M symbolic). What runs for real: the operands, the NaN-poisoned outputs passed through DLPack, the error
checks, the side-by-side timing, the sweeps and the rows' fields, which the markdown renders."""

import json
import sys
import types

import numpy as np
import pytest
import tvm
from tvm import te

from bench import bench_tails_cuda, bench_warpspec_cuda, gpu
from tvm_tailsplit.split import mma_schedule as ms


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

    def __rmul__(self, other):
        return _Tensor(other * self.a)

    def is_complex(self):
        return np.iscomplexobj(self.a)

    def to(self, dtype):
        return _Tensor(self.a.astype(dtype.np))

    def flatten(self):
        return _Tensor(self.a.reshape(-1))

    def all(self):
        return _Tensor(np.array(self.a.all()))

    def item(self):
        return self.a.item()

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
    return torch


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
    executables = dict.fromkeys(("guarded", "pad_einsum", "tailsplit", "dlight"), plain)
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
