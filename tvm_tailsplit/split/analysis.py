"""Metrics over marked TensorIR, shared by the tests, the demo and the benchmarks.

- ``instruction_count``: *instruction sites* are the marked loops in the code; *issued instructions* are the
  times marked regions execute at run time. A mark with a guard at or below it cannot be mapped to one
  instruction: the guard forces the instruction down to the innermost point, so every point of the marked
  iteration space counts as one issued instruction (as the seed counts it).
- ``conditions_under_marks``: guards (non-trivial block predicates, block-body ``if``s, loop-level ``if``s)
  left at or below marks.
- ``explain_split``: what TailSplit would do to a function, per mark (split, kept, why), without applying it.
- ``estimate_mapping_cost``: the code length of the full and the partial split of each loop nest, the
  features it grows with, and the strategy ``auto`` picks (see ``tvm_tailsplit.split.cost``).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

import tvm
from tvm import tirx
from tvm.s_tir import SBlockRealize

from ..ir_utils import pragma_attributes_as_annotations, substitute
from .apply import SplitReport, nests_of, plan_nest, split_function, validate_options
from .conditions import MARK_KEY, find_marks, free_vars, guards_under, is_mark, loop_invariant_symbols, loop_vars_in
from .cost import MappingCost

__all__ = [
    "InstructionCount",
    "conditions_under_marks",
    "estimate_mapping_cost",
    "explain_split",
    "instruction_count",
]


@dataclass(frozen=True)
class InstructionCount:
    """Marked regions in the code (``sites``) and their executions at run time (``issued``).

    ``issued_per_site`` gives the issued instructions of each site in program order (not compared).
    """

    sites: int
    issued: int
    issued_per_site: tuple[int, ...] = field(default=(), compare=False)


def _functions(mod: tvm.IRModule | tirx.PrimFunc, func_name: str | None) -> list[tirx.PrimFunc]:
    """The PrimFuncs the metrics read, their marks as loop annotations (a function lowered past its blocks holds
    them as ``T.attr(loop_var, "pragma_emit_insn", value)``: ``pragma_attributes_as_annotations``)."""
    if isinstance(mod, tirx.PrimFunc):
        funcs = [mod]
    elif not isinstance(mod, tvm.IRModule):
        raise TypeError(f"expected a tvm.IRModule or a tirx.PrimFunc, got {type(mod).__name__}")
    elif func_name is not None:
        names = [gv.name_hint for gv in mod.functions]
        if func_name not in names:
            raise ValueError(f"function {func_name!r} is not in the module (it has {names})")
        funcs = [mod[func_name]]
    else:
        funcs = [f for f in mod.functions.values() if isinstance(f, tirx.PrimFunc)]
    return [pragma_attributes_as_annotations(f, MARK_KEY)[0] for f in funcs]


def _constant(expr, env: dict, what: str) -> int:
    value = tvm.sym.Analyzer().simplify(substitute(expr, env))
    if not isinstance(value, tirx.IntImm):
        missing = ", ".join(sorted({v.name for v in free_vars(value)}))
        raise ValueError(
            f"{what} is {expr}, not a constant; give the symbolic variables values with symbolic_values= "
            f"(without a value: {missing})"
        )
    return int(value.value)


def _sequence(stmt: tirx.SeqStmt, env: dict):
    """The statements of a sequence with the environment each one sees (``Bind`` statements extend it)."""
    for child in stmt.seq:
        if isinstance(child, tirx.Bind):
            env = {**env, child.var: substitute(child.value, env)}
            continue
        yield child, env


def _step(loop: tirx.For, env: dict) -> int:
    return 1 if loop.step is None else _constant(loop.step, env, f"step of loop {loop.loop_var.name}")


def _trips(loop: tirx.For, env: dict) -> int:
    """How many times ``loop`` runs its body (its step included)."""
    return len(range(0, _constant(loop.extent, env, f"extent of loop {loop.loop_var.name}"), _step(loop, env)))


def _points(stmt, env: dict) -> int:
    """Iteration points of a marked region (every loop level multiplied, sequences added)."""
    if isinstance(stmt, tirx.For):
        return _trips(stmt, env) * _points(stmt.body, env)
    if isinstance(stmt, tirx.SeqStmt):
        return sum(_points(child, child_env) for child, child_env in _sequence(stmt, env))
    if isinstance(stmt, tirx.IfThenElse):
        return max(_points(stmt.then_case, env), _points(stmt.else_case, env) if stmt.else_case else 0)
    if isinstance(stmt, SBlockRealize):
        return _points(stmt.block.body, env) if loop_vars_in(stmt.block.body) else 1
    if isinstance(stmt, tirx.AttrStmt):
        return _points(stmt.body, env)
    return 1


def _issued(stmt, env: dict, per_site: dict) -> int:
    if isinstance(stmt, tirx.For):
        if is_mark(stmt):
            trips = _trips(stmt, env)
            issued = 0 if trips <= 0 else (_points(stmt, env) if guards_under(stmt) else 1)
            per_site[stmt] = per_site.get(stmt, 0) + issued
            return issued
        if not any(is_mark(loop) for loop in loop_vars_in(stmt.body)):
            return 0
        low = _constant(stmt.min, env, f"start of loop {stmt.loop_var.name}")
        extent = _constant(stmt.extent, env, f"extent of loop {stmt.loop_var.name}")
        return sum(_issued(stmt.body, {**env, stmt.loop_var: tirx.const(v, stmt.loop_var.ty.dtype)}, per_site)
                   for v in range(low, low + extent, _step(stmt, env)))
    if isinstance(stmt, tirx.SeqStmt):
        return sum(_issued(child, child_env, per_site) for child, child_env in _sequence(stmt, env))
    if isinstance(stmt, tirx.IfThenElse):
        taken = _constant(tirx.Cast("int32", stmt.condition), env, f"condition {stmt.condition}")
        if taken:
            return _issued(stmt.then_case, env, per_site)
        return _issued(stmt.else_case, env, per_site) if stmt.else_case is not None else 0
    if isinstance(stmt, SBlockRealize):
        return _issued(stmt.block.body, env, per_site)
    if isinstance(stmt, tirx.AttrStmt):
        return _issued(stmt.body, env, per_site)
    if isinstance(stmt, tirx.While) and any(is_mark(loop) for loop in loop_vars_in(stmt.body)):
        raise ValueError(f"marks inside the while loop 'while {stmt.condition}' run an unknown number of times: "
                         "their issued instructions cannot be counted")
    return 0


def _symbolic_env(func: tirx.PrimFunc, symbolic_values: Mapping[str, int] | None) -> dict:
    if not symbolic_values:
        return {}
    env = {}
    free = {}
    for param in func.params:
        for dim in getattr(param, "shape", []) or []:
            if isinstance(dim, tirx.Var):
                free[dim.name] = dim
        if isinstance(param.ty, tvm.ir.PrimType):
            free[param.name] = param
    for name, value in symbolic_values.items():
        if name not in free:
            raise ValueError(f"symbolic variable {name!r} is not a parameter or buffer dimension of the function")
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # (int("x"), int(2.5): no word)
            raise TypeError(f"symbolic_values[{name!r}] must be an int, got {value!r} ({type(value).__name__})")
        env[free[name]] = tirx.const(int(value), free[name].ty.dtype)
    return env


def instruction_count(
    mod: tvm.IRModule | tirx.PrimFunc,
    func_name: str = "main",
    symbolic_values: Mapping[str, int] | None = None,
) -> InstructionCount:
    """Instruction sites and issued instructions of one function: ``mod`` itself when it is a PrimFunc, else its
    function ``func_name`` (see the module docstring).

    ``symbolic_values`` gives values to symbolic extents by name (e.g. ``{"n": 100}``).
    """
    (func,) = _functions(mod, func_name)
    marks = [mark.loop for mark in find_marks(func)]
    env = _symbolic_env(func, symbolic_values)
    per_site: dict = {}
    issued = _issued(func.body, env, per_site)
    return InstructionCount(len(marks), issued, tuple(per_site.get(mark, 0) for mark in marks))


def conditions_under_marks(mod: tvm.IRModule | tirx.PrimFunc, func_name: str | None = None) -> int:
    """The number of guards left at or below marks: in ``mod`` itself when it is a PrimFunc, in its function
    ``func_name`` when one is named, else in every PrimFunc of the module."""
    return sum(len(mark.guards) for func in _functions(mod, func_name) for mark in find_marks(func))


def estimate_mapping_cost(
    func: tirx.PrimFunc | tvm.IRModule,
    max_mapping_cost: int = 256,
    max_fuzzy_expansion: int = 64,
    func_name: str = "main",
) -> list[MappingCost]:
    """The mapping cost of each loop nest with marks of ``func`` (a PrimFunc, or the function ``func_name`` of a
    module): full and partial code length, features, choice, with ``TailSplit``'s ``max_mapping_cost`` and
    ``max_fuzzy_expansion``."""
    validate_options("auto", max_mapping_cost, max_fuzzy_expansion)
    (func,) = _functions(func, func_name)
    costs = []
    with loop_invariant_symbols(func):  # as split_function plans: (m + 15) // 16 is a symbol like m
        for nest in nests_of(func):
            if any(is_mark(loop) for loop in loop_vars_in(nest)):
                costs.append(plan_nest(func, nest, "auto", max_mapping_cost, max_fuzzy_expansion)[2])
    return costs


def explain_split(
    func: tirx.PrimFunc | tvm.IRModule,
    strategy: str = "auto",
    max_mapping_cost: int = 256,
    max_fuzzy_expansion: int = 64,
    func_name: str = "main",
) -> SplitReport:
    """The report of TailSplit on ``func`` (a PrimFunc, or the function ``func_name`` of a module; per nest: marks,
    mapping cost, strategy, what was split and what was kept and why), with ``TailSplit``'s ``strategy``,
    ``max_mapping_cost`` and ``max_fuzzy_expansion``; the function itself is not changed."""
    (func,) = _functions(func, func_name)
    return split_function(func, func_name, strategy, max_mapping_cost, max_fuzzy_expansion)[1]
