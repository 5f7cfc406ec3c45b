"""`WarpSpecialize`: the tvm.transform.Pass wiring analysis, (optional) checking and code generation together.

A function containing blocks annotated with `warp_role` is analyzed (`analyze`), optionally checked (`check`,
debug mode) and replaced by the generated per-warp-role kernel for the target; other functions pass unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import tvm
import tvm_ffi
from tvm import tirx
from tvm.s_tir import SBlock

from ..cuda import MAX_THREADS_PER_BLOCK
from ..ir_utils import EMIT_INSN_PRAGMA, drop_loop_annotation, require_bools
from .analysis import analyze
from .check import check_protocol
from .codegen import generate
from .hopper import generate_hopper, hopper_protocol
from .tiles import FRAGMENT_STORE_MARK, tile_plan
from .tree import WARP_ROLE

__all__ = ["TARGETS", "WarpSpecialize", "WarpSpecializeCheckError", "has_warp_roles"]

logger = logging.getLogger("tvm_tailsplit.warpspec")


class WarpSpecializeCheckError(RuntimeError):
    """The debug-mode check found a problem in the generated protocol."""


def has_warp_roles(func: tirx.PrimFunc) -> bool:
    """True when some block (or loop: the analysis then rejects it by name) of `func` carries a `warp_role`
    annotation."""
    def marked(node):
        return tvm_ffi.VisitInterrupt(True) if WARP_ROLE in node.annotations else None

    return tvm_ffi.structural_walk(func.body, [(SBlock, marked), (tirx.For, marked)]) is not None


TARGETS = ("llvm", "cuda")


def _target_kind(target: object) -> str:
    """"llvm" or "cuda" from a target name or a `tvm.target.Target`, else a TypeError/ValueError."""
    if isinstance(target, tvm.target.Target):
        kind = target.kind.name
        if kind not in TARGETS:
            raise ValueError(f"WarpSpecialize supports the targets 'llvm' and 'cuda', not a Target of kind {kind!r}")
        return kind
    if not isinstance(target, str):
        raise TypeError(f"WarpSpecialize: target must be 'llvm' or 'cuda' (a str) or a tvm.target.Target, got "
                        f"{type(target).__name__} {target!r}")
    if target not in TARGETS:
        raise ValueError(f"WarpSpecialize supports the targets 'llvm' and 'cuda', not {target!r} (give the target "
                         "kind only; the CUDA architecture is chosen when compiling)")
    return target


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_options(kind: str, threads_per_role: object, debug_check: object, delay_us: object,
                   named_barriers: object, max_instances: object, hopper: object = False) -> None:
    """TypeError for an argument of the wrong type, ValueError for a value out of range or for the other target."""
    require_bools("WarpSpecialize", debug_check=debug_check, named_barriers=named_barriers, hopper=hopper)
    for name, value, least in (("delay_us", delay_us, 0), ("max_instances", max_instances, 1)):
        if not _is_int(value):
            raise TypeError(f"WarpSpecialize: {name} must be an int, got {type(value).__name__} {value!r}")
        if value < least:
            raise ValueError(f"WarpSpecialize: {name} must be at least {least}, got {value}")
    if threads_per_role is not None:
        if not isinstance(threads_per_role, Mapping):
            raise TypeError("WarpSpecialize: threads_per_role must be a dict from warp role (int) to thread count "
                            f"(int), got {type(threads_per_role).__name__} {threads_per_role!r}")
        for role, threads in threads_per_role.items():
            if not (_is_int(role) and _is_int(threads)):
                raise TypeError("WarpSpecialize: threads_per_role must map warp roles (int) to thread counts (int), "
                                f"got {role!r}: {threads!r} ({type(role).__name__}: {type(threads).__name__})")
            if threads <= 0 or threads % 32:
                raise ValueError("WarpSpecialize: threads_per_role must give whole warps (positive multiples of "
                                 f"32), got {threads} threads for warp role {role}")
            if threads > MAX_THREADS_PER_BLOCK:
                raise ValueError(f"WarpSpecialize: threads_per_role gives {threads} threads to warp role {role}; CUDA "
                                 f"runs at most {MAX_THREADS_PER_BLOCK} threads per block")
    cuda_only = [name for name, given in (("threads_per_role", threads_per_role is not None),
                                          ("named_barriers", named_barriers), ("hopper", hopper)) if given]
    if kind == "llvm" and cuda_only:
        verb = "apply" if len(cuda_only) > 1 else "applies"
        raise ValueError(f"WarpSpecialize: {' and '.join(cuda_only)} {verb} to the 'cuda' target only, not 'llvm'")
    if kind == "cuda" and delay_us:
        raise ValueError("WarpSpecialize: delay_us applies to the 'llvm' target only, not 'cuda'")
    if hopper and (named_barriers or threads_per_role is not None):
        raise ValueError("WarpSpecialize: hopper=True uses mbarrier transactions and one warpgroup (128 threads) per "
                         "warp role; do not give named_barriers or threads_per_role with it")


def _check_failure(func: tirx.PrimFunc, report: str) -> str:
    """The message of a failed debug check: the kernel (its global symbol) and the checker's report."""
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else "?"
    return f"WarpSpecialize debug_check: the protocol generated for kernel '{name}' is not safe: {report}"


