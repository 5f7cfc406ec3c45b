"""numpy.fft and scipy.fft on the generated operator: the 1-D, 2-D and n-D transforms, hfft and helpers.

Algorithm: every function reduces its call to plans. A 1-D transform (fft, ifft, rfft, irfft, hfft, ihfft, and an
n-D transform of one axis) moves the axis last, expresses the other axes as one batch with an element stride and
a distance between transforms (no copy when the array allows it) and runs one cached `planner.plan` of the
(cropped or zero-padded) length `n`. An n-D transform of several axes crops or pads every transformed axis to
`s`, makes the array C-contiguous and runs one cached `ndim.plan_nd` over the axes in their order: c2c, r2c
(real input, the last axis halved) or c2r (output length `s[-1]` on the last axis). Hermitian transforms are
real ones of the conjugate with the normalization's direction swapped:
`hfft(x, n, norm) = irfft(conj(x), n, swap(norm))`, `ihfft(x, n, norm) = conj(rfft(x, n, swap(norm)))`, and
likewise hfftn/ihfftn over irfftn/rfftn.

Semantics are scipy.fft's (signatures `(x, n|s, axis|axes, norm, overwrite_x, workers, *, plan)`, plus numpy
2's `out=` as a keyword): float16, float32 and complex64 compute in complex64 (real outputs float32), other
numeric inputs (float64, integers, bool) in complex128; long double and complex long double inputs are refused
with a TypeError (the operator computes in float32/float64, and a silent downcast would lose the precision
the caller asked for; scipy computes them exactly, and the scipy backend leaves them to scipy); object and
non-numeric arrays are refused. Read-only inputs (np.memmap, np.frombuffer) are read without a copy.
`overwrite_x=True` lets a c2c transform write into `x` (in place) when x already has the computed dtype, is
writable and is not cropped or padded. `out=` receives the result (computed directly into it when its
layout allows, else copied with numpy's same-kind casting).

`workers` is the number of threads of TVM's CPU thread pool that the call uses (scipy's rule: negative values
count back from `os.cpu_count()`, -1 is every CPU; zero and values below `-os.cpu_count()` are refused). TVM's
pool is per calling thread and is configured through its `runtime.config_threadpool` function before the
call and restored after it; the pool never grows beyond its size (`TVM_NUM_THREADS`; unset, TVM takes half the
logical CPUs on x86, 1 thread on a 2-core machine without SMT), so larger values use the whole pool. None uses
the whole pool. TVM's pool threads do not survive a fork: in a forked child the operator runs on the calling
thread only (`TVM_NUM_THREADS=1` there). A program that the child executes (subprocess with preexec_fn,
pty.spawn, a forked worker's subprocesses) inherits that 1, but it starts a fresh pool: importing
tvm_tailsplit there gives it back the parent's TVM_NUM_THREADS (or none).

`next_fast_len(target, real=False)` is the smallest length at least `target` whose every pass over memory is a
Cooley-Tukey radix within the generator's radix limit (`tuning.RADIX_LIMIT`: prime factors 2, 3, 5, 7), so
that no Rader or Bluestein convolution and no large prime codelet runs; for real transforms the length is
also even (an even real transform is a complex one of half the length). `prev_fast_len` is the largest such
length at most `target`. fftshift, ifftshift, fftfreq and rfftfreq are numpy's.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import tvm
from numpy.fft import fftfreq, fftshift, ifftshift, rfftfreq

from .factor import odd_smooth, smallest_smooth
from .ndim import plan_nd
from .planner import plan as make_plan
from .spec import NORMS, REAL_DTYPES, FFTSpec, check_choice, check_int, check_length, first_overlap
from .tuning import RADIX_LIMIT

__all__ = [
    "fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "hfft2", "hfftn", "ifft", "ifft2", "ifftn", "ifftshift",
    "ihfft", "ihfft2", "ihfftn", "irfft", "irfft2", "irfftn", "next_fast_len", "prev_fast_len", "rfft", "rfft2",
    "rfftfreq", "rfftn",
]

logger = logging.getLogger("tvm_tailsplit.fft")

# ---- threads ----------------------------------------------------------------------------------------------------

_BIG_CORES = 1  # TVM's ThreadGroup::kBig, the affinity mode its pool starts in


class _PoolState(threading.local):
    """Whether this thread's TVM pool runs with a thread count other than its default (0: the default)."""

    threads = 0


