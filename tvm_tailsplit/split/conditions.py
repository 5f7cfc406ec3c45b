"""Marks and guards: where instructions are mapped and which conditions stand in their way.

A *mark* is a loop annotated ``pragma_emit_insn`` (the value names the instruction, e.g. a registered
``TensorIntrin``). The loops below a mark form one instruction; the loops above enumerate the instructions.
A *guard* is a condition at or below a mark that decides whether an iteration point runs:

- the predicate of an ``SBlockRealize`` (``T.where``, e.g. from a non-divisible ``sch.split``);
- an ``if`` at the top level of a block body (written over block iter vars; translated here into loop
  variables through the block's bindings);
- an ``if`` statement between loops.

Each guard condition is split at its conjunctions into *atoms* (through ``T.likely``, a hint with the value of
its argument, and through the negation of a comparison, the opposite comparison). An atom that compares two
integer expressions is normalised to ``linear >= 0``; the interval analysis (``intervals.py``) derives split
points from that form. Any other atom (a disjunction, a call, a load, a float comparison) is *opaque*: it is
only ever decided by proof, never split on.

Everything here is a pure function over IR: nothing is rewritten.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import sym, tirx
from tvm.s_tir import SBlock, SBlockRealize

from ..ir_utils import EMIT_INSN_PRAGMA, require_prim_func, substitute

MARK_KEY = EMIT_INSN_PRAGMA

__all__ = [
    "MARK_KEY",
    "Atom",
    "GuardSite",
    "Mark",
    "atoms_of",
    "block_if_statements",
    "find_marks",
    "guards_everything",
    "guards_under",
    "has_load_or_call",
    "is_mark",
    "loop_invariant_symbols",
    "loop_vars_in",
    "marked_blocks",
    "same_atom",
]


def is_mark(stmt) -> bool:
    """True when ``stmt`` is a loop carrying the instruction-mapping mark."""
    return isinstance(stmt, tirx.For) and MARK_KEY in stmt.annotations


def free_vars(expr) -> set:
    """The scalar variables (not buffers) that occur in ``expr``."""
    found: set = set()
    tvm_ffi.structural_walk(expr, (tvm.ir.Var, found.add))
    return {v for v in found if isinstance(v.ty, tvm.ir.PrimType)}


@dataclass(frozen=True)
class Atom:
    """One conjunct of a guard, written over loop variables.

    ``expr`` is the condition as it is emitted when the atom stays. ``linear`` is an integer expression with
    ``expr <=> linear >= 0`` when the atom compares integers, else ``None`` (an opaque atom).
    """

    expr: tvm.ir.PrimExpr
    linear: tvm.ir.PrimExpr | None
    variables: frozenset = field(compare=False)

    def __str__(self) -> str:
        return str(self.expr)


def _is_integer(expr) -> bool:
    dtype = expr.ty.dtype
    return dtype.startswith("int") or dtype.startswith("uint")


def _linear_form(cond) -> list[tuple[tvm.ir.PrimExpr, tvm.ir.PrimExpr]]:
    """``[(atom_expr, linear)]`` with ``atom_expr <=> linear >= 0``; an equality gives two atoms."""
    a, b = cond.a, cond.b
    if isinstance(cond, tirx.LT):
        return [(cond, b - a - 1)]
    if isinstance(cond, tirx.LE):
        return [(cond, b - a)]
    if isinstance(cond, tirx.GT):
        return [(cond, a - b - 1)]
    if isinstance(cond, tirx.GE):
        return [(cond, a - b)]
    if isinstance(cond, tirx.EQ):
        return [(tirx.LE(a, b), b - a), (tirx.GE(a, b), a - b)]
    return []


_LIKELY = tvm.ir.Op.get("prim.likely")
# the comparison that holds where a comparison does not
_OPPOSITE = {tirx.LT: tirx.GE, tirx.LE: tirx.GT, tirx.GT: tirx.LE, tirx.GE: tirx.LT}


def atoms_of(condition) -> list[Atom]:
    """Split ``condition`` at its conjunctions into atoms (constant ``True`` gives no atom)."""
    if isinstance(condition, tirx.IntImm) and condition.ty.dtype == "bool" and condition.value:
        return []
    if isinstance(condition, tirx.And):
        return atoms_of(condition.a) + atoms_of(condition.b)
    if isinstance(condition, tvm.ir.Call) and condition.op.same_as(_LIKELY):
        return atoms_of(condition.args[0])
    if isinstance(condition, tirx.Not) and type(condition.a) in _OPPOSITE:
        return atoms_of(_OPPOSITE[type(condition.a)](condition.a.a, condition.a.b))
    if isinstance(condition, (tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.EQ)) and _is_integer(condition.a):
        atoms = []
        for expr, linear in _linear_form(condition):
            variables = free_vars(expr)
            atoms.append(Atom(expr, linear if _is_affine(linear, variables) else None, frozenset(variables)))
        return atoms
    return [Atom(condition, None, frozenset(free_vars(condition)))]


def has_load_or_call(expr) -> bool:
    """True when ``expr`` reads a buffer or calls a function (its value may depend on memory)."""
    found: list = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.TensorLoad, found.append), (tvm.ir.Call, found.append)])
    return bool(found)


_LOOP_VARIABLES: ContextVar[frozenset | None] = ContextVar("tailsplit_loop_variables", default=None)


@contextmanager
def loop_invariant_symbols(func: tirx.PrimFunc) -> Iterator[None]:
    """Within this context an atom may hold sub-expressions that mention no loop variable of ``func`` (no ``For``
    variable, no block iter var) and are not affine, e.g. the padded tile count ``(m + 15) // 16`` of a symbolic
    ``M``: each is a symbol like ``m`` itself, and the atom stays affine in the loops (``i_0 * 4 + i_1 <
    (m + 15) // 16``). Outside it, such an atom is opaque."""
    found: set = set()
    tvm_ffi.structural_walk(func.body, [(tirx.For, lambda loop: found.add(loop.loop_var)),
                                        (SBlock, lambda block: found.update(iv.var for iv in block.iter_vars))])
    token = _LOOP_VARIABLES.set(frozenset(found))
    try:
        yield
    finally:
        _LOOP_VARIABLES.reset(token)


_NON_AFFINE = (tirx.FloorDiv, tirx.FloorMod, tirx.Div, tirx.Mod, tirx.Min, tirx.Max, tirx.Mul)


def _symbolize(expr, loop_variables: frozenset):
    """``expr`` with every non-affine sub-expression that mentions no loop variable replaced by a fresh variable
    (inner ones first, so the replaced sub-expressions are the largest)."""

    def on_node(node):
        if any(v in loop_variables for v in free_vars(node)):
            return node
        if isinstance(node, tirx.Mul) and (isinstance(node.a, tirx.IntImm) or isinstance(node.b, tirx.IntImm)):
            return node
        return tirx.Var("symbol", node.ty)

    return tvm_ffi.structural_map(expr, [(kind, on_node) for kind in _NON_AFFINE], order="post")


def _is_affine(expr, variables: set) -> bool:
    """True when ``expr`` is an affine integer function of its variables (no loads, calls or products); within
    ``loop_invariant_symbols`` non-affine sub-expressions without loop variables count as symbols."""
    if has_load_or_call(expr):
        return False
    loop_variables = _LOOP_VARIABLES.get()
    if loop_variables is not None:
        expr = _symbolize(expr, loop_variables)
        variables = free_vars(expr)
    coefficients = sym.detect_linear_equation(expr, sorted(variables, key=lambda v: v.name))
    return len(coefficients) == len(variables) + 1 and all(isinstance(c, tirx.IntImm) for c in coefficients[:-1])


def block_if_statements(block: SBlock) -> Iterator[tirx.IfThenElse]:
    """The ``if`` statements at the top level of a block body (directly or inside a sequence)."""
    body = block.body
    statements = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    for stmt in statements:
        if isinstance(stmt, tirx.IfThenElse):
            yield stmt


def block_binding(realize: SBlockRealize) -> dict:
    """Map each block iter var to the loop expression it is bound to."""
    return {iv.var: value for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)}


