"""Small TIR utilities shared by the three wings (a leaf module: it imports TVM and numpy only).

- ``substitute``: variables replaced by expressions (keys compared by identity, as TVM's ``Var`` hashes).
- ``uses_var``: whether an expression or statement mentions a variable; ``touches``: whether it loads or stores a
  buffer; ``conjunction``: ``a and b and ...``.
- ``buffer_bytes``: the bytes of a buffer of constant shape.
- ``runtime_assert``: a host check raising ``RuntimeError``; ``host_if``: a thread-invariant ``if`` around kernels;
  ``with_root_body``: a block-form PrimFunc with another root body.
- ``has_unit_step``: a loop over every value of its range; ``launched_extent``: how many values a loop's
  variable takes when the kernel runs (a thread-bound loop of extent 0 still launches one).
- ``with_loop``: a ``For`` rebuilt with some of its fields changed (the others, annotations included, kept).
- ``map_loops``: every ``For`` of every PrimFunc of a module mapped by a function, innermost first.
- ``drop_loop_annotation``: a module without one loop annotation (e.g. ``EMIT_INSN_PRAGMA``, TailSplit's mark).
- ``checked_module_pass``: a module pass that refuses, by name, anything but an ``IRModule`` when called directly.
- ``require_module``: the same check for functions that take a module.
- ``require_sizes``: the sizes as ints (numpy integers taken, as numpy takes them), a ``ValueError`` naming the
  function and the argument unless each size is a positive integer;
  ``require_list``: a ``TypeError`` naming them unless a reports argument is a list or ``None``;
  ``require_bools``: the flags as bools, a ``TypeError`` naming them unless each is a bool (numpy's taken).
- ``default_passes``: the passes of TVM's default TIR pipeline under the current PassContext, read at run time;
  ``default_passes_with``: that list with passes of ours placed next to one of TVM's (pipelines that insert their
  own passes into TVM's instead of copying its list).
- ``dispatch_by_intervals``: one PrimFunc that runs, on each interval of a variable (a symbolic extent such as
  ``M``), the body of the function built for that interval: each body keeps its own kernels and launch shapes,
  and the host picks one by the variable's value; ``suffix_block_names``: a copy's blocks told apart.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir import _ffi_transform_api
from tvm.s_tir import SBlock, SBlockRealize

__all__ = [
    "EMIT_INSN_PRAGMA",
    "DispatchCase",
    "checked_module_pass",
    "buffer_bytes",
    "conjunction",
    "default_passes",
    "default_passes_with",
    "dispatch_by_intervals",
    "drop_loop_annotation",
    "has_unit_step",
    "host_if",
    "launched_extent",
    "map_loops",
    "require_bools",
    "require_list",
    "require_module",
    "require_prim_func",
    "require_sizes",
    "runtime_assert",
    "substitute",
    "suffix_block_names",
    "touches",
    "uses_var",
    "with_loop",
    "with_root_body",
    "annotations_as_pragma_attributes",
    "pragma_attributes_as_annotations",
]

# The loop annotation that maps the loop nest below it to one instruction (TVM's emit_insn pragma; TailSplit's mark).
EMIT_INSN_PRAGMA = "pragma_emit_insn"

_UNCHANGED = object()


def substitute(node: tvm.ir.Node, mapping: Mapping) -> tvm.ir.Node:
    """``node`` (an expression or a statement) with each variable that is a key of ``mapping`` replaced by its
    value; other variables are kept. Keys are compared by identity (``Var.same_as``)."""
    if not mapping:
        return node
    return tvm_ffi.structural_map(node, (tvm.ir.Var, lambda v: mapping.get(v, v)), order="post")


def uses_var(node: tvm.ir.Node, var: tirx.Var) -> bool:
    """Whether ``node`` (an expression or a statement) mentions ``var`` (compared by identity)."""
    hit = tvm_ffi.structural_walk(node, (tirx.Var, lambda v: tvm_ffi.VisitInterrupt(True) if v.same_as(var) else None))
    return hit is not None


def touches(node: tvm.ir.Node, buffer: tirx.Buffer) -> bool:
    """Whether ``node`` (a statement or an expression) loads from or stores to ``buffer`` (compared by identity)."""

    def hit(access: tvm.ir.Node) -> tvm_ffi.VisitInterrupt | None:
        accessed = access.buffer if isinstance(access, tirx.BufferStore) else access.source
        return tvm_ffi.VisitInterrupt(True) if accessed.same_as(buffer) else None

    return tvm_ffi.structural_walk(node, [(tvm.ir.TensorLoad, hit), (tirx.BufferStore, hit)]) is not None


def conjunction(exprs: list) -> tvm.ir.PrimExpr:
    """``exprs[0] and exprs[1] and ...`` (at least one expression)."""
    result = exprs[0]
    for expr in exprs[1:]:
        result = tirx.And(result, expr)
    return result


def buffer_bytes(buffer: tirx.Buffer) -> int:
    """The bytes of ``buffer`` (a constant shape)."""
    elements = 1
    for extent in buffer.shape:
        elements *= int(extent)
    return elements * tvm.DataType(buffer.dtype).bits // 8


def runtime_assert(condition: tvm.ir.PrimExpr, message: str) -> tirx.AssertStmt:
    """A run-time check in host code: raises ``RuntimeError`` with ``message`` where ``condition`` fails."""
    # The FFI constructor takes (condition, error kind, message parts), whatever the Python parameter names say.
    return tirx.AssertStmt(condition, tvm.ir.StringImm("RuntimeError"), [tvm.ir.StringImm(message)])


def with_root_body(func: tirx.PrimFunc, body: tirx.Stmt) -> tirx.PrimFunc:
    """``func`` (in block form: a root ``SBlockRealize``) with ``body`` as the body of its root block, the block's
    other fields kept."""
    realize = func.body
    root = realize.block
    block = SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body, root.init, root.alloc_buffers,
                   root.match_buffers, root.annotations)
    return func.with_body(SBlockRealize(realize.iter_values, realize.predicate, block))


def host_if(condition: tvm.ir.PrimExpr, body: tirx.Stmt) -> tirx.IfThenElse:
    """``if condition: body`` (no ``else``) in host code around kernels (thread-bound loops), its condition wrapped
    in ``tvm_thread_invariant``: TVM's ``ThreadSync`` refuses to place a barrier below a condition unless it is
    marked thread-invariant."""
    return tirx.IfThenElse(tirx.op.tvm_thread_invariant(condition), body, None)


def has_unit_step(loop: tirx.For) -> bool:
    """True for a loop over every value of its range (no ``step``, or step 1)."""
    return loop.step is None or (isinstance(loop.step, tirx.IntImm) and loop.step.value == 1)


def launched_extent(loop: tirx.For) -> tvm.ir.PrimExpr:
    """How many values ``loop``'s variable takes when the kernel runs: its extent, except for a loop bound to a
    launch dimension (``blockIdx.*``, ``threadIdx.*``), which TVM's CUDA runtime launches at least once: an extent
    that evaluates to 0 (a symbolic grid at size 0) launches 1 (``ThreadWorkLoad::Extract``), so the variable
    takes the value 0. Such a loop's extent becomes ``max(extent, 1)``."""
    binding = loop.thread_binding
    if loop.kind != tirx.ForKind.THREAD_BINDING or binding is None or \
            not binding.thread_tag.startswith(("blockIdx", "threadIdx")):
        return loop.extent
    if isinstance(loop.extent, tirx.IntImm):
        return loop.extent if loop.extent.value >= 1 else tirx.const(1, loop.extent.ty.dtype)
    return tirx.max(loop.extent, tirx.const(1, loop.extent.ty.dtype))


