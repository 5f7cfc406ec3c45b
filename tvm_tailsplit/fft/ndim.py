"""n-D FFTs as a graph of 1-D plans: one node per transformed axis, built and memory-planned by Relax.

Algorithm: the DFT of a d-dimensional array over a set of axes is the Kronecker product of the axes' DFT
matrices, `DFT_N0 ⊗ DFT_N1 = (DFT_N0 ⊗ I_N1)·(I_N0 ⊗ DFT_N1)`, so it is computed as one 1-D transform per
axis, one after the other (any order gives the same result up to rounding). A real-input transform (r2c)
runs its real transform on the last of `axes` first (which halves the data to n//2 + 1 complex points), then
complex ones on the others; the inverse (c2r) runs the complex ones first and the real one last. numpy's
`norm` over the product of the transformed lengths is the product of the axes' 1-D normalizations.

Node: for an axis k of the current shape S, the array is viewed as (A, N, B), A = S[0]·…·S[k-1],
B = S[k+1]·…·S[d-1]. The node is the 1-D plan (`planner.plan`) of A·B transforms of N points in the compact
layout, whose input and output buffers are then laid out by the schedule primitive `transform_layout`
(b, e, c) → (b // B, e, b % B, c): a two-level batch, in which the b-th transform is row (b // B, ·, b % B)
of the C-contiguous (A, N, B) array (A = 1 or B = 1 are the plain strided and compact layouts). For B > 1 the
plan's lane groups hold `tuning.STRIDED_LANES` consecutive b (`_node_lanes`), so that the lanes read 128
contiguous bytes of every row they touch (the 1-D plan's own choice, one vector or one transform per group,
ran 3 to 15 times slower at power-of-two B); the A·B/lanes lane groups are the independent parts of the node,
run in parallel as the plan's parallel tasks. Nothing is copied or permuted: a permute node per axis (numpy
transposes around the contiguous plan) was 5.7 to 6.7 times slower (bench/results/fft_ndim.md).

Graph: a Relax function `main(x, out)` whose bindings are, per node, zero-copy views (`R.memory.view`) of the
previous result as the node's buffer shapes and a call of the node's scheduled PrimFunc with its constant
tables as `R.const`. The first node writes the caller's `out` and every later c2c node transforms it in place
(`R.call_tir_inplace`; a node reads all of each transform before writing it), except in a c2r graph, whose
complex nodes work on an intermediate result (`R.call_tir`) that the last node transforms into `out`. Every
node depends on the one before (it reads all of its output). Relax's `StaticPlanBlockMemory` assigns the
intermediate results to storage before anything runs; `workspace_bytes` is that storage plus the largest node
scratch (one lane group's scratch times the plan's parallel tasks on llvm: the bound reached when every task
runs at once; or a multi-kernel CUDA plan's global scratch), all read from the IR. Out of place, a 3-D c2c
graph held two intermediate arrays; in place it holds none and ran 10-25% faster (64³, 100³, 16⁴, 1 thread).
The module is compiled with `relax.build`: the PrimFuncs go through the same TIR pipeline as a 1-D plan (on llvm
`lowering`'s, the complex-pair buffers of each PrimFunc named by its `PAIR_BUFFERS_ATTR`; on CUDA TVM's default
without ThreadSync, and without StorageRewrite when a node is one kernel; TIR's CSE off), and
the Relax VM runs the nodes in order; on CUDA its kernels are launched on one stream, so each node's kernels
start after the previous node's have finished (stream order). The graph runs as fast as its PrimFuncs called
one by one (`bench/bench_fft_ndim.py`). An llvm graph's executable is kept in the plan cache (`cache`), keyed by
`plan_nd`'s arguments: a later process loads it with its nodes' 1-D plans, and builds the graph's IR only on
demand (`describe`, the memory figures).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import relax, s_tir, tirx

from ..cuda import executable_cuda_source
from . import cache
from .lowering import PAIR_BUFFERS_ATTR, register_pipeline
from .planner import (
    _CUDA_MULTI_KERNEL_PIPELINE,
    CUDA_PIPELINE,
    Plan,
    _check_in_place,
    _check_writable_out,
    _resolve_target,
    _target_argument,
    _TargetKey,
    plan,
)
from .spec import (
    DIRECTIONS,
    KINDS,
    NORMS,
    REAL_DTYPES,
    _check_dtype,
    check_choice,
    check_int,
    check_length,
    requested_direction,
)
from .tuning import STRIDED_LANES

__all__ = ["NDPlan", "plan_nd"]

logger = logging.getLogger("tvm_tailsplit.fft")


@dataclass(frozen=True)
class Node:
    """One 1-D transform of the graph: `kind` along `axis` of the (A, N, B) view of its input (`view`), as the
    1-D `plan` of A·B transforms; `in_shape`/`out_shape` are the logical shapes before and after."""

    index: int
    axis: int
    kind: str
    n: int
    view: tuple[int, int, int]
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    plan: Plan

    @property
    def name(self) -> str:
        return f"node{self.index}_{self.kind}_axis{self.axis}"

    def buffer_shape(self, side: str) -> tuple[int, ...]:
        """The node's input or output buffer shape (floats; complex data has a trailing 2)."""
        layout = self.plan.input_layout if side == "input" else self.plan.output_layout
        a, _, b = self.view
        elements = layout.elements
        pair = (2,) if layout.kind == "complex" else ()
        if b == 1:
            return (a, elements) + pair
        return (a, elements, b) + pair if a > 1 else (elements, b) + pair

    @functools.cached_property
    def function(self) -> tirx.PrimFunc:
        """The 1-D plan's scheduled PrimFunc for this node's A·B transforms (a plan compiled for any batch,
        `Plan.symbolic_batch`, specialized to it)."""
        func = self.plan.module["main"]
        data = func.params[0]
        if isinstance(data.shape[0], tirx.IntImm):
            return func
        a, _, b = self.view
        static = tirx.decl_buffer((a * b, *data.shape[1:]), data.dtype, data.name, strides=data.strides,
                                  elem_offset=data.elem_offset, data_alignment=data.data_alignment,
                                  offset_factor=data.offset_factor)
        return func.specialize({func.params[0]: static})

    @functools.cached_property
    def parallel_tasks(self) -> int:
        """The extent of the plan's parallel loop over lane-group tasks (1 if none)."""
        extents = [1]

        def on_for(loop):
            if loop.kind == tirx.ForKind.PARALLEL:
                extents.append(int(loop.extent))

        tvm_ffi.structural_walk(self.function.body, (tirx.For, on_for))
        return max(extents)

    @property
    def scratch_bytes(self) -> int:
        """Scratch the node allocates while it runs: one lane group's scratch per parallel task on llvm; on CUDA
        the global scratch of a multi-kernel plan (a one-kernel plan's scratch is shared memory)."""
        if self.plan.is_cuda:
            return self.plan.workspace_bytes if self.plan.kernels > 1 else 0
        return self.plan.workspace_bytes * self.parallel_tasks


