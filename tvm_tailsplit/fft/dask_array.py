"""FFTs of chunked dask arrays: numpy.fft's functions with the generated operator as the per-chunk kernel.

Algorithm: a 1-D transform along `axis` needs the whole axis in one chunk. When the array has more than one chunk
along it, the array is rechunked to one chunk along that axis (the other axes keep their chunks while a chunk stays
within dask's `array.chunk-size` or their chunk sizes are unknown, as after a boolean mask, else dask's "auto"
chunking picks them, so no chunk outgrows that size), then `dask.array.fft.fft_wrap` maps the kernel over the
blocks: each block is a batch of 1-D transforms run by the package's numpy-like function (`fft`, `ifft`, `rfft`,
`irfft`: a cached plan per block shape, compiled by the process that runs the block, so each worker of a distributed
cluster plans for itself). Multi-dimensional transforms are 1-D transforms axis by axis (numpy's definition: `fftn`
is `fft` along each axis; `rfftn` is `rfft` along the last axis then `fft` along the others; `irfftn` is `ifft`
along all axes but the last then `irfft` along it), each preceded by the rechunk it needs, so a 2-D transform of an
array larger than one worker's memory runs chunk by chunk: rows, an all-to-all rechunk, columns. `hfft` and `ihfft`
are numpy's compositions: `irfft` of the conjugate and the conjugate of `rfft`, with the normalization direction
swapped.

Types follow the package's numpy-like functions: complex64 (and float32 for real transforms) stays single
precision, other inputs compute in double precision. Arguments are checked when the graph is built (a wrong
type raises TypeError, a wrong value ValueError, naming the argument), not in the workers.

The per-chunk kernel is a `ChunkKernel`, a picklable object whose name (``tvm_tailsplit_fft`` etc.) is the
prefix of the task keys, so dask's dashboard and task graph show which blocks run the generated operator.
dask is imported when a function is called: the package imports without dask installed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .numpy_api import _axis, _check_computed_dtype, _length, _norm, _precision, _shape_axes, _swap
from .numpy_api import fft as _fft
from .numpy_api import ifft as _ifft
from .numpy_api import irfft as _irfft
from .numpy_api import rfft as _rfft
from .spec import REAL_DTYPES

__all__ = ["ChunkKernel", "fft", "fft2", "fftn", "hfft", "ifft", "ifft2", "ifftn", "ihfft", "irfft", "irfft2",
           "irfftn", "one_chunk_along", "rfft", "rfft2", "rfftn"]


class ChunkKernel:
    """The kernel dask maps over blocks: `function(block, n=n, axis=axis, norm=norm)`, one of the package's
    numpy-like 1-D functions. Named ``tvm_tailsplit_<function>`` (the prefix of its task keys); pickled by
    reference to the function, so a worker process imports the package and compiles its own plans."""

    def __init__(self, function: Callable[..., np.ndarray]) -> None:
        self.function = function
        self.__name__ = f"tvm_tailsplit_{function.__name__}"
        self.__doc__ = function.__doc__

    def __call__(self, block: np.ndarray, n: int | None, axis: int, norm: str | None) -> np.ndarray:
        return self.function(block, n=n, axis=axis, norm=norm)

    def __dask_tokenize__(self) -> tuple[str, str, str]:
        return (type(self).__qualname__, self.function.__module__, self.function.__qualname__)

    def __repr__(self) -> str:
        return f"ChunkKernel({self.function.__module__}.{self.function.__qualname__})"


# dask's fft_wrap kind -> the package's numpy-like function run on each block
_KERNELS = {"fft": _fft, "ifft": _ifft, "rfft": _rfft, "irfft": _irfft}


@functools.cache
def _wrapped(kind: str, dtype: str) -> Callable[..., Any]:
    """dask's `fft_wrap` of the kernel of `kind` with its output dtype given (dask would otherwise find it by
    running the kernel on a sample in the client)."""
    from dask.array.fft import fft_wrap

    return fft_wrap(ChunkKernel(_KERNELS[kind]), kind=kind, dtype=np.dtype(dtype))


def one_chunk_along(a: Any, axis: int) -> Any:
    """The dask array `a` with one chunk along `axis`: `a` itself when it has one, else rechunked. The other
    axes keep their chunks when the chunk they give stays within dask's `array.chunk-size` or when one of them
    has unknown chunk sizes (a masked selection); else they are chunked by dask's "auto" rule within that size."""
    import dask
    from dask.utils import parse_bytes

    axis = _axis(a, axis)
    if a.numblocks[axis] == 1:
        return a
    others = [max(chunks, default=0) for i, chunks in enumerate(a.chunks) if i != axis]
    chunk_bytes = a.shape[axis] * math.prod(others) * a.dtype.itemsize
    if math.isnan(chunk_bytes) or chunk_bytes <= parse_bytes(dask.config.get("array.chunk-size")):
        return a.rechunk({axis: -1})  # (nan: another axis has unknown chunk sizes, which dask cannot rechunk)
    return a.rechunk({i: -1 if i == axis else "auto" for i in range(a.ndim)})