def with_loop(loop: tirx.For, *, loop_var=_UNCHANGED, min=_UNCHANGED, extent=_UNCHANGED,  # noqa: A002
              kind=_UNCHANGED, body=_UNCHANGED, thread_binding=_UNCHANGED, annotations=_UNCHANGED) -> tirx.For:
    """``loop`` rebuilt with the given fields changed (``loop_var``, ``min``, ``extent``, ``kind``, ``body``,
    ``thread_binding``, ``annotations``, as ``tirx.For`` names them); every field not given (annotations and step
    included) is kept."""

    def pick(value, current):
        return current if value is _UNCHANGED else value

    return tirx.For(
        pick(loop_var, loop.loop_var), pick(min, loop.min), pick(extent, loop.extent), pick(kind, loop.kind),
        pick(body, loop.body), pick(thread_binding, loop.thread_binding),
        dict(pick(annotations, loop.annotations)), loop.step,
    )


def map_loops(mod: tvm.IRModule, fn: Callable[[tirx.For], tirx.Stmt]) -> tvm.IRModule:
    """``mod`` with ``fn`` applied to every loop of every PrimFunc, innermost first (``fn`` sees its loop with
    the inner loops already mapped, and returns it unchanged, rebuilt or replaced); other functions and the
    module's attributes and global infos (a Relax module's ``vdevice`` list) are kept."""
    functions = {}
    for global_var, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, fn), order="post"))
        functions[global_var] = func
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)


