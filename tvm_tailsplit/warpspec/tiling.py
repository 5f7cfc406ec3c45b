"""The tiling rule of the Hopper GEMM (`examples.hopper_gemm_kernel`): its tile width `block_n` for a shape.

The tile is `HOPPER_BLOCK_M` rows (two consumer warpgroups of 64 rows) by `block_n` columns, one of
`HOPPER_BLOCK_N` (a wgmma `m64nNk16` with N = `block_n`, a `block_n x 64` TMA box of B, `block_n / 2` fragment
registers per consumer thread). Of those whose grid `ceildiv(M, HOPPER_BLOCK_M) * ceildiv(n, block_n)` fills the GPU
(at least `cuda.FILL_FRACTION x sms` CTAs, the mma.sync rule's measure too) the widest (most reuse of each loaded A
row), else the one with the most CTAs (ties: the narrowest, the least padded). A symbolic M is tiled as
`cuda.SYMBOLIC_M`, as the mma.sync rule does (one kernel for every M; the large ones carry the work). So a
decode-like M (1 to 128 rows) at N = 4096 gets 32-column tiles (128 CTAs on a 132-SM H100, each streaming its 32
rows of B once) instead of 16 CTAs of 128 x 256. `hopper_block_n_intervals` lists the intervals of M on which the
rule is one width (`examples.hopper_gemm_dispatch` builds one kernel per width, picked by M at launch).
"""

from __future__ import annotations

from ..cuda import DEFAULT_MULTIPROCESSORS, FILL_FRACTION, SYMBOLIC_M, rule_intervals
from ..ir_utils import require_sizes

__all__ = ["HOPPER_BLOCK_M", "HOPPER_BLOCK_N", "hopper_block_n", "hopper_block_n_intervals", "hopper_ctas"]

HOPPER_BLOCK_M = 128
"""Rule: the tile's rows are two consumer warpgroups' 64-row wgmma bands."""
HOPPER_BLOCK_N = (256, 128, 64, 32)
"""Rule: the tile widths, widest first: wgmma's largest N (256) halved down to 32, which already makes a single row
of tiles at N = 4096 (a decode-like M) 128 CTAs, enough to fill an H100."""


def hopper_ctas(m: int, n: int, block_n: int) -> int:
    """The CTAs of the Hopper GEMM's grid for an `m x n` output with `block_n`-wide tiles."""
    return -(-m // HOPPER_BLOCK_M) * -(-n // block_n)


def hopper_block_n(m: int | None, n: int, sms: int = DEFAULT_MULTIPROCESSORS) -> int:
    """The tile width `block_n` of the Hopper GEMM for `m` (None: symbolic) x `n` on `sms` multiprocessors (the
    module doc's rule)."""
    m, n, sms = require_sizes("hopper_block_n", ("m",), m=m, n=n, sms=sms)
    if m is None:
        return hopper_block_n(SYMBOLIC_M, n, sms)
    filling = [b for b in HOPPER_BLOCK_N if hopper_ctas(m, n, b) >= FILL_FRACTION * sms]
    if filling:
        return max(filling)
    return max(HOPPER_BLOCK_N, key=lambda b: (hopper_ctas(m, n, b), -b))


def hopper_block_n_intervals(n: int, sms: int = DEFAULT_MULTIPROCESSORS) -> list[tuple[int, int | None, int]]:
    """`hopper_block_n(m, n, sms)` over every M as `(first, last, block_n)` intervals (`cuda.rule_intervals`; the
    last one open, with the width of a symbolic M)."""
    return rule_intervals(lambda m: hopper_block_n(m, n, sms))
