"""FFT convolution (`fft.convolve`, `fft.plan_convolve`): scipy.signal.fftconvolve's results from one pipeline whose
product with the filter's spectrum is fused into the pass that ends the r2c transform and begins the c2r one.

The matrix covers odd, even and prime signal lengths, filters longer than the signal and of one tap, the three
modes, float32 and float64, batches and axes; circular pipelines of even, odd, Rader and Bluestein lengths run on
canary-guarded buffers; the TIR shows that only the fused passes read the filter's spectrum (no multiply pass); the
CUDA pipeline runs on llvm with its threads serialized, compiles with nvcc for sm_80 and sm_90, and runs on a GPU.
"""

import pickle

import numpy as np
import pytest
import scipy.signal
import tvm
import tvm_ffi
from tvm import s_tir

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.cuda import compile_cuda_source
from tvm_tailsplit.fft.convolve import convolution_length, filter_spectrum
from tvm_tailsplit.fft.spec import FFTSpec
from tvm_tailsplit.testing import cuda_schedule_for_llvm, guarded_array, to_tvm

from .fft_reference import random_real

# relative L2 error bounds of an FFT convolution against float64 direct convolution (an r2c and a c2r transform)
TOLERANCE = {"float32": 2e-6, "float64": 1e-13}

CASES = [  # (signal length, filter length, mode, dtype, batch)
    (100, 7, "full", "float64", 3),
    (101, 13, "same", "float32", 2),
    (101, 13, "valid", "float64", 1),
    (97, 31, "full", "float32", 4),  # prime signal length
    (97, 1, "full", "float64", 2),  # one-tap filter
    (1, 1, "full", "float32", 1),
    (1, 5, "same", "float64", 2),  # the filter longer than the signal
    (13, 29, "same", "float32", 3),
    (50, 80, "valid", "float64", 1),
    (50, 80, "full", "float32", 2),
    (7, 7, "valid", "float32", 5),
    (1009, 64, "full", "float32", 2),
    (1009, 64, "same", "float64", 1),
    (4096, 257, "valid", "float32", 3),
    (3000, 1000, "full", "float64", 2),
    (255, 2, "same", "float32", 1),
    (2, 3, "valid", "float64", 1),
]


def case_id(case):
    return "x{}-h{}-{}-{}-b{}".format(*case)


def reference(x: np.ndarray, h: np.ndarray, mode: str, axis: int = -1) -> np.ndarray:
    shape = [1] * x.ndim
    shape[axis] = len(h)
    return scipy.signal.fftconvolve(x.astype(np.float64), h.astype(np.float64).reshape(shape), mode=mode, axes=axis)


def relative_error(result: np.ndarray, expected: np.ndarray) -> float:
    return float(np.linalg.norm(result.astype(np.float64) - expected) / max(np.linalg.norm(expected), 1e-300))


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_convolve_matches_scipy_fftconvolve(case):
    length, taps, mode, dtype, batch = case
    x = random_real((batch, length), dtype, seed=length)
    h = random_real((taps,), dtype, seed=taps + 1)
    y = tfft.convolve(x, h, mode=mode)
    expected = reference(x, h, mode)
    assert y.shape == expected.shape and y.dtype == np.dtype(dtype)
    assert relative_error(y, expected) <= TOLERANCE[dtype]


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_matches_numpy_convolve(mode):
    x, h = random_real((300,), "float64", 1), random_real((45,), "float64", 2)
    assert relative_error(tfft.convolve(x, h, mode=mode), np.convolve(x, h, mode=mode)) <= TOLERANCE["float64"]


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_convolve_along_any_axis_of_a_batch(axis):
    x = random_real((6, 40, 5), "float32", 3)
    h = random_real((9,), "float32", 4)
    y = tfft.convolve(x, h, axis=axis, mode="same")
    expected = reference(x, h, "same", axis)
    assert y.shape == expected.shape and relative_error(y, expected) <= TOLERANCE["float32"]


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_batches_beyond_32_bit_indices_run_in_parts(monkeypatch, mode):
    # the pipeline indexes its (batch, n) buffers with 32-bit integers (spec.MAX_BUFFER_FLOATS): rows that reach
    # further (over 8 GiB of float32) were refused ('transform the batch in parts'); they now run in parts of as
    # many rows as fit, here with a limit of 1000 floats
    import importlib

    from tvm_tailsplit.fft import spec

    convolve = importlib.import_module("tvm_tailsplit.fft.convolve")  # (the package's `convolve` is the function)
    monkeypatch.setattr(spec, "MAX_BUFFER_FLOATS", 1000)
    batches = []
    plan_convolve = convolve.plan_convolve
    monkeypatch.setattr(convolve, "plan_convolve", lambda n, h, batch, *args: batches.append(batch) or
                        plan_convolve(n, h, batch, *args))
    x, h = random_real((5, 10, 60), "float64", 9), random_real((5,), "float64", 10)
    y = tfft.convolve(x, h, axis=-1, mode=mode)
    expected = reference(x, h, mode, -1)
    assert y.shape == expected.shape and relative_error(y, expected) <= TOLERANCE["float64"]
    assert len(batches) > 1 and sum(batches) == 50  # (full: n = 64, parts of 15 rows)
    with pytest.raises(ValueError, match="reaches 1008 floats"):  # one row beyond the limit: no parts
        tfft.convolve(np.ones(1000), h)