def _node_lanes(a: int, b: int, real_dtype: str) -> int | None:
    """Transforms per lane group of the (A, N, B) view (None: the 1-D plan's own choice, for B = 1).

    For B > 1 the transforms side by side in a group read consecutive complex values of each row: `STRIDED_LANES`
    of them, unless a group would then span two rows (A > 1 and B not a multiple), whose lanes' addresses are
    no longer a vector: then the largest power of two that divides B, at least 2 (else one transform per group).
    """
    if b == 1:
        return None
    lanes = STRIDED_LANES[real_dtype]
    if a == 1 or b % lanes == 0:
        return lanes
    while lanes > 1 and b % lanes:
        lanes //= 2
    return lanes


def _relaid_function(node: Node) -> tirx.PrimFunc:
    """The node's scheduled PrimFunc with its buffers laid out as the (A, N, B) view and its parameters in
    call_tir order: input, constant tables, output."""
    func = node.function
    a, _, b = node.view
    if b > 1:
        sch = s_tir.Schedule(func)
        for name in ("input", "output"):
            reader = _last_block_using(func, name)
            complex_data = len(next(p for p in func.params if p.name == name).shape) == 3
            if a > 1:
                mapping = (lambda t, e, c: (t // b, e, t % b, c)) if complex_data else (lambda t, e: (t // b, e, t % b))
            else:
                mapping = (lambda t, e, c: (e, t, c)) if complex_data else (lambda t, e: (e, t))
            sch.transform_layout(sch.get_sblock(reader), name, mapping)
        func = sch.mod["main"]
    params = list(func.params)
    params = [params[0], *params[2:], params[1]]
    pairs = set(node.plan._pair_buffers())
    if b > 1 and node.plan.input_layout.kind == "real_pairs":
        pairs.discard("input")  # the real and imaginary parts of a pair are B floats apart
    func = tirx.PrimFunc(params, func.body, func.ret_type, func.attrs)
    return func.with_attr(PAIR_BUFFERS_ATTR, sorted(pairs)).without_attr("global_symbol")


def _last_block_using(func: tirx.PrimFunc, name: str) -> str:
    """The name of a block that reads or writes the parameter `name` (a pass block, not a prefetch block)."""
    found: list[str] = []

    def on_block(block):
        if any(region.source.name == name for region in list(block.reads) + list(block.writes)):
            found.append(block.name_hint)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, on_block))
    return found[-1]