def drop_loop_annotation(mod: tvm.IRModule, key: str, value: str | None = None) -> tvm.IRModule:
    """``mod`` without the loop annotation ``key`` (e.g. the marks, once no instruction is mapped: llvm codegen
    would otherwise warn about an unknown pragma on every marked loop), also where it is lowered past its block
    (``T.attr(loop_var, key, value)`` above the loop: ``pragma_attributes_as_annotations``); with ``value``, only
    where it has that value."""

    def drop(loop: tirx.For) -> tirx.For:
        if key not in loop.annotations or (value is not None and str(loop.annotations[key]) != value):
            return loop
        return with_loop(loop, annotations={k: v for k, v in loop.annotations.items() if k != key})

    def drop_lowered(node: tirx.AttrStmt) -> tirx.Stmt:
        loop = node.body
        if node.attr_key != key or not isinstance(loop, tirx.For) or not loop.loop_var.same_as(node.node):
            return node
        found = node.value.value if isinstance(node.value, tvm.ir.StringImm) else node.value
        return loop if value is None or str(found) == value else node

    functions = {}
    for global_var, func in map_loops(mod, drop).functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(tvm_ffi.structural_map(func.body, (tirx.AttrStmt, drop_lowered), order="post"))
        functions[global_var] = func
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)


def pragma_attributes_as_annotations(func: tirx.PrimFunc, key: str) -> tuple[tirx.PrimFunc, bool]:
    """``func`` with every ``T.attr(v, key, value)`` directly above the loop over ``v`` made that loop's annotation
    ``key`` again, and whether there was one. TVM's ``LowerOpaqueBlock`` lowers a loop annotation whose key starts
    with ``pragma_`` to that form (the marks of a module lowered past its blocks); ``annotations_as_pragma_attributes``
    lowers them back."""
    found = []

    def lift(node: tirx.AttrStmt) -> tirx.Stmt:
        loop = node.body
        if node.attr_key != key or not isinstance(loop, tirx.For) or not loop.loop_var.same_as(node.node):
            return node
        found.append(node)
        value = node.value.value if isinstance(node.value, tvm.ir.StringImm) else node.value
        return with_loop(loop, annotations={**loop.annotations, key: value})

    body = tvm_ffi.structural_map(func.body, (tirx.AttrStmt, lift), order="post")
    return (func.with_body(body), True) if found else (func, False)


def annotations_as_pragma_attributes(func: tirx.PrimFunc, key: str) -> tirx.PrimFunc:
    """``func`` with every loop annotation ``key`` lowered to ``T.attr(loop_var, key, value)`` above the loop, as TVM's
    ``LowerOpaqueBlock`` lowers a ``pragma_`` annotation (a str value becomes a ``StringImm``); the inverse of
    ``pragma_attributes_as_annotations``."""

    def lower(loop: tirx.For) -> tirx.Stmt:
        if key not in loop.annotations:
            return loop
        value = loop.annotations[key]
        value = tvm.ir.StringImm(value) if isinstance(value, str) else value
        bare = with_loop(loop, annotations={k: v for k, v in loop.annotations.items() if k != key})
        return tirx.AttrStmt(loop.loop_var, key, value, bare)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, lower), order="post"))