def test_dtypes_follow_scipy():
    x32, h32 = random_real((2, 30), "float32", 5), random_real((4,), "float32", 6)
    assert tfft.convolve(x32, h32).dtype == np.float32
    assert tfft.convolve(x32, h32.astype(np.float64)).dtype == np.float64  # mixed: float64, as scipy
    # float16 computes in float32 as in scipy.fft (it was float64)
    assert tfft.convolve(x32.astype(np.float16), h32).dtype == np.float32
    assert tfft.convolve(x32.astype(np.float16), h32.astype(np.float16)).dtype == np.float32
    # byte-swapped single precision is still single precision (it computed in float64)
    assert tfft.convolve(x32.astype(">f4"), h32.astype(">f2")).dtype == np.float32
    assert relative_error(tfft.convolve(x32.astype(">f4"), h32), reference(x32, h32, "full")) <= TOLERANCE["float32"]
    ints = np.arange(20).reshape(2, 10)
    y = tfft.convolve(ints, [1, 2, 3])
    assert y.dtype == np.float64 and np.allclose(y, reference(ints, np.array([1.0, 2.0, 3.0]), "full"))


def test_fft_length_is_fast_and_alias_free():
    # full: Lx + Lh - 1; same/valid keep the outputs from (Lh-1)//2 and min(Lx, Lh) - 1 on: shorter circles
    assert convolution_length(1000, 24, "full") == tfft.next_fast_len(1023, real=True) == 1024
    assert convolution_length(1000, 24, "valid") == 1000
    assert convolution_length(1000, 25, "same") == tfft.next_fast_len(1012, real=True)
    for length, taps in ((97, 31), (13, 29), (1, 1)):
        assert convolution_length(length, taps, "full") >= length + taps - 1


def test_plan_applies_one_filter_to_many_batches_as_overlap_save():
    # FFTW-style use: the filter's spectrum computed once, the plan applied block after block
    h = random_real((33,), "float64", 7)
    signal = random_real((1, 5000), "float64", 8)
    n, step = 256, 256 - 32
    plan = tfft.plan_convolve(n, h, dtype="float64")
    padded = np.concatenate([np.zeros((1, 32)), signal, np.zeros((1, n))], axis=1)
    blocks = [plan(padded[:, start:start + n])[:, 32:] for start in range(0, signal.shape[1] + 32, step)]
    y = np.concatenate(blocks, axis=1)[:, :signal.shape[1] + 32]
    assert relative_error(y, reference(signal, h, "full")) <= TOLERANCE["float64"]


def test_plans_pickle_with_their_filter():
    # it raised TVM's InternalError 'llvm is not binary serializable' (a plan holds its compiled pipeline)
    h = random_real((7,), "float64", 4)
    plan = tfft.plan_convolve(24, h, batch=2, dtype="float64")
    copy = pickle.loads(pickle.dumps(plan))
    x = random_real((2, 24), "float64", 5)
    assert copy is not plan and repr(copy) == repr(plan) and np.array_equal(copy(x), plan(x))