def _destination(node: Node, nodes: list[Node]) -> str:
    """Where a node writes: "in place" (a c2c node after the first), "out" (the first node, unless the graph ends
    with a c2r node, and the last node) or "an intermediate" (the first node of a c2r graph of several)."""
    if node.index > 0 and node.kind == "c2c":
        return "in place"
    return "out" if node is nodes[-1] or nodes[-1].kind != "c2r" else "an intermediate"


# Relax's BlockBuilder keeps its function scopes on one stack shared by every thread (a class attribute): graphs
# built by two threads at once pop each other's scopes ("BlockBuilder.current() must be self"), so one at a time
_BUILDER_LOCK = threading.Lock()


def _build_module(nodes: list[Node], in_shape: tuple[int, ...], out_shape: tuple[int, ...], real_dtype: str
                  ) -> tvm.IRModule:
    """The Relax graph `main(x, out)` of the nodes (module docstring): a c2c node after the first transforms
    its input in place; the first node writes `out` unless the graph ends with a c2r node."""
    with _BUILDER_LOCK:
        builder = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorType(in_shape, real_dtype))
        out = relax.Var("out", relax.TensorType(out_shape, real_dtype))
        with builder.function("main", [x, out], pure=False):
            current = x
            for node in nodes:
                function = builder.add_func(_relaid_function(node), node.name)
                source = builder.emit(relax.op.memory.view(current, node.buffer_shape("input")))
                constants = [relax.const(c, str(c.dtype)) for c in node.plan._constants]
                result_type = relax.TensorType(node.buffer_shape("output"), real_dtype)
                destination = {"in place": current, "out": out, "an intermediate": None}[_destination(node, nodes)]
                if destination is None:
                    current = builder.emit(relax.call_tir(function, [source, *constants], result_type))
                else:
                    target = builder.emit(relax.op.memory.view(destination, node.buffer_shape("output")))
                    current = builder.emit(relax.call_tir_inplace(function, [source, *constants, target],
                                                                  len(constants) + 1, result_type))
            builder.emit_func_output(out)
        return builder.get()


def _plan_memory(module: tvm.IRModule) -> tvm.IRModule:
    """Relax's lowering of call_tir to explicit allocations and its static memory planning."""
    return tvm.transform.Sequential([
        relax.transform.CallTIRRewrite(),
        relax.transform.StaticPlanBlockMemory(),
    ])(module)


def _storage_allocations(module: tvm.IRModule) -> list[int]:
    """The byte sizes of the storages that memory planning allocated in `main`."""
    sizes: list[int] = []
    alloc_storage = tvm.ir.Op.get("relax.memory.alloc_storage")

    def on_call(call):
        if isinstance(call, relax.Call) and call.op.same_as(alloc_storage):
            sizes.append(int(math.prod(int(v) for v in call.args[0].values)))

    tvm_ffi.structural_walk(module["main"].body, (relax.Call, on_call))
    return sizes


