"""Helpers shared by the WarpSpecialize tests that run kernels on llvm."""

from __future__ import annotations

import numpy as np

from ..testing import guarded_array, to_tvm

__all__ = ["run_with_guarded_output"]


def run_with_guarded_output(executable, inputs: list[np.ndarray], out_shape: tuple[int, ...],
                            out_dtype: str = "float32") -> np.ndarray:
    """Call `executable["main"](*inputs, out)` with `out` zeroed inside canaries and return a copy of `out`.

    The inputs are passed zero-copy (64-byte aligned, e.g. from `guarded_array`). Raises `AssertionError` if the
    kernel wrote outside `out`.
    """
    out = guarded_array(out_shape, out_dtype, canary=-7.0)
    out.array[:] = 0
    executable["main"](*[to_tvm(x) for x in inputs], to_tvm(out.array))
    out.check_canaries("output")
    return out.array.copy()
