"""`cuda.exact_float64_constants`: TVM 0.27's CUDA code generator prints a float64 constant as fixed-point text
with 15 decimals, so a double-precision kernel computed with 1/2879 as 0.000347342827370 (12 significant digits).
On an H100 the complex128 c2r plans of n = 97 and n = 2879 missed numpy by 4.5e-14 and 1.1e-12 relative (1e-14 is
due) while the same schedule on llvm was exact. The pass writes each constant whose text would not read back as
`__hiloint2double(hi, lo)` of its bits; the GPU tests of those plans (tests/fft/test_fft_cuda_one_kernel.py) pass
with it on the H100."""

import math
import re
import struct

import numpy as np
import pytest
import tvm

from tvm_tailsplit import fft
from tvm_tailsplit.cuda import CUDA_FLOAT64_DECIMALS, compile_cuda_source, exact_float64

HILO = re.compile(r"__hiloint2double\((-?\d+), (-?\d+)\)")


def _double(hi: int, lo: int) -> float:
    bits = ((hi & 0xFFFFFFFF) << 32) | (lo & 0xFFFFFFFF)
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _value(expr) -> float:
    if isinstance(expr, tvm.tirx.FloatImm):
        return expr.value
    assert expr.op.name == "tirx.call_pure_extern" and expr.args[0].value == "__hiloint2double", expr
    return _double(expr.args[1].value, expr.args[2].value)


VALUES = [0.0, 0.5, -0.25, 1.0, 1 / 2879, 1 / 97, math.sqrt(3) / 2, -math.pi, 1e-300, -2.5e-7, 123456.75,
          np.nextafter(1.0, 2.0), -np.nextafter(0.0, 1.0), 2.0**-1074 * 3, 1.7976931348623157e308]


@pytest.mark.parametrize("value", VALUES)
def test_exact_float64_is_the_value_itself(value):
    expr = exact_float64(value)
    assert expr.ty.dtype == "float64"
    assert _value(expr) == value and math.copysign(1, _value(expr)) == math.copysign(1, value)
    # the constant stays a constant exactly where its fixed-point text reads back as it
    reads_back = float(f"{value:.{CUDA_FLOAT64_DECIMALS}f}") == value
    assert isinstance(expr, tvm.tirx.FloatImm) == reads_back


def test_c2r_normalization_is_exact_in_the_cuda_source():
    """The 1/n of a complex128 c2r plan (n = 2879, one kernel per pass) appears with its exact bits, and no float64
    literal of the source is one that TVM's text rounded (each is a multiple of 2^-15 or so: 0.5, 0.0)."""
    plan = fft.plan(2879, batch=2, kind="c2r", direction="backward", dtype="complex128", target="cuda")
    source = plan.cuda_source("sm_90")
    constants = {_double(int(hi), int(lo)) for hi, lo in HILO.findall(source)}
    assert 1 / 2879 in constants
    literals = set(re.findall(rf"(?<![\w.])\d+\.\d{{{CUDA_FLOAT64_DECIMALS}}}(?![\w.])", source))
    assert literals and all(float(text) * 2**15 == int(float(text) * 2**15) for text in literals), literals


@pytest.mark.nvcc
def test_exact_constants_compile_with_nvcc():
    plan = fft.plan(97, batch=2, kind="c2r", direction="backward", dtype="complex128", target="cuda")
    source = plan.cuda_source("sm_90")
    assert HILO.search(source)
    (usage,) = compile_cuda_source(source, "sm_90")
    assert usage.spill_store_bytes == 0
