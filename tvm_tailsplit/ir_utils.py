"""Small TIR utilities shared by the three wings (a leaf module: it imports TVM only).

- ``substitute``: variables replaced by expressions (keys compared by identity, as TVM's ``Var`` hashes).
- ``uses_var``: whether an expression or statement mentions a variable; ``conjunction``: ``a and b and ...``.
- ``with_loop``: a ``For`` rebuilt with some of its fields changed (the others, annotations included, kept).
- ``map_loops``: every ``For`` of every PrimFunc of a module mapped by a function, innermost first.
- ``drop_loop_annotation``: a module without one loop annotation (e.g. ``EMIT_INSN_PRAGMA``, TailSplit's mark).
- ``checked_module_pass``: a module pass that refuses, by name, anything but an ``IRModule`` when called directly.
- ``require_module``: the same check for functions that take a module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import _ffi_transform_api

__all__ = [
    "EMIT_INSN_PRAGMA",
    "checked_module_pass",
    "conjunction",
    "drop_loop_annotation",
    "map_loops",
    "require_module",
    "substitute",
    "uses_var",
    "with_loop",
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


def conjunction(exprs: list) -> tvm.ir.PrimExpr:
    """``exprs[0] and exprs[1] and ...`` (at least one expression)."""
    result = exprs[0]
    for expr in exprs[1:]:
        result = tirx.And(result, expr)
    return result


def with_loop(loop: tirx.For, *, loop_var=_UNCHANGED, min=_UNCHANGED, extent=_UNCHANGED,  # noqa: A002
              kind=_UNCHANGED, body=_UNCHANGED, thread_binding=_UNCHANGED, annotations=_UNCHANGED) -> tirx.For:
    """``loop`` rebuilt with the given fields changed; every field not given (annotations included) is kept."""

    def pick(value, current):
        return current if value is _UNCHANGED else value

    return tirx.For(
        pick(loop_var, loop.loop_var), pick(min, loop.min), pick(extent, loop.extent), pick(kind, loop.kind),
        pick(body, loop.body), pick(thread_binding, loop.thread_binding),
        dict(pick(annotations, loop.annotations)),
    )


def map_loops(mod: tvm.IRModule, fn: Callable[[tirx.For], tirx.Stmt]) -> tvm.IRModule:
    """``mod`` with ``fn`` applied to every loop of every PrimFunc, innermost first (``fn`` sees its loop with
    the inner loops already mapped, and returns it unchanged, rebuilt or replaced); other functions and the
    module's attributes are kept."""
    functions = {}
    for global_var, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, fn), order="post"))
        functions[global_var] = func
    return tvm.IRModule(functions, attrs=mod.attrs)


def drop_loop_annotation(mod: tvm.IRModule, key: str, value: str | None = None) -> tvm.IRModule:
    """``mod`` without the loop annotation ``key`` (e.g. the marks, once no instruction is mapped: llvm codegen
    would otherwise warn about an unknown pragma on every marked loop); with ``value``, only where it has that
    value."""

    def drop(loop: tirx.For) -> tirx.For:
        if key not in loop.annotations or (value is not None and str(loop.annotations[key]) != value):
            return loop
        return with_loop(loop, annotations={k: v for k, v in loop.annotations.items() if k != key})

    return map_loops(mod, drop)


def require_module(mod: object, who: str, argument: str = "mod") -> None:
    """Raise ``TypeError`` naming ``who`` and ``argument`` unless ``mod`` is a ``tvm.IRModule``."""
    if isinstance(mod, tvm.IRModule):
        return
    hint = " (wrap it: tvm.IRModule({'main': func}))" if isinstance(mod, tirx.PrimFunc) else ""
    raise TypeError(f"{who}: {argument} must be a tvm.IRModule, got {type(mod).__name__}{hint}")


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
