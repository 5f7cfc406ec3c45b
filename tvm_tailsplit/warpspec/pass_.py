"""`WarpSpecialize`: the tvm.transform.Pass wiring analysis, (optional) checking and code generation together.

A function containing blocks annotated with `warp_role` is analyzed (`analyze`), optionally checked (`check`,
debug mode) and replaced by the generated per-warp-role kernel for the target; other functions pass unchanged.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.s_tir import SBlock

from .analysis import analyze
from .check import check_protocol
from .codegen import generate
from .tree import WARP_ROLE

__all__ = ["WarpSpecialize", "WarpSpecializeCheckError", "has_warp_roles"]


class WarpSpecializeCheckError(RuntimeError):
    """The debug-mode check found a problem in the generated protocol."""


def has_warp_roles(func: tirx.PrimFunc) -> bool:
    """True when some block of `func` carries a `warp_role` annotation."""
    found = tvm_ffi.structural_walk(
        func.body, (SBlock, lambda b: tvm_ffi.VisitInterrupt(True) if WARP_ROLE in b.annotations else None))
    return found is not None


def WarpSpecialize(  # noqa: N802 - TVM pass constructors are CamelCase
    target: str = "llvm",
    threads_per_role: dict[int, int] | None = None,
    debug_check: bool = False,
    delay_us: int = 0,
    named_barriers: bool = False,
    max_instances: int = 4096,
) -> tvm.transform.Pass:
    """Producer/consumer warp specialization of kernels with `warp_role` blocks.

    The accepted input form is documented in `tvm_tailsplit.warpspec.tree`; other kernels are rejected with an
    error naming the block (raised through TVM's FFI as a RuntimeError with the same message).

    `target` is "llvm" (roles as concurrent CPU threads synchronizing through atomics) or "cuda" (roles as thread
    ranges synchronizing through mbarriers, or named barriers with `named_barriers=True`; `threads_per_role`
    maps each role to its thread count, a multiple of 32, default 32). On llvm the roles must run at once: set
    `TVM_NUM_THREADS` to at least the number of roles before the first TVM call (TVM's pool has at most one thread
    per core); the generated function raises a RuntimeError saying so, instead of waiting forever, when TVM's pool
    has fewer threads than roles (`require_concurrent_threads` checks the same from Python).
    Long or symbolic pipeline trip counts are analyzed symbolically (`warpspec.symbolic`); `max_instances` bounds
    the unrolling of kernels whose symbolic analysis fails.
    `debug_check` runs `check` on the protocol (at small trip counts) and raises `WarpSpecializeCheckError` on any
    issue. `delay_us > 0` (llvm only) inserts a random delay of up to that many microseconds before every task.
    Compile the CUDA result with `tir_pipeline=WARP_SPECIALIZED_PIPELINE` (TVM's default without ThreadSync).
    """
    if target not in ("llvm", "cuda"):
        raise ValueError(f"WarpSpecialize supports the targets 'llvm' and 'cuda', not {target!r}")

    def transform(func: tirx.PrimFunc, mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tirx.PrimFunc:
        if not has_warp_roles(func):
            return func
        analysis = analyze(func, max_instances=max_instances)
        protocol = analysis.protocol
        if debug_check:
            report = check_protocol(analysis.small_protocol())
            if not report.ok:
                raise WarpSpecializeCheckError(report.describe())
        return generate(protocol, target, threads_per_role, delay_us, named_barriers)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="WarpSpecialize")