def require_bools(who: str, **flags: object) -> tuple[bool, ...]:
    """``flags`` as Python bools, in the order given: ``TypeError`` naming ``who`` and the argument unless each (by
    name) is a bool or a numpy bool (a flag computed by numpy, ``m > 16``); a string such as ``"yes"`` or an int is
    truthy, and would be taken silently."""
    checked = []
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{who}: {name} must be a bool, got {type(value).__name__} {value!r}")
        checked.append(bool(value))
    return tuple(checked)


def require_module(mod: object, who: str, argument: str = "mod") -> None:
    """Raise ``TypeError`` naming ``who`` and ``argument`` unless ``mod`` is a ``tvm.IRModule``."""
    if isinstance(mod, tvm.IRModule):
        return
    hint = " (wrap it: tvm.IRModule({'main': func}))" if isinstance(mod, tirx.PrimFunc) else ""
    raise TypeError(f"{who}: {argument} must be a tvm.IRModule, got {type(mod).__name__}{hint}")


def require_prim_func(func: object, who: str, argument: str = "func") -> None:
    """Raise ``TypeError`` naming ``who`` and ``argument`` unless ``func`` is a ``tirx.PrimFunc``."""
    if isinstance(func, tirx.PrimFunc):
        return
    hint = " (take one of its functions: mod['main'])" if isinstance(func, tvm.IRModule) else ""
    raise TypeError(f"{who}: {argument} must be a tirx.PrimFunc, got {type(func).__name__}{hint}")


def require_list(value: object, who: str, argument: str) -> None:
    """Raise ``TypeError`` naming ``who`` and ``argument`` unless ``value`` is a list or ``None`` (a list that a pass
    appends its reports to: checked when the pass is made, not when it has already run half-way)."""
    if value is not None and not isinstance(value, list):
        raise TypeError(f"{who}: {argument} must be a list (or None), got {type(value).__name__}")


def require_sizes(who: str, symbolic: tuple[str, ...] = (), *, least: int = 1,
                  **sizes: Any) -> tuple[int | None, ...]:
    """``sizes`` as Python ints, in the order given: a ``ValueError`` naming ``who`` and the argument unless each
    (by name) is an integer of at least ``least`` (1: a positive one; 0 for counts that may be empty), or ``None``, a
    symbolic size, for the names in ``symbolic``. An integer is anything with ``__index__`` but a bool, as numpy
    takes sizes (``np.int64(16)``, a size computed by numpy); the ints returned are what the caller builds with
    (TVM's FFI refuses numpy integers as schedule factors)."""
    kind = {0: "non-negative int", 1: "positive int"}.get(least, f"int of at least {least}")
    checked: list[int | None] = []
    for name, value in sizes.items():
        if value is None and name in symbolic:
            checked.append(None)
            continue
        try:
            size = None if isinstance(value, bool) else operator.index(value)
        except TypeError:
            size = None
        if size is None or size < least:
            raise ValueError(f"{who}: {name} must be a {kind}{' or None' if name in symbolic else ''}, got {value!r}")
        checked.append(size)
    return tuple(checked)


class _CheckedModulePass(tvm.transform.ModulePass):
    """A module pass whose direct call checks its argument (TVM's own call passes anything to C++, which fails
    with a raw FFI error for a PrimFunc or ``None``)."""

    def __init__(self, transform: Callable[[tvm.IRModule, tvm.transform.PassContext], tvm.IRModule], name: str):
        info = tvm.transform.PassInfo(0, name, [], False)
        self.__init_handle_by_constructor__(_ffi_transform_api.MakeModulePass, transform, info)

    def __call__(self, mod: tvm.IRModule) -> tvm.IRModule:
        require_module(mod, self.info.name)
        return super().__call__(mod)