_pool_state = _PoolState()
_in_forked_child = False


# carries the TVM_NUM_THREADS of the process that forked ("unset", or "set:" and the value) through a forked child
# into the programs it executes, which restore it
BEFORE_FORK = "TVM_TAILSPLIT_TVM_NUM_THREADS_BEFORE_FORK"


def _after_fork_in_child() -> None:
    """TVM's pool threads do not exist in a forked child; launching on them would wait forever: run serially.
    The parent's value is kept in `BEFORE_FORK` (a fork of a forked child keeps the first one)."""
    global _in_forked_child
    _in_forked_child = True
    if BEFORE_FORK not in os.environ:
        before = os.environ.get("TVM_NUM_THREADS")
        os.environ[BEFORE_FORK] = "unset" if before is None else f"set:{before}"
    os.environ["TVM_NUM_THREADS"] = "1"


def _restore_threads_after_exec() -> None:
    """At import, in a program executed by a forked child (a fresh process image, whose pool starts anew): the
    TVM_NUM_THREADS of the process that forked instead of the child's 1 (kept when the program was given another)."""
    before = os.environ.pop(BEFORE_FORK, None)
    if before is None or os.environ.get("TVM_NUM_THREADS") != "1":
        return
    if before.startswith("set:"):
        os.environ["TVM_NUM_THREADS"] = before.removeprefix("set:")
    else:
        del os.environ["TVM_NUM_THREADS"]


_restore_threads_after_exec()
os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_workers(workers: Any) -> int | None:
    """scipy's rule: None, a positive count, or a negative one counted back from os.cpu_count() (-1: all)."""
    if workers is None:
        return None
    workers = check_int("workers", workers)
    if workers == 0:
        raise ValueError("workers must not be zero")
    if workers < 0:
        cpus = os.cpu_count() or 1
        if workers < -cpus:
            raise ValueError(f"workers value out of range; got {workers}, must not be less than {-cpus}")
        workers += cpus + 1
    return workers


@contextlib.contextmanager
def _threads(workers: int | None) -> Iterator[None]:
    """Run the body with `workers` threads of the calling thread's TVM pool (None: the pool's default)."""
    if workers is None or _in_forked_child:
        yield
        return
    configure = tvm.get_global_func("runtime.config_threadpool")
    configure(_BIG_CORES, workers)
    _pool_state.threads = workers
    try:
        yield
    finally:
        configure(_BIG_CORES, 0)
        _pool_state.threads = 0


# ---- arguments --------------------------------------------------------------------------------------------------


def _norm(norm: str | None) -> str:
    """numpy's default normalization for None; a value that is not one of `NORMS` is a ValueError whatever its type,
    as in numpy and scipy (code that catches their ValueError catches this one)."""
    if norm is None:
        return "backward"
    if not isinstance(norm, str):
        raise ValueError(f"norm must be one of {', '.join(map(repr, NORMS))}, got {norm!r} ({type(norm).__name__})")
    return check_choice("norm", norm, NORMS)


