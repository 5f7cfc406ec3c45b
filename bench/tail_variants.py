"""The ways to compile one workload of ``tvm_tailsplit.split.workloads`` that the tail benchmark compares.

``build_variant(workload, variant, shape)`` gives, for the same tiling of the same computation:

- ``guarded``: TVM's default for the tiling, inner loop vectorized where ``sch.vectorize`` accepts it, no
  tensorize (the reference ``guarded_unvectorized`` is the same schedule without ``sch.vectorize``);
- ``pad_einsum``: padding to whole tiles (``sch.pad_einsum``, or by hand for a block that is not an einsum) +
  the marked schedule + ``tensorize_marked`` (no tail is left);
- ``loop_partition``: the guarded schedule with TVM's loop-partition hints;
- ``tailsplit``: TailSplit + ``tensorize_marked``;
- ``divisible``: the tensorized kernel on the nearest shape divisible by the tile (``useful_work`` scales its
  time to the irregular shape).

Every variant is built from the fields of the workload's ``Workload`` record alone.
"""

from __future__ import annotations

import math

import tvm
from tvm import s_tir, tirx

from tvm_tailsplit import TailSplit, tensorize_marked
from tvm_tailsplit.ir_utils import map_loops, with_loop
from tvm_tailsplit.split.workloads import WORKLOADS, register_workload_intrinsics, vectorize_copies

__all__ = ["REFERENCE_VARIANTS", "VARIANTS", "build_variant", "divisible_shape", "useful_work"]

VARIANTS = ("guarded", "pad_einsum", "loop_partition", "tailsplit", "divisible")
# also built by build_variant, timed by the benchmark as a reference: the guarded schedule without sch.vectorize
REFERENCE_VARIANTS = ("guarded_unvectorized",)


def divisible_shape(workload: str, shape: dict[str, int]) -> dict[str, int]:
    """The nearest shape whose tiled extents are multiples of the tile (ties round up)."""
    spec = WORKLOADS[workload]
    result = dict(shape)
    for axis, tile in zip(spec.tiled, spec.tile, strict=True):
        result[axis] = max(tile, tile * math.floor(shape[axis] / tile + 0.5))
    return result


def useful_work(workload: str, shape: dict[str, int]) -> float:
    """Points of ``shape`` over points of ``divisible_shape``: multiply the divisible kernel's time by this to
    compare it with kernels on ``shape``."""
    divisible = divisible_shape(workload, shape)
    return math.prod(shape.values()) / math.prod(divisible.values())


def _pad_einsum(workload: str, shape: dict[str, int]) -> tvm.IRModule:
    """Padding to whole tiles, then the same schedule and ``tensorize_marked`` (every marked region is a main
    tile)."""
    register_workload_intrinsics()
    spec = WORKLOADS[workload]
    if spec.pad_tile is None:
        return spec.pad_by_hand(**shape)
    sch = s_tir.Schedule(spec.compute(**shape))
    sch.pad_einsum(sch.get_sblock("C"), list(spec.pad_tile))
    spec.schedule(sch, mark=True, vectorize=False)
    vectorize_copies(sch, ("A_pad", "B_pad", "C_pad"))
    return tensorize_marked(sch.mod)


def _guarded(workload: str, shape: dict[str, int], partition_hint: bool) -> tvm.IRModule:
    spec = WORKLOADS[workload]
    sch = s_tir.Schedule(spec.compute(**shape))
    spec.schedule(sch, mark=False, vectorize=True)
    if partition_hint:
        # TVM's LoopPartition (in the default pipeline) splits hinted loops by the conditions in their body
        for loop in sch.get_loops(sch.get_sblock(spec.update_block)):
            if sch.get(loop).kind == tirx.ForKind.SERIAL and sch.get(loop).extent.value > 1:
                sch.annotate(loop, "pragma_loop_partition_hint", 1)
    return sch.mod


def _without_vectorize(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every vectorized loop serial again: what TVM compiles when the user does not call
    ``sch.vectorize`` (LLVM's own loop vectorizer may still vectorize it)."""
    return map_loops(mod, lambda loop: with_loop(loop, kind=tirx.ForKind.SERIAL)
                     if loop.kind == tirx.ForKind.VECTORIZED else loop)


def _tailsplit(workload: str, shape: dict[str, int]) -> tvm.IRModule:
    register_workload_intrinsics()
    return tensorize_marked(TailSplit()(WORKLOADS[workload].build(**shape)))


def build_variant(workload: str, variant: str, shape: dict[str, int]) -> tvm.IRModule:
    """The module of one benchmark variant, ready for ``tvm.compile`` (see the module docstring). For
    ``divisible`` the module computes ``divisible_shape(workload, shape)``."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; known: {sorted(WORKLOADS)}")
    builders = {
        "guarded": lambda: _guarded(workload, shape, partition_hint=False),
        "guarded_unvectorized": lambda: _without_vectorize(_guarded(workload, shape, partition_hint=False)),
        "loop_partition": lambda: _guarded(workload, shape, partition_hint=True),
        "pad_einsum": lambda: _pad_einsum(workload, shape),
        "tailsplit": lambda: _tailsplit(workload, shape),
        "divisible": lambda: _tailsplit(workload, divisible_shape(workload, shape)),
    }
    if variant not in builders:
        raise ValueError(f"unknown variant {variant!r}; known: {VARIANTS + REFERENCE_VARIANTS}")
    return builders[variant]()