@dataclass(frozen=True)
class GuardSite:
    """A guard at or below a mark: where it stands, the block it guards, and its atoms over loop variables."""

    kind: str  # "predicate", "block_if" or "loop_if"
    block_name: str | None
    atoms: tuple[Atom, ...]

    def describe(self) -> str:
        where = f" of block {self.block_name!r}" if self.block_name else ""
        return f"{self.kind}{where}: " + " and ".join(str(a) for a in self.atoms)


def guards_under(stmt) -> list[GuardSite]:
    """Every guard in ``stmt`` (block predicates, block-body ifs and loop-level ifs, also inside nested blocks and
    ``AttrStmt`` scopes), over loop variables (block iter vars are replaced by their bindings)."""
    sites: list[GuardSite] = []

    def walk(node, binding: dict):
        if isinstance(node, SBlockRealize):
            if node.block.name_hint == "root":
                walk(node.block.body, binding)
                return
            name = node.block.name_hint
            predicate_atoms = atoms_of(substitute(node.predicate, binding))
            if predicate_atoms:
                sites.append(GuardSite("predicate", name, tuple(predicate_atoms)))
            inner_binding = {**binding, **{v: substitute(e, binding) for v, e in block_binding(node).items()}}
            for if_stmt in block_if_statements(node.block):
                atoms = atoms_of(substitute(if_stmt.condition, inner_binding))
                if atoms:
                    sites.append(GuardSite("block_if", name, tuple(atoms)))
            walk(node.block.body, inner_binding)  # nested blocks and loops inside this block
        elif isinstance(node, tirx.IfThenElse):
            atoms = atoms_of(substitute(node.condition, binding))
            if atoms:
                sites.append(GuardSite("loop_if", None, tuple(atoms)))
            walk(node.then_case, binding)
            if node.else_case is not None:
                walk(node.else_case, binding)
        elif isinstance(node, (tirx.For, tirx.AttrStmt)):  # T.attr / pragma scopes hold guards too
            walk(node.body, binding)
        elif isinstance(node, tirx.SeqStmt):
            for child in node.seq:
                walk(child, binding)

    walk(stmt, {})
    return sites


