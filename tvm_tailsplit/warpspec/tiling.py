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

The persistent form's tile order (`hopper_group_rows`): its CTAs run consecutive tiles at once, a wave of them. In
row-major order a wave at 8192^3 (128 CTAs, 32 tiles a row) is 4 rows of tiles and every column: per K step it reads
4 x 128 rows of A and all 8192 rows of B. Grouped in bands of g rows, column by column in a band, a wave is g rows
by 128 / g columns of tiles and reads g x 128 rows of A and 128 / g x 256 rows of B, the fewest at
g = sqrt(128 x 256 / 128) = 16: 4096 rows instead of 8704 (the grouped order of Triton's and CUTLASS's GEMMs; the
rows a wave reads are what the 50 MB L2 must hold or refetch from memory).
"""

from __future__ import annotations

import math

from ..cuda import DEFAULT_MULTIPROCESSORS, FILL_FRACTION, SYMBOLIC_M, rule_intervals
from ..ir_utils import require_sizes

__all__ = ["HOPPER_BLOCK_M", "HOPPER_BLOCK_N", "hopper_block_n", "hopper_block_n_intervals", "hopper_ctas",
           "hopper_group_rows"]

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


def hopper_group_rows(tiles_m: int | None, ctas: int, block_n: int = HOPPER_BLOCK_N[0]) -> int:
    """The rows of tiles per group of the persistent Hopper GEMM's tile order (`examples.hopper_gemm_kernel`'s
    `group_rows`) for `tiles_m` rows of tiles (None: a symbolic M) and `ctas` CTAs of `HOPPER_BLOCK_M x block_n`
    tiles. Rule (module doc): a wave of `ctas` tiles in g rows reads `g * HOPPER_BLOCK_M + ctas / g * block_n` rows
    of A and B per K step, the fewest at g = sqrt(ctas * block_n / HOPPER_BLOCK_M); the power of two nearest it (on
    a log scale), at most `tiles_m`."""
    tiles_m, ctas, block_n = require_sizes("hopper_group_rows", ("tiles_m",), tiles_m=tiles_m, ctas=ctas,
                                           block_n=block_n)
    best = math.sqrt(ctas * block_n / HOPPER_BLOCK_M)
    rows = 2 ** round(math.log2(best))
    return rows if tiles_m is None else max(1, min(rows, tiles_m))