def _swap(norm: str) -> str:
    """The normalization of the opposite direction (hfft is a forward transform computed as an inverse)."""
    return {"backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]


def _as_array(x: Any) -> np.ndarray:
    """`x` as a numpy array of a dtype the operator computes: TypeError for long double, object, non-numeric."""
    array = _as_numbers("x", x, ", or call a tvm_tailsplit.fft.plan(...) object, which takes TVM tensors")
    _check_computed_dtype("x", array.dtype)
    return array


def _as_numbers(name: str, value: Any, tensor_remedy: str = "") -> np.ndarray:
    """`value` as a numpy array (`np.asarray`); a TypeError naming the argument `name` and the value's type when numpy
    reads it as no numbers at all but wraps the object itself in a 0-d object array (a TVM tensor, whose float data
    numpy cannot see, None, any other object), where the dtype check would say only "got dtype object".
    `tensor_remedy` ends the advice for a TVM tensor (after "pass x.numpy()")."""
    array = np.asarray(value)
    if array.dtype == object and array.ndim == 0 and not isinstance(value, np.ndarray):
        if isinstance(value, tvm.runtime.Tensor):
            raise TypeError(f"{name} must be an array or array-like of numbers, got a TVM tensor, which numpy cannot "
                            f"read: pass {name}.numpy(){tensor_remedy}")
        kind = type(value)
        raise TypeError(f"{name} must be an array or array-like of numbers, got {kind.__module__}.{kind.__qualname__}")
    return array


def _check_computed_dtype(name: str, dtype: np.dtype) -> None:
    """TypeError naming the argument `name` unless the operator computes its `dtype`: long double, object and
    non-numeric dtypes are refused (the module doc says why)."""
    kind, size = dtype.kind, dtype.itemsize
    if kind not in "biufc":
        raise TypeError(f"{name} must be a numeric array, got dtype {dtype}")
    if (kind == "f" and size > 8) or (kind == "c" and size > 16):
        raise TypeError(f"{name} has dtype {dtype} (long double): the generated operator computes in complex64 or "
                        f"complex128 and would lose its precision; cast {name} to float64/complex128, or use "
                        f"scipy.fft, which computes long double exactly")


def _precision(array: np.ndarray) -> str:
    """scipy's rule: float16, float32 and complex64 compute in complex64, other numeric inputs in complex128. By
    kind and size, so that a byte order other than the machine's (`>f4`, e.g. read from a file) stays single."""
    kind, size = array.dtype.kind, array.dtype.itemsize
    return "complex64" if (kind == "f" and size <= 4) or (kind == "c" and size == 8) else "complex128"


def _overwrite(overwrite_x: Any) -> bool:
    """scipy's flag (any truth value). An array is refused by name: numpy.fft's 5th positional parameter is `out`,
    scipy's (and this module's) is `overwrite_x`, and numpy's `fft(x, n, axis, norm, out)` left `out` unwritten."""
    if isinstance(overwrite_x, np.ndarray):
        raise TypeError("overwrite_x must be a bool, got a numpy array: the 5th positional parameter is scipy's "
                        "overwrite_x, not numpy's out (pass out= as a keyword)")
    return bool(overwrite_x)


def _check_plan(plan: Any) -> None:
    if plan is not None:
        raise NotImplementedError("plan= is reserved, as in scipy.fft; call a tvm_tailsplit.fft.plan(...) object "
                                  "directly to reuse a plan")


def _axis(array: np.ndarray, axis: Any, name: str = "axis") -> int:
    axis = check_int(name, axis)
    if not -array.ndim <= axis < array.ndim:
        raise np.exceptions.AxisError(axis, array.ndim)
    return axis % array.ndim


def _length(n: Any, kind: str, points: int, axis: int) -> int:
    """The length of a 1-D transform of `kind` along `axis`, which holds `points` input points: `n`, or numpy's
    default (the points; 2·(m - 1) for c2r), which must be at least 1 (`spec.check_length`)."""
    if kind == "c2r":
        return check_length("n", n, 2 * (points - 1), f"2·(m - 1) for the m = {points} points along axis {axis}")
    return check_length("n", n, points, f"the length of axis {axis} of x")


def _resize(array: np.ndarray, size: int, axis: int) -> np.ndarray:
    """Crop (a view) or zero-pad `array` along `axis` to `size` (numpy's `n` argument)."""
    current = array.shape[axis]
    if current == size:
        return array
    if current > size:
        return array[(slice(None),) * axis + (slice(0, size),)]
    padding = [(0, 0)] * array.ndim
    padding[axis] = (0, size - current)
    return np.pad(array, padding)


def _shape_axes(array: np.ndarray, s: Any, axes: Any, real: bool = False) -> tuple[list[int], list[int] | None]:
    """scipy's n-D arguments: the transformed axes (non-negative, in order) and their lengths (None without s;
    -1 in `s` is that axis's input length). Without axes, the last len(s) axes (all axes without s). A `real`
    transform (r2c, c2r) needs at least one axis: its last one is the real one."""
    axes, sizes = _shape_axes_of(array, s, axes)
    if real and not axes:
        raise ValueError("at least 1 axis must be transformed (axes is empty)")
    return axes, sizes


def _shape_axes_of(array: np.ndarray, s: Any, axes: Any) -> tuple[list[int], list[int] | None]:
    """`_shape_axes` without the check of real transforms."""
    if axes is not None:
        axes = [axes] if _scalar(axes) else list(_sequence("axes", axes))
        axes = [_axis(array, a, "axes") for a in axes]
        if len(set(axes)) != len(axes):
            raise ValueError(f"all axes must be unique, got {tuple(axes)}")
    if s is None:
        return (list(range(array.ndim)) if axes is None else axes), None
    s = [s] if _scalar(s) else list(_sequence("s", s))
    for value in s:
        if check_int("s", value) != -1 and value < 1:
            raise ValueError(f"s must hold positive lengths (or -1 for the input's length), got {tuple(s)}")
    if axes is None:
        if len(s) > array.ndim:
            raise ValueError(f"s has {len(s)} entries, more than the {array.ndim} dimensions of x")
        axes = list(range(array.ndim - len(s), array.ndim))
    elif len(s) != len(axes):
        raise ValueError(f"s and axes must have the same length, got s={tuple(s)} and axes={tuple(axes)}")
    return axes, [array.shape[axis] if value == -1 else int(value) for axis, value in zip(axes, s, strict=True)]


def _scalar(value: Any) -> bool:
    """Whether an `s` or `axes` argument is one value (an integer, or a 0-d array, which `check_int` judges)."""
    return isinstance(value, (int, np.integer)) or (isinstance(value, np.ndarray) and value.ndim == 0)


def _sequence(name: str, value: Any) -> Sequence:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be an integer or a sequence of integers, got {value!r}")
    return value


# ---- running plans ----------------------------------------------------------------------------------------------


def _deliver(result: np.ndarray, out: Any) -> np.ndarray:
    """Copy `result` into `out` (numpy's same-kind casting) and return it; `result` when out is None."""
    if out is None or result is out:
        return result
    _check_out(out, result.shape, result.dtype)
    np.copyto(out, result, casting="same_kind")
    return out


def _check_out(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}, the result has shape {tuple(shape)}")
    if not np.can_cast(dtype, out.dtype, "same_kind"):
        raise TypeError(f"out has dtype {out.dtype}, the result ({dtype}) cannot be cast to it")
    if not out.flags.writeable:
        raise ValueError("out must be writable (it is a read-only array)")


def _flat(array: np.ndarray, axis: int) -> np.ndarray | None:
    """`array` with `axis` last and the other axes as one batch, as a view with positive whole-element strides
    (None when no such view exists, e.g. a field of records whose size is not a multiple of the field's). A
    transform of one point never steps along its axis, whose stride numpy leaves as it is (even negative, as in a
    flipped view) and ignores in its contiguity: it is set to one element."""
    moved = np.moveaxis(array, axis, -1)
    batch = math.prod(moved.shape[:-1])
    try:
        flat = moved.reshape((batch, moved.shape[-1]), copy=False)
    except ValueError:
        return None
    if flat.shape[1] == 1:
        flat = np.lib.stride_tricks.as_strided(flat, strides=(flat.strides[0], flat.itemsize))
    if any(s <= 0 or s % flat.itemsize for s in flat.strides[1 if batch == 1 else 0:]):
        return None
    return flat


def _rows_overlap(flat: np.ndarray) -> bool:
    """Whether rows of a flat view share memory (a writable `sliding_window_view`): the operator cannot write its
    transforms there (`spec.first_overlap`); numpy's copy into such an array is what the caller asked for."""
    return first_overlap(flat.shape[1], *_steps(flat), flat.shape[0]) is not None


def _steps(flat: np.ndarray) -> tuple[int, int]:
    """(element stride, distance between transforms) of a flat view, in elements."""
    stride = flat.strides[1] // flat.itemsize
    return stride, (flat.strides[0] // flat.itemsize if flat.shape[0] > 1 else stride * flat.shape[1])


def _along_axis(array: np.ndarray, axis: int, n: int, kind: str, direction: str, norm: str, dtype: str,
                out_shape: tuple[int, ...], out_dtype: str, out: Any, in_place: bool) -> np.ndarray:
    """One 1-D plan along `axis` over the batch of the other axes; the result written into `out` (or into
    `array` itself when `in_place`) directly when its layout allows. A batch whose buffers reach beyond the
    operator's 32-bit indices (`FFTSpec.transforms_per_call`) runs in parts of as many transforms as fit, its input
    first made contiguous where one strided transform alone reaches too far."""
    if array.size == 0:
        return _deliver(np.zeros(out_shape, out_dtype), out)
    request = FFTSpec(n, kind, direction, dtype=dtype)

    def rows_per_call(in_steps: tuple[int, int], out_steps: tuple[int, int] | None) -> int:
        """`FFTSpec.transforms_per_call` with these (stride, distance) steps (None: a compact output)."""
        return request.transforms_per_call(*in_steps, *(out_steps or (1, None)))

    flat = _flat(array, axis)
    if flat is None or rows_per_call(_steps(flat), None) == 0:
        array = np.moveaxis(np.ascontiguousarray(np.moveaxis(array, axis, -1)), -1, axis)
        flat, in_place = _flat(array, axis), False
    in_steps = _steps(flat)
    target, target_flat = None, None
    if in_place and not _rows_overlap(flat):
        target, target_flat = array, flat
    elif out is not None:
        _check_out(out, out_shape, np.dtype(out_dtype))
        candidate = _flat(out, axis) if out.dtype == out_dtype else None
        if candidate is not None and not np.may_share_memory(candidate, flat) and not _rows_overlap(candidate) and \
                (kind != "c2r" or n % 2 or candidate.strides[1] == candidate.itemsize) and \
                rows_per_call(in_steps, _steps(candidate)) > 0:
            target, target_flat = out, candidate
    batch = flat.shape[0]
    moved_shape = out_shape[:axis] + out_shape[axis + 1:] + (out_shape[axis],)
    if target is None:
        rows = rows_per_call(in_steps, None)
        if rows >= batch or rows == 0:  # (0: one transform reaches too far; the plan says so)
            result = make_plan(n, batch, kind, direction, norm, dtype, istride=in_steps[0], idist=in_steps[1])(flat)
            return _deliver(np.moveaxis(result.reshape(moved_shape), -1, axis), out)
        moved = np.empty(moved_shape, out_dtype)  # in parts, into a compact result
        target, target_flat = np.moveaxis(moved, -1, axis), moved.reshape(batch, moved_shape[-1])
    out_steps = _steps(target_flat)
    rows = rows_per_call(in_steps, out_steps)
    for first in range(0, batch, rows):
        last = min(batch, first + rows)
        make_plan(n, last - first, kind, direction, norm, dtype, istride=in_steps[0], idist=in_steps[1],
                  ostride=out_steps[0], odist=out_steps[1])(flat[first:last], target_flat[first:last])
    return _deliver(target, out)


def _ours(array: np.ndarray, source: np.ndarray) -> bool:
    """Whether `array` is a temporary of this call (a cast, padded or contiguous copy of `source`, the input as
    an array), free to be overwritten: memory that `source` does not share. `source` itself never is, even when
    it owns its memory: an array-like's `__array__` may hand over its own storage (a container of arrays)."""
    return not np.may_share_memory(array, source) and array.flags.writeable


def _contiguous_along(array: np.ndarray, axis: int) -> np.ndarray:
    """Even-size r2c reads real pairs: the transform axis must have unit stride (copy if it has not)."""
    if array.strides[axis] == array.itemsize:
        return array
    return np.moveaxis(np.ascontiguousarray(np.moveaxis(array, axis, -1)), -1, axis)


def _c2c(x, n, axis, norm, overwrite_x, workers, plan, out, direction) -> np.ndarray:
    _check_plan(plan)
    overwrite_x = _overwrite(overwrite_x)
    array = _as_array(x)
    axis = _axis(array, axis)
    dtype = _precision(array)
    n = _length(n, "c2c", array.shape[axis], axis)
    resized = _resize(array.astype(dtype, copy=False), n, axis)
    in_place = out is None and (_ours(resized, array) or
                                (overwrite_x and resized is array and array.flags.writeable))
    with _threads(_check_workers(workers)):
        return _along_axis(resized, axis, n, "c2c", direction, _norm(norm), dtype, resized.shape, dtype, out,
                           in_place)


def _r2c(x, n, axis, norm, workers, plan, out) -> np.ndarray:
    _check_plan(plan)
    array = _as_array(x)
    if array.dtype.kind == "c":
        raise TypeError(f"x must be real, got {array.dtype}")
    axis = _axis(array, axis)
    dtype = _precision(array)
    n = _length(n, "r2c", array.shape[axis], axis)
    resized = _resize(array.astype(REAL_DTYPES[dtype], copy=False), n, axis)
    if n % 2 == 0 and resized.size:
        resized = _contiguous_along(resized, axis)
    shape = resized.shape[:axis] + (n // 2 + 1,) + resized.shape[axis + 1:]
    with _threads(_check_workers(workers)):
        return _along_axis(resized, axis, n, "r2c", "forward", _norm(norm), dtype, shape, dtype, out, False)


def _c2r(x, n, axis, norm, workers, plan, out, conjugate=False) -> np.ndarray:
    _check_plan(plan)
    array = _as_array(x)
    axis = _axis(array, axis)
    dtype = _precision(array)
    n = _length(n, "c2r", array.shape[axis], axis)
    cast = array.astype(dtype, copy=False)
    resized = _resize(np.conjugate(cast) if conjugate else cast, n // 2 + 1, axis)
    shape = resized.shape[:axis] + (n,) + resized.shape[axis + 1:]
    with _threads(_check_workers(workers)):
        return _along_axis(resized, axis, n, "c2r", "backward", _norm(norm), dtype, shape, REAL_DTYPES[dtype], out,
                           False)


# ---- 1-D transforms ---------------------------------------------------------------------------------------------


def fft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None, overwrite_x: bool = False,
        workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.fft / numpy.fft.fft: the n-point DFT along `axis` (cropped or zero-padded to n)."""
    return _c2c(x, n, axis, norm, overwrite_x, workers, plan, out, "forward")


def ifft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None, overwrite_x: bool = False,
         workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.ifft / numpy.fft.ifft: the inverse n-point DFT along `axis`."""
    return _c2c(x, n, axis, norm, overwrite_x, workers, plan, out, "backward")


def rfft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None, overwrite_x: bool = False,
         workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.rfft / numpy.fft.rfft: the n//2 + 1 non-negative frequencies of a real input's DFT."""
    _overwrite(overwrite_x)
    return _r2c(x, n, axis, norm, workers, plan, out)


def irfft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None, overwrite_x: bool = False,
          workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.irfft / numpy.fft.irfft: n real points (2·(m - 1) unless n is given) from m frequencies."""
    _overwrite(overwrite_x)
    return _c2r(x, n, axis, norm, workers, plan, out)


def hfft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None, overwrite_x: bool = False,
         workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.hfft / numpy.fft.hfft: the real DFT of a Hermitian-symmetric signal given by its first half."""
    _overwrite(overwrite_x)
    return _c2r(x, n, axis, _swap(_norm(norm)), workers, plan, out, conjugate=True)


def ihfft(x: Any, n: int | None = None, axis: int = -1, norm: str | None = None, overwrite_x: bool = False,
          workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.ihfft / numpy.fft.ihfft: the inverse of hfft (n//2 + 1 points of a real input)."""
    _overwrite(overwrite_x)
    result = _r2c(x, n, axis, _swap(_norm(norm)), workers, plan, out)
    return np.conjugate(result, out=result)


# ---- n-D transforms ---------------------------------------------------------------------------------------------


def _nd(kind: str, direction: str, x: Any, s: Any, axes: Any, norm: str | None, overwrite_x: bool, workers: Any,
        plan: Any, out: Any, conjugate: bool = False) -> np.ndarray:
    """The n-D transforms: c2c, r2c (last axis halved) or c2r (last axis from its half) over `axes`."""
    _check_plan(plan)
    overwrite_x = _overwrite(overwrite_x)
    array = _as_array(x)
    if kind == "r2c" and array.dtype.kind == "c":
        raise TypeError(f"x must be real, got {array.dtype}")
    axes, sizes = _shape_axes(array, s, axes, real=kind != "c2c")
    norm = _norm(norm)
    workers = _check_workers(workers)
    if not axes:
        return _deliver(array.copy(), out)
    sizes = sizes or [None] * len(axes)
    for axis, size in zip(axes, sizes, strict=True):
        # like numpy, an axis transformed at its own length of no points is an error (c2r's last axis: below)
        if (array.shape[axis] if size is None else size) < 1 and not (kind == "c2r" and axis == axes[-1]):
            raise ValueError(f"invalid number of data points (0) along axis {axis} of x: a transform needs at least "
                             f"1 point (give s)")
    last = axes[-1]
    if kind == "c2r" and sizes[-1] is None and array.shape[last] < 2:
        raise ValueError(f"invalid number of data points ({2 * (array.shape[last] - 1)}): the last transformed axis "
                         f"({last}) has {array.shape[last]} input point(s), and the default output length is "
                         f"2·(m - 1); give s")
    if len(axes) == 1:
        one = {"c2c": _c2c, "r2c": _r2c, "c2r": _c2r}[kind]
        if kind == "c2c":
            return one(array, sizes[0], axes[0], norm, overwrite_x, workers, None, out, direction)
        if kind == "c2r":
            return one(array, sizes[0], axes[0], norm, workers, None, out, conjugate)
        return one(array, sizes[0], axes[0], norm, workers, None, out)
    dtype = _precision(array)
    lengths = [array.shape[a] if n is None else n for a, n in zip(axes, sizes, strict=True)]
    if kind == "c2r":
        lengths[-1] = 2 * (array.shape[last] - 1) if sizes[-1] is None else sizes[-1]
    cast = array.astype(REAL_DTYPES[dtype] if kind == "r2c" else dtype, copy=False)
    if conjugate:
        cast = np.conjugate(cast)
    resized = cast
    for axis, length in zip(axes, lengths, strict=True):
        stored = length // 2 + 1 if kind == "c2r" and axis == axes[-1] else length
        resized = _resize(resized, stored, axis)
    contiguous = np.ascontiguousarray(resized)
    in_place = kind == "c2c" and out is None and (
        _ours(contiguous, array) or (overwrite_x and contiguous is array and array.flags.writeable))
    out_dtype = REAL_DTYPES[dtype] if kind == "c2r" else dtype
    out_shape = list(contiguous.shape)
    if kind != "c2c":
        out_shape[axes[-1]] = lengths[-1] if kind == "c2r" else lengths[-1] // 2 + 1
    if contiguous.size == 0:
        return _deliver(np.zeros(out_shape, out_dtype), out)
    last_size = lengths[-1] if kind == "c2r" else None
    compute = plan_nd(contiguous.shape, tuple(axes), kind, direction, norm, dtype, last_size=last_size)
    target = contiguous if in_place else None
    if out is not None:
        _check_out(out, tuple(out_shape), np.dtype(out_dtype))
        if out.dtype == out_dtype and out.flags.c_contiguous and not np.may_share_memory(out, contiguous):
            target = out
    with _threads(workers):
        result = compute(contiguous, out=target)
    return _deliver(result, out)


def fftn(x: Any, s: Any = None, axes: Any = None, norm: str | None = None, overwrite_x: bool = False,
         workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.fftn / numpy.fft.fftn: the n-D DFT over `axes` (all, or the last len(s)), cropped/padded to s."""
    return _nd("c2c", "forward", x, s, axes, norm, overwrite_x, workers, plan, out)


def ifftn(x: Any, s: Any = None, axes: Any = None, norm: str | None = None, overwrite_x: bool = False,
          workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.ifftn / numpy.fft.ifftn: the inverse n-D DFT over `axes`."""
    return _nd("c2c", "backward", x, s, axes, norm, overwrite_x, workers, plan, out)


def rfftn(x: Any, s: Any = None, axes: Any = None, norm: str | None = None, overwrite_x: bool = False,
          workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.rfftn / numpy.fft.rfftn: the n-D DFT of a real input, the last axis halved (s[-1]//2 + 1)."""
    return _nd("r2c", "forward", x, s, axes, norm, overwrite_x, workers, plan, out)


def irfftn(x: Any, s: Any = None, axes: Any = None, norm: str | None = None, overwrite_x: bool = False,
           workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.irfftn / numpy.fft.irfftn: the inverse of rfftn (last axis 2·(m - 1) points unless s says)."""
    return _nd("c2r", "backward", x, s, axes, norm, overwrite_x, workers, plan, out)


def hfftn(x: Any, s: Any = None, axes: Any = None, norm: str | None = None, overwrite_x: bool = False,
          workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.hfftn: the n-D DFT of a Hermitian-symmetric input (its last axis halved): a real output."""
    return _nd("c2r", "backward", x, s, axes, _swap(_norm(norm)), overwrite_x, workers, plan, out, conjugate=True)


def ihfftn(x: Any, s: Any = None, axes: Any = None, norm: str | None = None, overwrite_x: bool = False,
           workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.ihfftn: the inverse of hfftn (a real input, the last axis halved)."""
    result = _nd("r2c", "forward", x, s, axes, _swap(_norm(norm)), overwrite_x, workers, plan, out)
    return np.conjugate(result, out=result)


def fft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, overwrite_x: bool = False,
         workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.fft2 / numpy.fft.fft2: fftn over the last two axes."""
    return fftn(x, s, axes, norm, overwrite_x, workers, plan=plan, out=out)


def ifft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, overwrite_x: bool = False,
          workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.ifft2 / numpy.fft.ifft2: ifftn over the last two axes."""
    return ifftn(x, s, axes, norm, overwrite_x, workers, plan=plan, out=out)


def rfft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, overwrite_x: bool = False,
          workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.rfft2 / numpy.fft.rfft2: rfftn over the last two axes."""
    return rfftn(x, s, axes, norm, overwrite_x, workers, plan=plan, out=out)


def irfft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, overwrite_x: bool = False,
           workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.irfft2 / numpy.fft.irfft2: irfftn over the last two axes."""
    return irfftn(x, s, axes, norm, overwrite_x, workers, plan=plan, out=out)


def hfft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, overwrite_x: bool = False,
          workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.hfft2: hfftn over the last two axes."""
    return hfftn(x, s, axes, norm, overwrite_x, workers, plan=plan, out=out)


def ihfft2(x: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None, overwrite_x: bool = False,
           workers: int | None = None, *, plan: Any = None, out: np.ndarray | None = None) -> np.ndarray:
    """scipy.fft.ihfft2: ihfftn over the last two axes."""
    return ihfftn(x, s, axes, norm, overwrite_x, workers, plan=plan, out=out)


_PARAMETERS = """

Parameters (scipy.fft's, with numpy 2's ``out``): `x` the input (an array or array-like; long double is a
TypeError, see the module doc);
{lengths};
`norm` "backward" (None, the default), "ortho" or "forward";
`overwrite_x` lets a c2c transform write into `x` when it already has the computed dtype, is writable and is not
cropped or padded (ignored otherwise; an array there is a TypeError: numpy's 5th positional parameter is `out`,
here a keyword); `workers` the threads of TVM's pool the call uses (negative: counted back
from `os.cpu_count()`; None: the whole pool); `plan` reserved, as in scipy.fft (anything but None raises
NotImplementedError: call a `tvm_tailsplit.fft.plan(...)` object to reuse a plan); `out` a numpy array of the
result's shape receiving it (numpy's same-kind casting), which is returned."""
_LENGTHS_1D = ("`n` the transform length along `axis` (x cropped or zero-padded to it; for irfft/hfft the output\n"
               "length, 2·(m - 1) for m input points by default); `axis` the transformed axis")
_LENGTHS_ND = ("`s` the lengths along `axes` (x cropped or zero-padded; for the real-output transforms the last is\n"
               "the output length, 2·(m - 1) by default); `axes` the transformed axes (default: all, or the last\n"
               "len(s); the 2-D forms: (-2, -1))")
for _function in (fft, ifft, rfft, irfft, hfft, ihfft):
    _function.__doc__ += _PARAMETERS.format(lengths=_LENGTHS_1D)
for _function in (fftn, ifftn, rfftn, irfftn, hfftn, ihfftn, fft2, ifft2, rfft2, irfft2, hfft2, ihfft2):
    _function.__doc__ += _PARAMETERS.format(lengths=_LENGTHS_ND)


# ---- fast lengths -----------------------------------------------------------------------------------------------

_FAST_PRIMES = tuple(p for p in (3, 5, 7) if p <= RADIX_LIMIT)


def next_fast_len(target: int, real: bool = False) -> int:
    """The smallest fast length >= target: prime factors 2, 3, 5, 7 only (every pass a radix within the radix
    limit, no Rader/Bluestein/large-prime codelet), and even for real transforms (whose complex transform is
    half as long); 1 stays 1."""
    target = check_int("target", target, 1)
    if target == 1:
        return 1
    low = 2 if real else 1
    # an even fast length is twice a fast length of at least half the target
    return low * smallest_smooth(-(-target // low), max(2, *_FAST_PRIMES))


def prev_fast_len(target: int, real: bool = False) -> int:
    """The largest fast length <= target (the rule of next_fast_len); 1 for target 1 (and real target 1)."""
    target = check_int("target", target, 1)
    low = 2 if real else 1
    # for each odd part, the largest power of two that keeps it within the target
    odds = odd_smooth(target // low, _FAST_PRIMES)
    return max((odd << ((target // odd).bit_length() - 1) for odd in odds), default=1)