def test_filter_spectrum_is_computed_in_float64_and_rounded_once():
    h = random_real((70,), "float32", 9)  # longer than n: folded modulo n
    plan = tfft.plan_convolve(64, h, dtype="float32")
    folded = h.astype(np.float64)[:64].copy()
    folded[:6] += h[64:]
    exact = np.fft.rfft(folded) / 64
    assert np.array_equal(filter_spectrum(h, 64), np.fft.rfft(folded.reshape(1, 64).sum(axis=0)) / 64)
    got = plan.filter_spectrum
    assert np.array_equal(got.real, exact.real.astype(np.float32)) and np.array_equal(got.imag,
                                                                                     exact.imag.astype(np.float32))
    x = random_real((64,), "float32", 10)
    circular = np.fft.irfft(np.fft.rfft(x.astype(np.float64)) * exact * 64, 64)
    assert relative_error(plan(x)[0], circular) <= TOLERANCE["float32"]


@pytest.mark.parametrize("n, dtype, batch", [(2, "float64", 1), (64, "float32", 3), (1000, "float64", 2),
                                             (97, "float32", 2),  # odd, Rader
                                             (2018, "float32", 2),  # even, Rader of 1009
                                             (1438, "float64", 1),  # even, Bluestein of 719
                                             (1, "float32", 2)])
def test_circular_pipeline_on_guarded_buffers(n, dtype, batch):
    h = random_real((min(n, 11),), "float64", n)
    plan = tfft.plan_convolve(n, h, batch, dtype)
    x = guarded_array((batch, n), dtype)
    x.array[:] = random_real((batch, n), dtype, n + 1)
    out = guarded_array((batch, n), dtype, canary=-7.0)
    out.array[:] = 0
    plan.pipeline._function(to_tvm(x.array), to_tvm(out.array), *[tvm.runtime.tensor(c) for c in plan._constants])
    x.check_canaries("input")
    out.check_canaries("output")
    expected = np.fft.irfft(np.fft.rfft(x.array.astype(np.float64)) * np.fft.rfft(h, n), n)
    assert relative_error(out.array, expected) <= TOLERANCE[dtype]


def _filter_readers(plan) -> set[str]:
    """The blocks of the pipeline's TIR that read the filter's spectrum (rows 0..n//2 of `tables`)."""
    func = plan.pipeline.template
    tables = next(p for p in func.params if p.name == "tables")
    readers = set()

    def on_block(block):
        analyzer = tvm.sym.Analyzer()
        for iter_var in block.iter_vars:
            analyzer.bind(iter_var.var, iter_var.dom)
        for region in block.reads:
            if region.source.same_as(tables) and \
                    analyzer.const_int_bound(region.region[0].min).min_value <= plan.n // 2:
                readers.add(block.name_hint)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, on_block))
    return readers


@pytest.mark.parametrize("n", [1000, 1024, 999, 2018])
def test_the_product_is_fused_into_the_r2c_last_and_c2r_first_pass(n):
    plan = tfft.plan_convolve(n, np.ones(5), batch=2, dtype="float64")
    names = [p.name for p in plan.pipeline.passes.passes]
    fused = ["conv_edges", "conv_pairs"] if n % 2 == 0 else ["conv_dc", "conv_mirror"]
    # the r2c transform's passes, the fused ones, the c2r transform's: the r2c post-processing (even n) or copy
    # (odd n) and the c2r pre-processing become the fused passes, and no pass only multiplies
    r2c = [p.name for p in tfft.plan(n, 2, kind="r2c", dtype="complex128").passes.passes]
    c2r = [p.name for p in tfft.plan(n, 2, kind="c2r", dtype="complex128").passes.passes]
    forward, inverse = r2c[:-2 if n % 2 == 0 else -1], c2r[2:]
    assert names == forward + fused + inverse
    # in the TIR, only the fused passes' blocks read the filter's spectrum
    assert {name.split("_", 2)[2] for name in _filter_readers(plan)} == set(fused)
    assert "fused" in plan.describe()