def checked_module_pass(transform: Callable[[tvm.IRModule, tvm.transform.PassContext], tvm.IRModule],
                        name: str) -> tvm.transform.Pass:
    """``transform`` as a ``tvm.transform.ModulePass`` named ``name`` (opt level 0) that, called directly on
    anything but an ``IRModule``, raises a ``TypeError`` naming the pass; in a ``Sequential`` it is TVM's pass."""
    return _CheckedModulePass(transform, name)


_SEQUENTIAL_LOCK = threading.Lock()


class _Recording(threading.local):
    """The pass lists that `tvm.ir.transform.Sequential` records in this thread (None: it builds them)."""

    passes: list[list] | None = None


_recording = _Recording()


def default_passes() -> list[tvm.transform.Pass]:
    """The passes of TVM's default TIR pipeline under the current PassContext, in order.

    TVM builds the list inside its pipeline pass from the PassContext's config (optional passes such as CSE or
    StorageRewrite) and runs it as one `Sequential`: the list is read by running that pass on an empty module,
    in a PassContext with the same opt level and config (and no instruments, which would see a phantom run),
    while `tvm.ir.transform.Sequential` records its argument instead of running it. Only in the calling thread:
    the name is TVM's module attribute, which every thread reads, and another thread compiling meanwhile (a dask
    worker thread, a thread pool) gets a real `Sequential` (a recorded one would skip its lowering)."""
    pipeline, _, _ = tirx.get_tir_pipeline("default")
    current = tvm.transform.PassContext.current()
    recorded: list[list] = []

    def record_here(passes, *args, **kwargs):
        if _recording.passes is None:
            return sequential(passes, *args, **kwargs)
        _recording.passes.append(list(passes))
        return lambda mod: mod

    with _SEQUENTIAL_LOCK, tvm.transform.PassContext(
            opt_level=current.opt_level, config=dict(current.config), required_pass=list(current.required_pass),
            disabled_pass=list(current.disabled_pass)):
        sequential = tvm.ir.transform.Sequential  # (under the lock: TVM's class, not another call's recorder)
        tvm.ir.transform.Sequential = record_here
        _recording.passes = recorded
        try:
            pipeline(tvm.IRModule())
        finally:
            _recording.passes = None
            tvm.ir.transform.Sequential = sequential
    if len(recorded) != 1:
        raise RuntimeError(f"TVM's default TIR pipeline built {len(recorded)} Sequential pass lists instead of one; "
                           "tvm_tailsplit.ir_utils.default_passes needs updating for this TVM version")
    return recorded[0]


def default_passes_with(inserted: list[tvm.transform.Pass], *, before: str | None = None,
                        after: str | None = None) -> list[tvm.transform.Pass]:
    """``default_passes()`` with ``inserted`` placed right before the pass named ``before`` or right after the one
    named ``after`` (exactly one of them); ``RuntimeError`` naming that pass if TVM's list has none."""
    if (before is None) == (after is None):
        raise TypeError("default_passes_with needs exactly one of before and after")
    passes = default_passes()
    names = [p.info.name for p in passes]
    anchor = before if after is None else after
    if anchor not in names:
        raise RuntimeError(f"TVM's default TIR pipeline has no {anchor} pass (it runs {names}); the passes "
                           f"{[p.info.name for p in inserted]} cannot be placed")
    position = names.index(anchor) + (after is not None)
    passes[position:position] = inserted
    return passes


@dataclass(frozen=True)
class DispatchCase:
    """One case of ``dispatch_by_intervals``: ``func`` runs where ``first <= var <= last`` (``last=None``: no
    upper end). ``label`` names the case; it is appended to the names of the blocks of ``func`` (block names
    stay unique, as TVM's schedules need). Cases with equal labels must hold the same function: it runs on the
    union of their intervals, as one body."""

    first: int
    last: int | None
    label: str
    func: tirx.PrimFunc


