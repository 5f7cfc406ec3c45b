"""Merge the cases of a guard chain whose bodies are the same code into one ``if``.

TailSplit's partial split decides the loops above a mark by guard chains (``plan.GuardChain``): disjoint
``if``s, one per interval of each decided variable, nested per variable. On a tiled GPU kernel most cases hold
the *same* main tile (e.g. "a whole thread block", "the last block, first warp", "the last block, second warp,
tiles before the edge"): 9 copies of one tensorized tile for a 2-D grid. ``merge_equal_cases`` rewrites such a
tree into one ``if c_1 or c_2 or ...: body`` per distinct leaf (in the order of their first appearance) when

1. the statement is an *if tree*: ``if`` statements without ``else`` and sequences of if trees, down to leaves
   (any other statement);
2. at least two of its leaves are the same code: structurally equal once the names of their blocks are ignored
   (TailSplit gives each copy its own block names), with the same free variables;
3. the leaves' path conditions (the conjunction of the ``if``s above each leaf) are pairwise disjoint, proved by
   ``tvm.sym.Analyzer`` (one condition assumed, the other's negation proved) with the ranges of the enclosing
   constant loops; so in the original at most one leaf runs per iteration (the order of the leaves does not
   matter), and each merged ``if`` runs its leaf under exactly the same condition;
4. no path condition reads memory or calls a function that may (a load, ``call_extern``): the conditions of the
   tree are evaluated one after the other, each after the leaves before it ran, so a leaf writing what a later
   condition reads (``if F[i] > 0: F[i] -= 1`` then ``if F[i] <= 0: F[i] -= 1``) may make both run although the
   conditions, read at one instant, exclude each other. Pure calls (``tvm_thread_invariant``, ``likely``) are
   fine.

Otherwise the statement is left as it is and its children are visited. The first leaf of each group (its block
names) is kept. Nothing else changes, so the meaning is the original's.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import sym, tirx
from tvm.ir import Range
from tvm.s_tir import SBlock

from ..ir_utils import require_module

__all__ = ["merge_equal_cases"]


def merge_equal_cases(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with the equal leaves of every if tree of disjoint leaves merged into one ``if`` each (see the module
    docstring)."""
    require_module(mod, "merge_equal_cases")
    functions = {}
    for global_var, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(_Merger().visit(func.body))
        functions[global_var] = func
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)


def _leaves(stmt, path: tuple) -> list | None:
    """``[(path condition atoms, leaf)]`` of an if tree, ``None`` if ``stmt`` is a leaf itself."""
    if isinstance(stmt, tirx.IfThenElse) and stmt.else_case is None:
        inner = _leaves(stmt.then_case, (*path, stmt.condition))
        return inner if inner is not None else [((*path, stmt.condition), stmt.then_case)]
    if isinstance(stmt, tirx.SeqStmt):
        result = []
        for child in stmt.seq:
            inner = _leaves(child, path)
            if inner is None:
                return None  # a statement that runs unconditionally next to the cases: not a chain
            result.extend(inner)
        return result
    return None


def _anonymous(stmt):
    """``stmt`` with every block renamed to ``""`` (for comparing copies that differ only in block names)."""

    def rename(block: SBlock) -> SBlock:
        return SBlock(block.iter_vars, block.reads, block.writes, "", block.body, block.init, block.alloc_buffers,
                      block.match_buffers, block.annotations)

    return tvm_ffi.structural_map(stmt, (SBlock, rename), order="post")


def _conjunction(atoms):
    result = atoms[0]
    for atom in atoms[1:]:
        result = tirx.And(result, atom)
    return result


_PURE_EFFECTS = (0, 1)  # TVM's CallEffectKind: kExprAnnotation (likely), kPure (tvm_thread_invariant)


def _reads_state(condition) -> bool:
    """True when ``condition`` loads from a buffer or calls anything but a pure operator (its value may change
    while the leaves before it run)."""
    found: list = []

    def on_call(call) -> None:
        effect = call.op.get_attr("TCallEffectKind") if isinstance(call.op, tvm.ir.Op) else None
        if effect is None or int(effect) not in _PURE_EFFECTS:
            found.append(call)

    tvm_ffi.structural_walk(condition, [(tvm.ir.TensorLoad, found.append), (tvm.ir.Call, on_call)])
    return bool(found)


class _Merger:
    def __init__(self):
        self.analyzer = sym.Analyzer()

    def visit(self, stmt):
        def on_for(node: tirx.For, mutator):
            if isinstance(node.min, tirx.IntImm) and isinstance(node.extent, tirx.IntImm):
                self.analyzer.bind(node.loop_var, Range.from_min_extent(node.min, node.extent), allow_override=True)
            return mutator.default_mutate(node)

        def on_tree(node, mutator):
            merged = self._merge(node)
            return merged if merged is not None else mutator.default_mutate(node)

        return tvm_ffi.structural_mutate(stmt, [(tirx.For, on_for), (tirx.IfThenElse, on_tree),
                                                (tirx.SeqStmt, on_tree)])

    def _merge(self, stmt):
        leaves = _leaves(stmt, ())
        if leaves is None or len(leaves) < 2:
            return None
        groups: list[tuple[object, list]] = []  # (anonymous leaf, [(atoms, leaf)]) in order of first appearance
        for atoms, leaf in leaves:
            anonymous = _anonymous(leaf)
            group = next((g for g in groups if tvm_ffi.structural_equal(g[0], anonymous)), None)
            if group is None:
                groups.append((anonymous, [(atoms, leaf)]))
            else:
                group[1].append((atoms, leaf))
        if len(groups) == len(leaves):
            return None
        conditions = [_conjunction(atoms) for atoms, _ in leaves]
        if any(_reads_state(condition) for condition in conditions):
            return None
        for index, one in enumerate(conditions):
            for other in conditions[index + 1 :]:
                with self.analyzer.constraint_scope(one):
                    if not self.analyzer.can_prove(tirx.Not(other)):
                        return None
        merged = []
        for _, members in groups:
            condition = _conjunction(members[0][0])
            for atoms, _ in members[1:]:
                condition = tirx.Or(condition, _conjunction(atoms))
            merged.append(tirx.IfThenElse(condition, members[0][1], None))
        return merged[0] if len(merged) == 1 else tirx.SeqStmt(merged)