def _as_dask(a: Any) -> Any:
    """`a` as a dask array of a dtype the operator computes (ImportError saying what to install when dask is
    missing; TypeError naming `a` for a dtype the per-chunk kernel refuses: `numpy_api._check_computed_dtype`)."""
    try:
        import dask.array as da
    except ImportError as error:
        raise ImportError(f"tvm_tailsplit.fft.dask_array needs dask.array ({error}); install it with "
                          "pip install 'tvm-tailsplit[dask]'") from error
    a = a if isinstance(a, da.Array) else da.asarray(a)
    _check_computed_dtype("a", a.dtype)  # (long double, object, strings: here, not in a worker)
    return a


def _transform(kind: str, a: Any, n: int | None, axis: int, norm: str | None) -> Any:
    """One 1-D transform of `kind` along `axis` of the dask array `a`, rechunked as needed."""
    a = _as_dask(a)
    axis = _axis(a, axis)
    norm = _norm(norm)
    if n is not None or not math.isnan(a.shape[axis]):
        # numpy's default length checked here, not in a worker (an axis of unknown length is left to dask)
        n = _length(n, "c2r" if kind == "irfft" else "c2c", a.shape[axis], axis)
    dtype = _precision(a)
    if kind == "rfft":
        if np.iscomplexobj(a):
            raise TypeError(f"a must be real for rfft, got {a.dtype}")  # (a wrong type, as numpy_api says)
        out_dtype = dtype
    else:
        out_dtype = REAL_DTYPES[dtype] if kind == "irfft" else dtype
    return _wrapped(kind, out_dtype)(one_chunk_along(a, axis), n, axis, norm)


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """numpy.fft.fft of a dask array (or array-like), each chunk by the generated operator."""
    return _transform("fft", a, n, axis, norm)


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """numpy.fft.ifft of a dask array, each chunk by the generated operator."""
    return _transform("ifft", a, n, axis, norm)


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """numpy.fft.rfft of a real dask array, each chunk by the generated operator."""
    return _transform("rfft", a, n, axis, norm)


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """numpy.fft.irfft of a dask array (n = 2·(m - 1) real points unless given), by the generated operator."""
    return _transform("irfft", a, n, axis, norm)


def hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """numpy.fft.hfft of a dask array: `irfft` of the conjugate with the normalization direction swapped."""
    return irfft(_as_dask(a).conj(), n, axis, _swap(_norm(norm)))


def ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """numpy.fft.ihfft of a real dask array: the conjugate of `rfft` with the normalization direction swapped."""
    return rfft(a, n, axis, _swap(_norm(norm))).conj()


def _nd_args(a: Any, s: Sequence[int] | None, axes: Sequence[int] | None,
             real: bool = False) -> tuple[list[int | None], list[int]]:
    """numpy's (s, axes) of an n-D transform (`numpy_api`'s rule) as (sizes, axes), a size None where the length
    along that axis is kept. A `real` transform (rfftn, irfftn) needs an axis (its last one is the real one)."""
    axes, sizes = _shape_axes(a, s, axes, real)
    return (sizes or [None] * len(axes)), axes


def _along_axes(kind: str, a: Any, sizes: list[int | None], axes: list[int], norm: str | None) -> Any:
    """1-D transforms of `kind` along `axes` (last first, as numpy), each rechunked as it needs."""
    for size, axis in zip(reversed(sizes), reversed(axes), strict=True):
        a = _transform(kind, a, size, axis, norm)
    return a


def _c2c_nd(kind: str, a: Any, s: Sequence[int] | None, axes: Sequence[int] | None, norm: str | None) -> Any:
    a = _as_dask(a)
    return _along_axes(kind, a, *_nd_args(a, s, axes), norm)


def fftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Any:
    """numpy.fft.fftn of a dask array: `fft` along each axis (last first), rechunked before each."""
    return _c2c_nd("fft", a, s, axes, norm)


def ifftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """numpy.fft.ifftn of a dask array: `ifft` along each axis (last first), rechunked before each."""
    return _c2c_nd("ifft", a, s, axes, norm)


def fft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """numpy.fft.fft2 of a dask array (`fftn` over the last two axes)."""
    return _c2c_nd("fft", a, s, axes, norm)


def ifft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """numpy.fft.ifft2 of a dask array (`ifftn` over the last two axes)."""
    return _c2c_nd("ifft", a, s, axes, norm)


def rfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """numpy.fft.rfftn of a real dask array: `rfft` along the last of `axes`, then `fft` along the others."""
    a = _as_dask(a)
    sizes, axes = _nd_args(a, s, axes, real=True)
    return _along_axes("fft", rfft(a, sizes[-1], axes[-1], norm), sizes[:-1], axes[:-1], norm)


def irfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Any:
    """numpy.fft.irfftn of a dask array: `ifft` along all of `axes` but the last, then `irfft` along it (with
    2·(m - 1) real points unless `s` gives the size)."""
    a = _as_dask(a)
    sizes, axes = _nd_args(a, s, axes, real=True)
    return irfft(_along_axes("ifft", a, sizes[:-1], axes[:-1], norm), sizes[-1], axes[-1], norm)


def rfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """numpy.fft.rfft2 of a real dask array (`rfftn` over the last two axes)."""
    return rfftn(a, s, axes, norm)


def irfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """numpy.fft.irfft2 of a dask array (`irfftn` over the last two axes)."""
    return irfftn(a, s, axes, norm)
