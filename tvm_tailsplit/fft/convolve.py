"""FFT convolution as one generated pipeline: `irfft(rfft(x)·ĥ)` with the product fused into its neighbours.

Algorithm: the circular convolution of length n, `y = x ⊛ h = IDFT_n(DFT_n(x)·DFT_n(h))`, for real x and h, is
one plan of kind "conv" (`spec.FFTSpec`; passes from `passes.build_passes`) whose passes over memory are:

* the passes of the r2c transform up to the complex transform of the n/2 pairs `Z = DFT_{n/2}(x[2j] + i·x[2j+1])`
  (n even; odd n: the full-length complex transform `X = DFT_n(x)`), built from the same derived codelets and
  twiddles as `plan(n, kind="r2c")`;
* ONE fused pass: the r2c post-processing `X[k] = E_k + ω_n^k·O_k`, `X[n/2-k] = conj(E_k - ω_n^k·O_k)`, the
  product with the filter's spectrum `Y[k] = X[k]·Ĥ[k]`, and the c2r pre-processing
  `Z'[k] = (Y[k] + conj Y[n/2-k]) + i·ω_n^-k·(Y[k] - conj Y[n/2-k])` of the same pair (k, n/2-k) (odd n: `Y[k] =
  X[k]·Ĥ[k]` with its Hermitian extension `Y[n-k] = conj Y[k]`). There is no pass that only multiplies: the
  product lives in the last pass of the forward transform, which is also the first of the inverse one;
* the passes of the c2r transform from Z' (`y[2j] + i·y[2j+1] = IDFT_{n/2}(Z')`), without a scale.

`Ĥ = DFT_n(h)/n` (h folded modulo n when it is longer) is computed in float64 and rounded once to the plan's
precision; it is the first constant table of the pipeline (offset 0, n//2 + 1 complex values, the twiddles
after it), passed at call time, so that one compiled pipeline (cached in the process and on disk by `plan`'s
machinery: `planner`, `cache`) serves every filter of its length, batch and target: a `ConvolvePlan` binds
one filter to it (FFTW's overlap-save use: plan once, apply to many blocks). On llvm the pipeline is one
PrimFunc call; on CUDA one kernel while its scratch fits in shared memory, else one kernel per pass.

`convolve(x, h, axis, mode)` is scipy.signal.fftconvolve for a real 1-D filter along one axis: modes "full"
(length Lx + Lh - 1), "same" (Lx, centred) and "valid" (|Lx - Lh| + 1). It keeps the outputs from `start`
(0, (Lh-1)//2 and min(Lx, Lh) - 1) on, which a circular convolution of length n computes without aliasing
when `n >= Lx + Lh - 1 - start` (full-convolution terms past n wrap onto indices below `Lx + Lh - 1 - n`), and
takes the smallest fast length (`numpy_api.next_fast_len(..., real=True)`: factors 2, 3, 5, 7, even) there.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import tvm

from .numpy_api import _as_numbers, _check_computed_dtype, _precision, next_fast_len
from .planner import Plan, _cached_plan, _resolve_target, _target_argument, _TargetKey
from .search import ROUNDS
from .spec import REAL_DTYPES, FFTSpec, check_choice, check_int

__all__ = ["MODES", "ConvolvePlan", "convolve", "plan_convolve"]

MODES = ("full", "same", "valid")
_COMPLEX = {real: name for name, real in REAL_DTYPES.items()}


def _real_dtype(name: str, dtype: Any) -> str:
    """`dtype` as "float32" or "float64": ValueError naming the argument otherwise."""
    try:
        if dtype is None:  # (numpy's dtype(None) is float64)
            raise TypeError
        dtype = np.dtype(dtype).name
    except TypeError:
        raise ValueError(f"{name} must be float32 or float64, got {dtype!r}") from None
    if dtype not in _COMPLEX:
        raise ValueError(f"{name} must be float32 or float64, got {dtype}")
    return dtype


def _real_filter(h: Any) -> np.ndarray:
    """`h` as a non-empty 1-D real numpy array (ValueError naming `h` otherwise; long double is a TypeError, as in
    `numpy_api`: the pipeline computes in float32/float64, and a silent downcast would lose its precision; so is an
    object numpy reads as no numbers, such as a TVM tensor: `numpy_api._as_numbers`)."""
    h = _as_numbers("h", h)
    if h.ndim != 1:
        raise ValueError(f"h must be a 1-D filter, got shape {h.shape}")
    if h.size == 0:
        raise ValueError("h must not be empty (a filter of 0 taps)")
    if np.iscomplexobj(h) or h.dtype.kind not in "fiub":
        raise ValueError(f"h must be real (float or integer), got {h.dtype}")
    _check_computed_dtype("h", h.dtype)
    return h


def filter_spectrum(h: np.ndarray, n: int) -> np.ndarray:
    """`DFT_n(h)/n` at k = 0..n//2, computed in float64 (h folded modulo n when longer than n)."""
    folded = np.zeros(-(-len(h) // n) * n)
    folded[:len(h)] = h
    return np.fft.rfft(folded.reshape(-1, n).sum(axis=0)) / n


class ConvolvePlan:
    """The circular convolution of length n with one real filter h, for `batch` rows: build it with
    `plan_convolve(n, h, ...)` and call it on many batches (overlap-save). The filter's spectrum is computed
    once (float64, rounded once); the compiled pipeline is shared by every filter of the same n, batch, dtype
    and target."""

    def __init__(self, pipeline: Plan, h: np.ndarray) -> None:
        self.pipeline = pipeline
        self.n, self.batch, self.dtype = pipeline.n, pipeline.batch, pipeline.real_dtype
        self.taps = len(h)
        self._filter = np.array(h)
        spectrum = filter_spectrum(h, self.n)
        tables, *others = pipeline.constants
        tables = tables.copy()
        tables[:len(spectrum), 0], tables[:len(spectrum), 1] = spectrum.real, spectrum.imag
        self._constants = [tables, *others]
        self._device_constants: dict[str, list] = {}

    @property
    def filter_spectrum(self) -> np.ndarray:
        """`DFT_n(h)/n` at k = 0..n//2 as the pipeline reads it (rounded once to its precision)."""
        table = self._constants[0][:self.n // 2 + 1]
        return table[:, 0] + 1j * table[:, 1]

    def describe(self) -> str:
        """The pipeline's plan (`Plan.describe`): its passes over memory show the fused product."""
        return f"convolution with a filter of {self.taps} taps, circular length {self.n}\n" + self.pipeline.describe()

    def _constant_tensors(self, device: tvm.runtime.Device) -> list:
        key = str(device)
        if key not in self._device_constants:
            self._device_constants[key] = [tvm.runtime.tensor(c, device) for c in self._constants]
        return self._device_constants[key]

    def _padded(self, x: Any) -> np.ndarray:
        """`x` as a contiguous (batch, n) array of the plan's dtype, zero-padded (ValueError naming x)."""
        x = np.asarray(x)
        if np.iscomplexobj(x):
            raise ValueError(f"x must be real for a real convolution plan, got {x.dtype}")
        if x.dtype != np.dtype(self.dtype):
            raise ValueError(f"x must be {self.dtype} (the plan's dtype), got {x.dtype}")
        if x.ndim == 1 and self.batch == 1:
            x = x[np.newaxis]
        if x.ndim != 2 or x.shape[0] != self.batch or not 1 <= x.shape[1] <= self.n:
            raise ValueError(f"x must have shape ({self.batch}, m) with 1 <= m <= {self.n}, got {x.shape}")
        if x.shape[1] == self.n and x.flags.c_contiguous:
            return x
        padded = np.zeros((self.batch, self.n), self.dtype)
        padded[:, :x.shape[1]] = x
        return padded

    def __call__(self, x: Any, out: tvm.runtime.Tensor | None = None) -> Any:
        """The circular convolution of length n of every row of x (shape (batch, m), m <= n, zero-padded; (m,)
        when batch is 1) with the filter: a (batch, n) array of the plan's dtype. A TVM tensor x of shape
        (batch, n) on the plan's device gives a TVM tensor there: `out` (same shape, dtype and device, written in
        place; device-resident pipelines pass it to avoid an allocation per call) or a new one."""
        pipeline = self.pipeline
        if isinstance(x, tvm.runtime.Tensor):
            for name, tensor in (("x", x), ("out", out)):
                if tensor is not None and (tuple(tensor.shape) != (self.batch, self.n)
                                           or str(tensor.dtype) != self.dtype):
                    raise ValueError(f"{name} must be a ({self.batch}, {self.n}) {self.dtype} tensor, got "
                                     f"{tuple(tensor.shape)} {tensor.dtype}")
            if out is None:
                out = tvm.runtime.empty((self.batch, self.n), self.dtype, x.device)
            pipeline.run(x, out, self._constant_tensors(x.device))
            return out
        if out is not None:
            raise ValueError("out is for TVM tensor inputs; with a numpy x the result is a new array")
        x = self._padded(x)
        if pipeline.is_cuda:
            pipeline._require_gpu()
            return self(tvm.runtime.tensor(x, tvm.cuda(0))).numpy()
        out = np.empty((self.batch, self.n), self.dtype)
        pipeline.run(x, out, self._constant_tensors(tvm.cpu(0)))
        return out

    def __reduce__(self):
        """Pickled as the arguments of `plan_convolve()` with its filter (it raised TVM's 'llvm is not binary
        serializable'): unpickling plans again, the pipeline loaded from the plan cache once compiled there."""
        return functools.partial(plan_convolve, self.n, self._filter, self.batch, self.dtype,
                                 _target_argument(self.pipeline.target)), ()

    def __repr__(self) -> str:
        return (f"ConvolvePlan(n={self.n}, taps={self.taps}, batch={self.batch}, dtype={self.dtype!r}, "
                f"target={self.pipeline.target.kind.name!r})")


def plan_convolve(n: int, h: Any, batch: int = 1, dtype: Any = "float32", target: Any = "llvm") -> ConvolvePlan:
    """The circular convolution of length n with the real filter h (longer filters fold modulo n) for `batch`
    rows of `dtype` (float32 or float64) on `target` ("llvm", "cuda" or a target): a `ConvolvePlan`.

    The pipeline is compiled once per (n, batch, dtype, target) and cached like `plan()`'s plans (in the process
    and, on llvm, on disk). Errors: ValueError naming the argument (a complex or empty filter, a dtype other
    than float32/float64, n or batch below 1)."""
    n = check_int("n", n, 1)
    batch = check_int("batch", batch, 1)
    h = _real_filter(h)
    spec = FFTSpec(n, "conv", dtype=_COMPLEX[_real_dtype("dtype", dtype)])
    input_layout, output_layout = spec.layouts(batch)
    pipeline = _cached_plan(spec, batch, _TargetKey(_resolve_target(target)), input_layout, output_layout,
                            "estimate", ROUNDS, None, None)
    return ConvolvePlan(pipeline, h)


def output_window(x_length: int, h_length: int, mode: str) -> tuple[int, int]:
    """(start, length) of scipy.signal.fftconvolve's output of `mode` within the full convolution."""
    full = x_length + h_length - 1
    if mode == "full":
        return 0, full
    if mode == "same":
        return (h_length - 1) // 2, x_length
    return min(x_length, h_length) - 1, abs(x_length - h_length) + 1


@functools.lru_cache(maxsize=256)
def convolution_length(x_length: int, h_length: int, mode: str) -> int:
    """The circular length of `convolve`: the smallest fast even length (2, 3, 5, 7 only) of at least
    `x_length + h_length - 1 - start` (the outputs from `start` on do not alias), 1 for 1-tap convolutions."""
    start, _ = output_window(x_length, h_length, mode)
    return next_fast_len(x_length + h_length - 1 - start, real=True)


def convolve(x: Any, h: Any, axis: int = -1, mode: str = "full", target: Any = "llvm") -> np.ndarray:
    """scipy.signal.fftconvolve(x, h, mode) along `axis` of x for a real 1-D filter h, on one generated
    pipeline (`ConvolvePlan`): every other axis of x is the batch.

    x and h are real; float16/float32 with float16/float32 computes in float32, anything else (float64,
    integers) in float64, as scipy. mode: "full", "same" or "valid". The result is a view into the pipeline's
    (batch, n) output; an empty batch (another axis of length 0) gives an empty result. Rows whose (batch, n)
    buffers reach beyond the pipeline's 32-bit indices (`FFTSpec.transforms_per_call`, over 8 GiB of float32) run in
    parts of as many rows as fit. target: as `plan_convolve`'s ("llvm", "cuda" or a target).
    Errors: ValueError naming the argument (complex or empty x or h, h not 1-D, a bad mode or axis; an argument of
    the wrong type, such as a non-integer axis or an x or h that numpy reads as no numbers (a TVM tensor), is a
    TypeError; so is a long double x or h, which the pipeline would compute in float64 while scipy computes it
    exactly: cast it to float64, or use scipy.signal.fftconvolve)."""
    mode = check_choice("mode", mode, MODES)
    h = _real_filter(h)
    x = _as_numbers("x", x, ", or call a plan_convolve(n, h, batch) object, which takes (batch, n) TVM tensors")
    if np.iscomplexobj(x) or x.dtype.kind not in "fiub":
        raise ValueError(f"x must be real (float or integer), got {x.dtype}")
    _check_computed_dtype("x", x.dtype)
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension")
    axis = check_int("axis", axis)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for x of {x.ndim} dimensions")
    if x.shape[axis] == 0:
        raise ValueError(f"x must not be empty along axis {axis}")
    # scipy.fft's rule: float16 and float32 compute in float32
    dtype = "float32" if _precision(x) == _precision(h) == "complex64" else "float64"
    rows = np.moveaxis(x, axis, -1)
    batch_shape, length = rows.shape[:-1], rows.shape[-1]
    start, count = output_window(length, len(h), mode)
    if math.prod(batch_shape) == 0:
        # an empty batch: no rows to convolve (and no pipeline of 0 rows to plan)
        return np.moveaxis(np.zeros((*batch_shape, count), dtype), -1, axis)
    n = convolution_length(length, len(h), mode)
    batch, flat = math.prod(batch_shape), rows.reshape(-1, length).astype(dtype, copy=False)
    # 0: one row alone reaches beyond 32-bit indices, which the plan refuses by name
    per_call = FFTSpec(n, "conv", dtype=_COMPLEX[dtype]).transforms_per_call() or batch
    if per_call >= batch:
        y = plan_convolve(n, h, batch, dtype, target)(flat)[:, start:start + count]
    else:  # rows beyond the pipeline's 32-bit indices: parts of as many rows as fit
        y = np.empty((batch, count), dtype)
        for first in range(0, batch, per_call):
            part = flat[first:first + per_call]
            y[first:first + per_call] = plan_convolve(n, h, len(part), dtype, target)(part)[:, start:start + count]
    return np.moveaxis(y.reshape(*batch_shape, count), -1, axis)