class NDPlan:
    """A compiled n-D FFT: the Relax graph of one 1-D plan per axis; build it with `plan_nd(...)`."""

    def __init__(self, shape: tuple[int, ...], axes: tuple[int, ...], kind: str, direction: str, norm: str,
                 dtype: str, target: tvm.target.Target, last_size: int | None) -> None:
        started = time.perf_counter()
        self.shape, self.axes, self.kind, self.direction, self.norm = shape, axes, kind, direction, norm
        self.dtype, self.target = dtype, target
        self.real_dtype = REAL_DTYPES[dtype]
        self.is_cuda = target.kind.name == "cuda"
        self.nodes = self._make_nodes(last_size)
        self.input_shape = shape
        self.output_shape = self.nodes[-1].out_shape
        self._input_floats = self._float_shape(self.input_shape, kind != "r2c")
        self._output_floats = self._float_shape(self.output_shape, kind != "c2r")
        # an llvm graph compiled before, by this process or another, is loaded from the plan cache (`cache`)
        self._cache_key = None if self.is_cuda else cache.plan_key(self._request(last_size), target)
        cached = cache.load(self._cache_key, entry_function="vm_load_executable") if self._cache_key else None
        if cached is None:
            self.executable = self._compile()
            if self._cache_key:
                cache.store(self._cache_key, self.executable, {}, [], tvm_ffi.structural_hash(self.planned_module))
        else:
            self.executable = cached.module
        self._vms = threading.local()  # the Relax VM of each calling thread (`_main`)
        self.build_seconds = time.perf_counter() - started
        logger.debug("%r: %d nodes, %s in %.2f s", self, len(self.nodes), "loaded" if cached else "built",
                     self.build_seconds)

    def _request(self, last_size: int | None) -> dict[str, Any]:
        """The graph's request as JSON values (the plan cache's key, with the target): the arguments of
        `plan_nd`, which decide its nodes' 1-D plans and the graph (a function of them and of the generator's
        sources, which the key hashes)."""
        return {"graph": "n-D", "shape": list(self.shape), "axes": list(self.axes), "kind": self.kind,
                "direction": self.direction, "norm": self.norm, "dtype": self.dtype, "last_size": last_size}

    # ---- the graph's IR, built on demand for a graph loaded from the plan cache ------------------------------
    @functools.cached_property
    def relax_module(self) -> tvm.IRModule:
        """The Relax graph `main(x, out)` of the nodes (module docstring)."""
        return _build_module(self.nodes, self._input_floats, self._output_floats, self.real_dtype)

    @functools.cached_property
    def planned_module(self) -> tvm.IRModule:
        """`relax_module` with its call_tir lowered to explicit allocations, memory-planned: what is compiled."""
        return _plan_memory(self.relax_module)

    @functools.cached_property
    def storage_bytes(self) -> list[int]:
        """The byte sizes of the storages that memory planning allocated for the intermediate results."""
        return _storage_allocations(self.planned_module)

    @staticmethod
    def _float_shape(shape: tuple[int, ...], complex_data: bool) -> tuple[int, ...]:
        return shape + (2,) if complex_data else shape

    def _make_nodes(self, last_size: int | None) -> list[Node]:
        axes, shape = self.axes, self.shape
        if self.kind == "c2c":
            steps = [(axis, "c2c", shape[axis]) for axis in axes]
        elif self.kind == "r2c":
            steps = [(axes[-1], "r2c", shape[axes[-1]])] + [(axis, "c2c", shape[axis]) for axis in axes[:-1]]
        else:
            steps = [(axis, "c2c", shape[axis]) for axis in axes[:-1]] + [(axes[-1], "c2r", last_size)]
        nodes, current = [], shape
        for index, (axis, kind, n) in enumerate(steps):
            a, b = math.prod(current[:axis]), math.prod(current[axis + 1:])
            direction = {"c2c": self.direction, "r2c": "forward", "c2r": "backward"}[kind]
            one_d = plan(n, a * b, kind, direction, self.norm, self.dtype, self.target,
                         lanes=_node_lanes(a, b, self.real_dtype) if not self.is_cuda else None)
            length = {"c2c": n, "r2c": n // 2 + 1, "c2r": n}[kind]
            after = current[:axis] + (length,) + current[axis + 1:]
            nodes.append(Node(index, axis, kind, n, (a, current[axis], b), current, after, one_d))
            current = after
        return nodes

    def _compile(self):
        if self.is_cuda:
            # the 1-D plans' pipelines, TVM's default without ThreadSync (the default's ThreadSync put barriers
            # inside the passes, or failed: "Cannot insert syncs inside condition"), and without StorageRewrite
            # where a node is one kernel (it merged scratch buffers of one pass: a race)
            one_kernel = any(node.plan.kernels == 1 for node in self.nodes)
            tir_pipeline = CUDA_PIPELINE if one_kernel else _CUDA_MULTI_KERNEL_PIPELINE
        else:
            tir_pipeline = register_pipeline(frozenset())
        finalize = tvm.transform.Sequential([
            relax.transform.LowerAllocTensor(),
            relax.transform.KillAfterLastUse(),
            relax.transform.LowerRuntimeBuiltin(),
            relax.transform.ComputePrimValue(),
            relax.transform.VMShapeLower(),
            relax.transform.AttachGlobalSymbol(),
        ])
        with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
            return relax.build(self.planned_module, target=self.target, relax_pipeline=finalize,
                               tir_pipeline=tir_pipeline)

    # ---- memory, read from the IR ----------------------------------------------------------------------
    @property
    def intermediate_bytes(self) -> int:
        """Bytes of the storages Relax's static memory planning allocates for the intermediate results."""
        return sum(self.storage_bytes)

    @property
    def workspace_bytes(self) -> int:
        """Memory the graph allocates while it runs: the intermediate results' planned storage plus the
        largest node scratch (the nodes run one after the other)."""
        return self.intermediate_bytes + max(node.scratch_bytes for node in self.nodes)

    # ---- calling ------------------------------------------------------------------------------------------
    def _float_view(self, name: str, array: Any, floats: tuple[int, ...], complex_data: bool) -> np.ndarray:
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{name} must be a numpy array, got {type(array).__name__}")
        expected_dtype = np.dtype(self.dtype if complex_data else self.real_dtype)
        logical = floats[:-1] if complex_data else floats
        if array.dtype != expected_dtype:
            raise ValueError(f"{name} must be {expected_dtype}, got {array.dtype}")
        if array.shape != logical:
            raise ValueError(f"{name} has shape {array.shape}, the plan expects {logical}")
        if not array.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")
        return array.view(self.real_dtype).reshape(floats)

    def __call__(self, x: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Run the graph on `x` (C-contiguous, `input_shape`, complex `dtype` or its float type for r2c);
        returns `out` (allocated when None): complex for c2c and r2c, real for c2r. `out` may be `x` itself for
        a c2c plan (in place); any other overlap is refused."""
        complex_in, complex_out = self.kind != "r2c", self.kind != "c2r"
        x_view = self._float_view("x", x, self._input_floats, complex_in)
        if out is None:
            out = np.empty(self.output_shape, self.dtype if complex_out else self.real_dtype)
        else:
            _check_writable_out(out)
        out_view = self._float_view("out", out, self._output_floats, complex_out)
        _check_in_place(x_view, out_view)
        if self.is_cuda:
            self.nodes[0].plan._require_gpu()
            device = tvm.cuda(0)
            out_tensor = tvm.runtime.empty(out_view.shape, self.real_dtype, device)
            self._main()(tvm.runtime.tensor(x_view, device), out_tensor)
            out_view[...] = out_tensor.numpy()
        else:
            wrap = self.nodes[0].plan._wrap
            self._main()(wrap(x_view), wrap(out_view))
        return out

    def _main(self):
        """The graph's function in this thread's Relax VM on the plan's device. A VM keeps its frames and program
        counter for one call at a time (threads calling one VM at once corrupted them: InternalError "Check failed:
        reg < frame->register_file.size()"), so every thread has its own, created at its first call and looked
        up once (a lookup costs more than a small transform)."""
        main = getattr(self._vms, "main", None)
        if main is None:
            device = tvm.cuda(0) if self.is_cuda else tvm.cpu(0)
            main = self._vms.main = relax.VirtualMachine(self.executable, device)["main"]
        return main

    def cuda_source(self) -> str:
        """The CUDA C++ of the graph's kernels, generated by TVM (a plan made with a CUDA target)."""
        if not self.is_cuda:
            raise ValueError("cuda_source needs a plan made with a CUDA target")
        return executable_cuda_source(self.executable)

    # ---- description ----------------------------------------------------------------------------------
    def describe(self) -> str:
        """The graph: nodes with their 1-D plans and views, dependences and memory."""
        lines = [
            f"n-D FFT plan: kind={self.kind} shape={self.input_shape} axes={self.axes} direction={self.direction} "
            f"norm={self.norm} dtype={self.dtype} target={self.target.kind.name}",
            f"input {self.input_shape}, output {self.output_shape}",
            f"graph: {len(self.nodes)} nodes, each depending on the one before (it reads all of its output)",
        ]
        for node in self.nodes:
            one_d = node.plan
            a, n, b = node.view
            depends = "the input x" if node.index == 0 else f"node {node.index - 1}"
            lines.append(
                f"  node {node.index}: {node.kind} n={node.n} along axis {node.axis}, view (A, N, B) = ({a}, {n}, "
                f"{b}): {a * b} transforms, reads {depends}, writes {_destination(node, self.nodes)} "
                f"{node.out_shape}")
            lines.append(f"    1-D plan: breakdown {one_d.tree}; {len(one_d.passes.passes)} passes, "
                         f"{one_d.lanes} lanes per group, {node.parallel_tasks} parallel tasks, scratch "
                         f"{node.scratch_bytes} bytes")
        lines.append(f"memory: intermediates {self.intermediate_bytes} bytes in {len(self.storage_bytes)} planned "
                     f"storage(s) {self.storage_bytes}; largest node scratch "
                     f"{max(node.scratch_bytes for node in self.nodes)} bytes; workspace {self.workspace_bytes} bytes")
        return "\n".join(lines)

    def __reduce__(self):
        """Pickled as the arguments of `plan_nd()` (it raised TVM's 'llvm is not binary serializable'): unpickling
        plans again, the graph and its 1-D plans loaded from the plan cache once compiled there."""
        last_size = self.output_shape[self.axes[-1]] if self.kind == "c2r" else None
        return functools.partial(plan_nd, self.shape, self.axes, self.kind, self.direction, self.norm, self.dtype,
                                 _target_argument(self.target), last_size=last_size), ()

    def __repr__(self) -> str:
        return (f"NDPlan(shape={self.shape}, axes={self.axes}, kind={self.kind!r}, direction={self.direction!r}, "
                f"norm={self.norm!r}, dtype={self.dtype!r}, target={self.target.kind.name!r})")


@functools.lru_cache(maxsize=64)
def _cached_plan_nd(shape, axes, kind, direction, norm, dtype, target: _TargetKey, last_size) -> NDPlan:
    return NDPlan(shape, axes, kind, direction, norm, dtype, target.target, last_size)


def _integers(name: str, value: Any) -> Sequence:
    """`value`, a sequence of integers (a tuple, list, range or 1-D numpy array, as numpy takes shapes and axes;
    its elements are checked by the caller): TypeError naming `name` for a string, a scalar or another type."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return value
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a sequence of integers, got {value!r} ({type(value).__name__})")
    return value


def plan_nd(shape: Sequence[int], axes: Sequence[int], kind: str, direction: str = "forward",
            norm: str = "backward", dtype: Any = "complex64", target: Any = "llvm", *,
            last_size: int | None = None) -> NDPlan:
    """Compile (once; cached by the validated arguments) the n-D FFT of an array of `shape` over `axes`.

    axes: distinct axes of `shape` (negative ones count from the end), in transform order. kind "c2c"; "r2c"
    (real input of the float type of `dtype`: the real transform along axes[-1], then complex ones along the
    others); "c2r" (complex input: complex transforms along axes[:-1], then the real one along axes[-1], whose
    output has `last_size` points, by default 2·(m - 1) for m input points; the input must have last_size//2 + 1
    points there). direction: "forward" or "backward" as in `plan()` (c2c; r2c is forward, c2r backward). norm:
    numpy's normalization over the product of the transformed lengths. dtype and target as in `plan()`. A wrong
    type raises TypeError, a wrong value ValueError, naming the argument.
    """
    shape = tuple(check_int(f"shape[{i}]", d, 1) for i, d in enumerate(_integers("shape", shape)))
    if not shape:
        raise ValueError("shape must have at least one dimension")
    axes = tuple(check_int(f"axes[{i}]", a) for i, a in enumerate(_integers("axes", axes)))
    if not axes:
        raise ValueError("axes must name at least one axis")
    if any(not -len(shape) <= a < len(shape) for a in axes):
        raise ValueError(f"axes {axes} must lie in [-{len(shape)}, {len(shape)}) for the {len(shape)} dimensions "
                         "of shape")
    axes = tuple(a % len(shape) for a in axes)  # negative axes count from the end, as numpy's
    if len(set(axes)) != len(axes):
        raise ValueError(f"axes must be distinct, got {axes}")
    kind = check_choice("kind", kind, KINDS)
    direction = check_choice("direction", direction, DIRECTIONS)
    direction = requested_direction(kind, direction)
    if kind == "r2c" and direction != "forward":
        raise ValueError("direction must be 'forward' for kind='r2c' (the inverse is kind='c2r')")
    norm = check_choice("norm", norm, NORMS)
    dtype = _check_dtype(dtype)
    if kind == "c2r":
        m = shape[axes[-1]]
        last_size = check_length("last_size", last_size, 2 * (m - 1),
                                 f"2·(m - 1) for the m = {m} complex points along axis {axes[-1]}")
        if last_size // 2 + 1 != m:
            raise ValueError(f"last_size={last_size} needs {last_size // 2 + 1} input points along axis {axes[-1]}, "
                             f"the shape has {m}")
    elif last_size is not None:
        raise ValueError(f"last_size is only for kind='c2r', got last_size={last_size!r} with kind={kind!r}")
    return _cached_plan_nd(shape, axes, kind, direction, norm, dtype, _TargetKey(_resolve_target(target)),
                           last_size)
