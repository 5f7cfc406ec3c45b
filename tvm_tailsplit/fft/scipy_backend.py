"""The scipy.fft backend: `scipy.fft.set_backend(tvm_tailsplit.fft)` runs scipy.fft's transforms on the generated
operator.

Algorithm: scipy.fft dispatches every transform through uarray to the backends in the domain
`"numpy.scipy.fft"`; a backend is any object with `__ua_domain__` and `__ua_function__(method, args, kwargs)`,
which returns the result or `NotImplemented` to let the next backend (scipy's own) compute it. This module's
`__ua_function__` (re-exported by `tvm_tailsplit.fft`, which is the backend object) looks the method up by
name among the transforms of `numpy_api` (fft, ifft, rfft, irfft, hfft, ihfft and their 2-D and n-D forms) and
runs it with scipy's arguments; it returns NotImplemented for what the operator does not compute: the real
transforms (dct, dst and their n-D forms), fht, long double and complex long double inputs (scipy computes them
exactly), object and non-numeric arrays, array types other than numpy's (array-API arrays such as torch or
cupy), and `plan=` objects. `workers=None` reads scipy's own default (`scipy.fft.get_workers()`: 1, or the value
of an enclosing `scipy.fft.set_workers`), so that the backend keeps scipy's threading semantics.

Global use: `scipy.fft.set_global_backend(tvm_tailsplit.fft)` replaces scipy's own global backend, so the calls
this one declines raise uarray's `BackendNotImplementedError` unless scipy's is registered too:
`scipy.fft.register_backend("scipy")` (uarray tries the global backend, then the registered ones).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import numpy_api

__all__ = ["IMPLEMENTED", "__ua_domain__", "__ua_function__"]

__ua_domain__ = "numpy.scipy.fft"

IMPLEMENTED = {name: getattr(numpy_api, name) for name in (
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn",
    "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")}

_WORKERS_POSITION = 5  # (x, n|s, axis|axes, norm, overwrite_x, workers) in every scipy.fft transform


def _covered(x: Any) -> bool:
    """Whether the operator computes `x`: numpy arrays and array-likes of a numeric dtype it has."""
    if not isinstance(x, np.ndarray) and hasattr(x, "__array_namespace__"):
        return False
    try:
        numpy_api._as_array(x)
    except (TypeError, ValueError):
        return False
    return True


def __ua_function__(method: Any, args: tuple, kwargs: dict) -> Any:
    """Run the scipy.fft transform `method` on the generated operator with scipy's `args` and `kwargs`, or return
    NotImplemented (see module)."""
    function = IMPLEMENTED.get(getattr(method, "__name__", ""))
    if function is None or kwargs.get("plan") is not None:
        return NotImplemented
    x = args[0] if args else kwargs.get("x")
    if not _covered(x):
        return NotImplemented
    kwargs = dict(kwargs)
    if len(args) > _WORKERS_POSITION:
        workers = args[_WORKERS_POSITION]
        args = args[:_WORKERS_POSITION] + args[_WORKERS_POSITION + 1:]
    else:
        workers = kwargs.pop("workers", None)
    if workers is None:
        import scipy.fft

        workers = scipy.fft.get_workers()
    return function(*args, **kwargs, workers=workers)