def dispatch_by_intervals(var: tirx.Var, cases: Sequence[DispatchCase]) -> tirx.PrimFunc:
    """One PrimFunc over the first case's parameters whose body runs, for each case, the case's body under
    ``first <= var <= last``. The cases' functions must have one signature (parameter count, dtypes and
    extents, the variables of symbolic extents matched by position): each body is rewritten onto the first
    case's parameters (``var`` is a variable of the first case's, e.g. a symbolic extent of its parameters). The
    intervals must be in order, adjacent and end open (``last=None``); below the first one no body runs.
    Functions in block form (a root block with no annotations or match buffers) give one root block that
    allocates every case's buffers (TVM's planning places a shared-memory or local buffer inside its case, and
    merges the cases' global intermediates into one host allocation made before the cases, as large as the
    largest); the others are sequenced as they are. The cases' functions must have equal attributes: the result
    keeps them.

    Each case is its own ``host_if`` (no ``else``: TVM's simplification would turn an ``else`` into
    ``if not invariant(...)``, which is no longer marked thread-invariant).
    Once lowered, each case's thread-bound loops are kernels of their own, launched with that case's grid."""
    if not isinstance(var, tirx.Var):
        raise TypeError(f"dispatch_by_intervals: var must be a tirx.Var, got {type(var).__name__}")
    if not cases:
        raise ValueError("dispatch_by_intervals: no cases")
    for index, case in enumerate(cases):
        if not isinstance(case, DispatchCase) or not isinstance(case.func, tirx.PrimFunc):
            raise TypeError(f"dispatch_by_intervals: case {index} must be a DispatchCase holding a PrimFunc")
    params = list(cases[0].func.params)
    if not any(p.same_as(var) or any(uses_var(dim, var) for dim in _parameter_type(p)[1]) for p in params):
        raise ValueError(f"dispatch_by_intervals: var {var.name} is not a parameter of the first case's function, "
                         f"nor a variable of its parameters' extents ({', '.join(p.name for p in params)})")
    attrs = cases[0].func.attrs
    for index, case in enumerate(cases):
        if not tvm_ffi.structural_equal(case.func.attrs, attrs):
            raise ValueError(f"dispatch_by_intervals: the function of case {case.label!r} has the attributes "
                             f"{dict(case.func.attrs or {})}, not the first case's {dict(attrs or {})}")
        if case.last is not None and case.last < case.first:
            raise ValueError(f"dispatch_by_intervals: case {case.label!r} has an empty interval "
                             f"[{case.first}, {case.last}]")
        if index and cases[index - 1].last != case.first - 1:
            raise ValueError(f"dispatch_by_intervals: case {case.label!r} starts at {case.first}, not right after "
                             f"the previous case's end {cases[index - 1].last}")
        _parameter_map(case.func, params, case.label)
    if cases[-1].last is not None:
        raise ValueError(f"dispatch_by_intervals: the last case {cases[-1].label!r} ends at {cases[-1].last}; "
                         f"it must be open (last=None) so that every value of {var.name} runs a case")
    bodies: dict[str, tuple[tirx.PrimFunc, list]] = {}
    for case in cases:
        func, conditions = bodies.setdefault(case.label, (case.func, []))
        if not func.same_as(case.func):
            raise ValueError(f"dispatch_by_intervals: label {case.label!r} names two different functions")
        bounds = [tirx.IntImm(var.ty.dtype, case.first) <= var]
        if case.last is not None:
            bounds.append(var <= tirx.IntImm(var.ty.dtype, case.last))
        conditions.append(conjunction(bounds))
    rooted = [_root_block(func) is not None for func, _ in bodies.values()]
    if any(rooted) and not all(rooted):
        raise ValueError("dispatch_by_intervals: some functions are in block form (a root block) and some are not")
    allocations, statements = [], []
    for label, (func, conditions) in bodies.items():
        body = _renewed_body(func, params, label)
        if all(rooted):
            root = body.block
            if root.annotations or root.match_buffers:
                raise ValueError(f"dispatch_by_intervals: the root block of case {label!r} has annotations or "
                                 f"match buffers, which one merged root block would lose")
            allocations.extend(root.alloc_buffers)
            body = suffix_block_names(root.body, f"_{label}")
        condition = conditions[0]
        for other in conditions[1:]:
            condition = tirx.Or(condition, other)
        statements.append(host_if(condition, body))
    body = statements[0] if len(statements) == 1 else tirx.SeqStmt(statements)
    if all(rooted):
        body = SBlockRealize([], tirx.const(True, "bool"), SBlock([], [], [], "root", body, None, allocations))
    return cases[0].func.with_body(body)