def test_errors_name_the_argument():
    x, h = np.ones((2, 10)), np.ones(3)
    for bad_x, match in ((x + 1j, "x must be real"), (np.ones((2, 0)), "x must not be empty"),
                         (np.float64(1.0), "x must have at least one dimension")):
        with pytest.raises(ValueError, match=match):
            tfft.convolve(bad_x, h)
    for bad_h, match in ((h + 1j, "h must be real"), (np.ones(0), "h must not be empty"),
                         (np.ones((2, 3)), "h must be a 1-D filter")):
        with pytest.raises(ValueError, match=match):
            tfft.convolve(x, bad_h)
    with pytest.raises(ValueError, match="mode must be one of"):
        tfft.convolve(x, h, mode="circular")
    # an empty batch is an empty result along the other axes (it raised 'batch must be at least 1, got 0')
    for mode, count in (("full", 12), ("same", 10), ("valid", 8)):
        empty = tfft.convolve(np.ones((0, 10, 3), np.float32), h.astype(np.float32), axis=1, mode=mode)
        assert empty.shape == (0, count, 3) and empty.dtype == np.float32
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        tfft.convolve(x, h, axis=2)
    plan = tfft.plan_convolve(16, h, batch=2, dtype="float32")
    with pytest.raises(ValueError, match="x must be real for a real convolution plan"):
        plan(np.ones((2, 16), np.complex64))
    with pytest.raises(ValueError, match="x must be float32 .the plan's dtype., got float64"):
        plan(np.ones((2, 16)))
    with pytest.raises(ValueError, match=r"x must have shape \(2, m\) with 1 <= m <= 16"):
        plan(np.ones((2, 17), np.float32))
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        tfft.plan_convolve(16, h, dtype="complex64")
    with pytest.raises(ValueError, match="dtype must be float32 or float64, got None"):  # (was a float64 plan)
        tfft.plan_convolve(16, h, dtype=None)
    with pytest.raises(ValueError, match="n must be at least 1"):
        tfft.plan_convolve(0, h)
    with pytest.raises(ValueError, match="h must be real"):
        tfft.plan_convolve(16, h + 1j)
    # the pipeline's kind is planned with its filter only
    with pytest.raises(ValueError, match="kind must be one of 'c2c', 'r2c', 'c2r', got 'conv'"):
        tfft.plan(16, kind="conv")
    with pytest.raises(ValueError, match="kind='conv' has direction 'forward' and norm 'backward'"):
        FFTSpec(16, "conv", norm="ortho")



def test_long_double_is_refused_as_in_the_numpy_functions():
    """scipy.signal.fftconvolve computes long double exactly; the pipeline computes in float64, and took x and h
    of long double as float64 without a word (the numpy-like functions refuse them: numpy_api)."""
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("long double is double on this platform")
    x, h, long = np.arange(10.0), np.array([1.0, 1e-17]), np.dtype(np.longdouble)
    for bad_x, bad_h, name in ((x.astype(long), h, "x"), (x, h.astype(long), "h")):
        with pytest.raises(TypeError, match=f"{name} has dtype {long} .long double."):
            tfft.convolve(bad_x, bad_h)
    with pytest.raises(TypeError, match=f"h has dtype {long} .long double."):
        tfft.plan_convolve(16, h.astype(np.longdouble))

def test_a_tvm_tensor_x_or_h_is_refused_by_its_type():
    # numpy reads a TVM tensor as a 0-d object array: x was refused as 'x must be real (float or integer), got object'
    # and h as 'h must be a 1-D filter, got shape ()', for a float32 tensor of shape (8,)
    tensor = tvm.runtime.tensor(np.ones(8, np.float32))
    with pytest.raises(TypeError, match=r"x must be an array or array-like of numbers, got a TVM tensor, which numpy "
                                        r"cannot read: pass x.numpy\(\), or call a plan_convolve"):
        tfft.convolve(tensor, [1.0, 2.0])
    for call in (lambda: tfft.convolve(np.ones(8), tensor), lambda: tfft.plan_convolve(8, tensor)):
        with pytest.raises(TypeError, match=r"h must be an array or array-like of numbers, got a TVM tensor"):
            call()