@tirx.transform.prim_func_pass(opt_level=0, name="WarpSpecialize")
class _Specializer:
    """The function pass: replaces each function with `warp_role` blocks by its specialized kernel."""

    def __init__(self, kind: str, threads_per_role: dict[int, int] | None, debug_check: bool, delay_us: int,
                 named_barriers: bool, max_instances: int, hopper: bool = False):
        self.options = (kind, threads_per_role, debug_check, delay_us, named_barriers, max_instances, hopper)

    def transform_function(self, func: tirx.PrimFunc, mod: tvm.IRModule,
                           ctx: tvm.transform.PassContext) -> tirx.PrimFunc:
        kind, threads_per_role, debug_check, delay_us, named_barriers, max_instances, hopper = self.options
        if not has_warp_roles(func):
            return func
        analysis = analyze(func, max_instances=max_instances)
        if hopper:
            tiles = tile_plan(analysis.tree)
            if debug_check:
                report = check_protocol(hopper_protocol(analysis.small_protocol(), tiles))
                if not report.ok:
                    raise WarpSpecializeCheckError(_check_failure(func, report.describe()))
            return generate_hopper(hopper_protocol(analysis.protocol, tiles), tiles)
        if debug_check:
            report = check_protocol(analysis.small_protocol())
            if not report.ok:
                raise WarpSpecializeCheckError(_check_failure(func, report.describe()))
            logger.debug("WarpSpecialize debug check: %s", report.describe())
        func = generate(analysis.protocol, kind, threads_per_role, delay_us, named_barriers)
        # the generic forms run the fragment stores as the loops they are: their marks are consumed here
        return drop_loop_annotation(tvm.IRModule({"main": func}), EMIT_INSN_PRAGMA, FRAGMENT_STORE_MARK)["main"]


class _WarpSpecializePass(_Specializer):
    """The pass `WarpSpecialize` returns: a `PrimFuncPass`; called directly, it checks that it gets an IRModule."""

    def __call__(self, mod: tvm.IRModule) -> tvm.IRModule:
        if isinstance(mod, tirx.PrimFunc):
            raise TypeError("WarpSpecialize(...) transforms an IRModule, got a PrimFunc: call it on "
                            "tvm.IRModule({'main': func})")
        if not isinstance(mod, tvm.IRModule):
            raise TypeError(f"WarpSpecialize(...) transforms a tvm.IRModule, got {type(mod).__name__} {mod!r}")
        return super().__call__(mod)


def WarpSpecialize(  # noqa: N802 - TVM pass constructors are CamelCase
    target: str | tvm.target.Target = "llvm",
    threads_per_role: dict[int, int] | None = None,
    debug_check: bool = False,
    delay_us: int = 0,
    named_barriers: bool = False,
    max_instances: int = 4096,
    hopper: bool = False,
) -> tvm.transform.Pass:
    """Producer/consumer warp specialization of kernels with `warp_role` blocks.

    The accepted input form is documented in `tvm_tailsplit.warpspec.tree`; other kernels are rejected with an
    error naming the block (raised through TVM's FFI as a RuntimeError with the same message).

    `target` is "llvm" (roles as concurrent CPU threads synchronizing through atomics) or "cuda" (roles as thread
    ranges synchronizing through mbarriers, or named barriers with `named_barriers=True`; `threads_per_role`
    maps every role of the kernel to its thread count, a multiple of 32; without it every role gets 32; a role
    missing from it, or roles adding up to more than 1024, are refused when the pass runs; entries of roles a
    kernel does not have are not used, so that one dict serves every kernel of a module), or a
    `tvm.target.Target` of either kind.
    On llvm the roles must run at once: set
    `TVM_NUM_THREADS` to at least the number of roles before the first TVM call (TVM's pool has at most one thread
    per core); the generated function raises a RuntimeError saying so, instead of waiting forever, when TVM's pool
    has fewer threads than roles (`require_concurrent_threads` checks the same from Python).
    Long or symbolic pipeline trip counts are analyzed symbolically (`warpspec.symbolic`); `max_instances` bounds
    the unrolling of kernels whose symbolic analysis fails.
    `debug_check` runs `check` on the protocol (at small trip counts) and raises `WarpSpecializeCheckError` on any
    issue. `delay_us > 0` (llvm only) inserts a random delay of up to that many microseconds before every task.
    `hopper=True` (cuda, sm_90a) lowers TMA-shaped copy tasks to TMA transactions and GEMM-shaped tasks to wgmma
    with register accumulators (`warpspec.tiles`, `warpspec.transactions`, `warpspec.hopper`; every role one
    warpgroup); compile with `arch="sm_90a"`.
    Compile the CUDA result with `tir_pipeline=WARP_SPECIALIZED_PIPELINE` (TVM's default without ThreadSync).
    Arguments of the wrong type raise TypeError, values out of range or for the other target ValueError, when the
    pass is created; calling the pass on anything but an IRModule raises TypeError.
    """
    kind = _target_kind(target)
    _check_options(kind, threads_per_role, debug_check, delay_us, named_barriers, max_instances, hopper)
    return _WarpSpecializePass(kind, None if threads_per_role is None else dict(threads_per_role), debug_check,
                               delay_us, named_barriers, max_instances, hopper)