def _parameter_map(func: tirx.PrimFunc, params: list, label: str) -> dict:
    """``func``'s parameters, and the variables of their shapes, mapped onto ``params`` (the first case's); a
    ``ValueError`` naming the case and the parameter where the two signatures differ."""

    def refuse(why: str):
        raise ValueError(f"dispatch_by_intervals: the function of case {label!r} does not have the first case's "
                         f"signature ({', '.join(p.name for p in params)}): {why}")

    if len(func.params) != len(params):
        refuse(f"{len(func.params)} parameters, not {len(params)}")
    mapping: dict = {}
    for mine, theirs in zip(func.params, params, strict=True):
        (my_dtype, my_shape), (their_dtype, their_shape) = _parameter_type(mine), _parameter_type(theirs)
        if my_dtype != their_dtype or len(my_shape) != len(their_shape):
            refuse(f"parameter {mine.name} is {my_dtype}{list(my_shape)}, not {their_dtype}{list(their_shape)}")
        mapping[mine] = theirs
        for my_dim, their_dim in zip(my_shape, their_shape, strict=True):
            # the extent's variables not mapped yet (``n`` of ``n``, ``k`` of ``k // 2``) are mapped onto those at
            # the same places of the first case's extent (a variable already mapped, or a target, stays)
            mapped_dim = substitute(my_dim, mapping)
            if tvm_ffi.structural_equal(mapped_dim, their_dim, map_free_vars=True):
                for my_var, their_var in zip(_variables(mapped_dim), _variables(their_dim), strict=True):
                    if not any(my_var.same_as(v) for v in [*mapping, *mapping.values()]):
                        mapping[my_var] = their_var
            if not tvm_ffi.structural_equal(substitute(mapped_dim, mapping), their_dim):
                refuse(f"parameter {mine.name} has the extent {my_dim}, not {their_dim}")
    return mapping


def _variables(expr: tvm.ir.PrimExpr) -> list:
    """The variables of ``expr`` in the order of a walk (repeats included), e.g. of two extents equal up to
    their variables' names."""
    found: list = []
    tvm_ffi.structural_walk(expr, (tirx.Var, found.append))
    return found


def _parameter_type(param: tirx.Var) -> tuple[str, tuple]:
    """``(dtype, shape)`` of a buffer parameter, ``(dtype, ())`` of a scalar one."""
    shape = getattr(param, "shape", None)
    if shape is None:
        return str(param.ty.dtype), ()
    return str(param.dtype), tuple(shape)


def _renewed_body(func: tirx.PrimFunc, params: list, label: str) -> tirx.Stmt:
    """``func``'s body with every variable it defines (loop, block iter, let and buffer variables) new, and its
    parameters, with the variables of their shapes, replaced by ``params``: functions scheduled from one
    PrimFunc share the blocks the schedule left alone, and a variable defined twice in one function is
    ill-formed TIR."""
    renewed = s_tir.renew_defs(func)
    return substitute(renewed.body, _parameter_map(renewed, params, label))


def _root_block(func: tirx.PrimFunc) -> SBlock | None:
    body = func.body
    if isinstance(body, SBlockRealize) and not body.block.iter_vars:
        return body.block
    return None


def suffix_block_names(body: tirx.Stmt, suffix: str) -> tirx.Stmt:
    """``body`` with ``suffix`` appended to the name of every block in it (a second copy of a statement in one
    function, its blocks told apart)."""

    def on_block(block: SBlock) -> SBlock:
        return SBlock(block.iter_vars, block.reads, block.writes, block.name_hint + suffix, block.body, block.init,
                      block.alloc_buffers, block.match_buffers, block.annotations)

    return tvm_ffi.structural_map(body, (SBlock, on_block), order="post")