CUDA_PIPELINES = [(64, 3, "float32"), (1000, 2, "float64"), (97, 2, "float32"),  # static shared memory
                  (8192, 2, "float32"),  # dynamic shared memory
                  (16384, 2, "float64")]  # one kernel per pass


@pytest.mark.parametrize("n, batch, dtype", CUDA_PIPELINES)
def test_cuda_pipeline_with_serialized_threads(n, batch, dtype):
    h = random_real((9,), "float64", 11)
    plan = tfft.plan_convolve(n, h, batch, dtype, target="cuda")
    assert plan.pipeline.kernels == (1 if n < 16384 else len(plan.pipeline.passes.passes))
    executable = tvm.compile(cuda_schedule_for_llvm(plan.pipeline.module), target="llvm")
    x = random_real((batch, n), dtype, 12)
    out = guarded_array((batch, n), dtype, canary=-7.0)
    out.array[:] = 0
    executable["main"](tvm.runtime.tensor(x), to_tvm(out.array), *[tvm.runtime.tensor(c) for c in plan._constants])
    out.check_canaries("output")
    expected = np.fft.irfft(np.fft.rfft(x.astype(np.float64)) * np.fft.rfft(h, n), n)
    assert relative_error(out.array, expected) <= TOLERANCE[dtype]


@pytest.mark.nvcc
@pytest.mark.parametrize("n, batch, dtype", [CUDA_PIPELINES[1], CUDA_PIPELINES[3]])
def test_cuda_pipeline_compiles_for_sm80_and_sm90(n, batch, dtype):
    plan = tfft.plan_convolve(n, np.ones(9), batch, dtype, target="cuda")
    for arch in ("sm_80", "sm_90"):
        usages = compile_cuda_source(plan.pipeline.cuda_source(arch), arch)
        assert len(usages) == 1 and usages[0].spill_store_bytes == 0 and usages[0].spill_load_bytes == 0


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES[:6] + CASES[13:15], ids=case_id)
def test_convolve_on_the_gpu(case):
    length, taps, mode, dtype, batch = case
    x = random_real((batch, length), dtype, seed=length)
    h = random_real((taps,), dtype, seed=taps + 1)
    y = tfft.convolve(x, h, mode=mode, target="cuda")
    assert relative_error(y, reference(x, h, mode)) <= TOLERANCE[dtype]


def test_plan_on_tvm_tensors_gives_a_tvm_tensor():
    h = random_real((5,), "float64", 13)
    plan = tfft.plan_convolve(48, h, batch=2, dtype="float32")
    x = random_real((2, 48), "float32", 14)
    y = plan(tvm.runtime.tensor(x))
    assert isinstance(y, tvm.runtime.Tensor) and np.array_equal(y.numpy(), plan(x))
    with pytest.raises(ValueError, match=r"x must be a \(2, 48\) float32 tensor"):
        plan(tvm.runtime.tensor(x[:, :40].copy()))
    out = tvm.runtime.tensor(np.full((2, 48), np.nan, "float32"))  # written in place, no allocation per call
    assert plan(tvm.runtime.tensor(x), out=out) is out and np.array_equal(out.numpy(), plan(x))
    with pytest.raises(ValueError, match=r"out must be a \(2, 48\) float32 tensor"):
        plan(tvm.runtime.tensor(x), out=tvm.runtime.tensor(np.zeros((2, 48), "float64")))
    with pytest.raises(ValueError, match="out is for TVM tensor inputs"):
        plan(x, out=out)


def test_calling_a_cuda_convolution_plan_without_a_gpu_says_so(monkeypatch):
    from tvm_tailsplit.fft import planner

    monkeypatch.setattr(planner, "gpu_available", lambda: False)
    p = tfft.plan_convolve(64, np.ones(3), 2, "float32", {"kind": "cuda", "arch": "sm_90"})
    with pytest.raises(RuntimeError, match="runs on a CUDA GPU"):
        p(np.zeros((2, 64), np.float32))