def same_atom(first: Atom, second: Atom) -> bool:
    """Structural equality of two atoms (the same comparison over the same variables)."""
    return bool(tvm_ffi.structural_equal(first.expr, second.expr))


def guards_everything(stmt, atom: Atom) -> bool:
    """True when every statement with an effect in ``stmt`` runs only where ``atom`` holds: each block has the
    atom in its predicate or in an ``if`` without ``else`` around its whole body, or sits under a loop-level
    ``if`` without ``else`` on it. Then the iterations where the atom fails do nothing, and a loop range may
    be narrowed to where it holds. Anything else (an ``else`` branch, an unguarded block) gives ``False``."""

    def has_atom(condition, binding: dict) -> bool:
        return any(same_atom(a, atom) for a in atoms_of(substitute(condition, binding)))

    def guarded(node, binding: dict) -> bool:
        if isinstance(node, tirx.SeqStmt):
            return all(guarded(child, binding) for child in node.seq)
        if isinstance(node, tirx.For):
            return guarded(node.body, binding)
        if isinstance(node, tirx.IfThenElse):
            if node.else_case is None and has_atom(node.condition, binding):
                return True
            return guarded(node.then_case, binding) and (node.else_case is None or guarded(node.else_case, binding))
        if isinstance(node, SBlockRealize):
            if has_atom(node.predicate, binding):
                return True
            if node.block.init is not None:
                return False
            inner = {**binding, **{v: substitute(e, binding) for v, e in block_binding(node).items()}}
            return guarded(node.block.body, inner)
        if isinstance(node, tirx.Evaluate):
            return isinstance(node.value, tirx.IntImm)
        return False

    return guarded(stmt, {})


def loop_vars_in(stmt) -> list[tirx.For]:
    """Every loop in ``stmt``, in pre-order."""
    loops: list[tirx.For] = []
    tvm_ffi.structural_walk(stmt, (tirx.For, loops.append), order="pre")
    return loops


@dataclass
class Mark:
    """A marked loop with the loops around it and the guards below it."""

    loop: tirx.For
    instruction: str
    enclosing_loops: tuple[tirx.For, ...]
    guards: tuple[GuardSite, ...]

    @property
    def name(self) -> str:
        return f"{self.loop.loop_var.name} ({self.instruction})"

    def blocks(self) -> list[str]:
        names: list[str] = []
        tvm_ffi.structural_walk(self.loop, (SBlock, lambda b: names.append(b.name_hint)))
        return names


def marked_blocks(func: tirx.PrimFunc) -> list[tuple[str, object]]:
    """``(name, value)`` of every block of ``func`` annotated with ``MARK_KEY`` (``sch.annotate(block, ...)``): a mark
    names the instruction of the loop nest below a *loop*, so such an annotation marks nothing."""
    found: list[tuple[str, object]] = []
    tvm_ffi.structural_walk(func.body, (SBlock, lambda block: found.append(
        (block.name_hint, block.annotations[MARK_KEY])) if MARK_KEY in block.annotations else None))
    return found


def find_marks(func: tirx.PrimFunc) -> list[Mark]:
    """Every outermost mark of ``func`` (a mark below another mark belongs to the outer instruction)."""
    require_prim_func(func, "find_marks")
    marks: list[Mark] = []

    def walk(node, enclosing: tuple):
        if isinstance(node, tirx.For):
            if is_mark(node):
                marks.append(Mark(node, str(node.annotations[MARK_KEY]), enclosing, tuple(guards_under(node))))
                return
            walk(node.body, enclosing + (node,))
        elif isinstance(node, SBlockRealize):
            walk(node.block.body, enclosing)
        elif isinstance(node, tirx.SeqStmt):
            for child in node.seq:
                walk(child, enclosing)
        elif isinstance(node, tirx.IfThenElse):
            walk(node.then_case, enclosing)
            if node.else_case is not None:
                walk(node.else_case, enclosing)
        elif isinstance(node, (tirx.AttrStmt, tirx.While)):
            walk(node.body, enclosing)

    walk(func.body, ())
    return marks
