"""Randomised nests: loops of random extents, a block guarded by random conjunctions of affine comparisons
over the loop variables (and sometimes an ``if`` in the body), the mark at a random depth. Every strategy
must compute exactly what the original computes (llvm, canaries), leave no dead instruction site, and,
after a full split, leave no condition below the mark."""

import numpy as np
import pytest
import tvm
from tvm import s_tir, tirx
from tvm.ir import Range
from tvm.s_tir import SBlock, SBlockRealize

from tvm_tailsplit import MARK_KEY, TailSplit
from tvm_tailsplit.split import analysis
from tvm_tailsplit.split.rewrite import remove_marks
from tvm_tailsplit.testing import assert_same_results


def random_nest(rng: np.random.Generator, symbolic: bool = False) -> tvm.IRModule:
    """A random nest; with ``symbolic`` the guards also compare with a scalar parameter ``n`` (known only at
    run time)."""
    n = tirx.Var("n", "int32")
    depth = int(rng.integers(2, 4))
    extents = [int(rng.integers(1, 7)) for _ in range(depth)]
    loop_vars = [tirx.Var(f"l{d}", "int32") for d in range(depth)]
    shape = extents
    a = tirx.decl_buffer(shape, "float32", "A")
    b = tirx.decl_buffer(shape, "float32", "B")
    iter_vars = [IterVarFor(e, f"v{d}") for d, e in enumerate(extents)]

    def random_atom(variables):
        coefficients = rng.integers(-3, 4, size=len(variables))
        if not coefficients.any():
            coefficients[0] = 1
        expr = tirx.const(int(rng.integers(-4, 10)), "int32")
        for c, v in zip(coefficients, variables, strict=True):
            if c:
                expr = expr + v * int(c)
        bound = tirx.const(int(rng.integers(0, 12)), "int32")
        if symbolic and rng.random() < 0.7:
            bound = n + int(rng.integers(-3, 3)) if rng.random() < 0.7 else n * 2 - int(rng.integers(0, 4))
        kind = rng.integers(0, 3)
        return tirx.LT(expr, bound) if kind == 0 else tirx.LE(expr, bound) if kind == 1 else tirx.GE(expr, bound)

    predicate = random_atom(loop_vars)
    if rng.random() < 0.5:
        predicate = tirx.And(predicate, random_atom(loop_vars))
    indices = [iv.var for iv in iter_vars]
    store = tirx.BufferStore(b, tirx.BufferLoad(a, indices) * tirx.const(2.0, "float32") + 1.0, indices)
    body = store
    if rng.random() < 0.4:
        body = tirx.IfThenElse(random_atom(indices), store, tirx.BufferStore(b, tirx.const(-5.0, "float32"), indices))
    region = [Range.from_min_extent(v, 1) for v in indices]
    block = SBlock(iter_vars, [tirx.BufferRegion(a, region)], [tirx.BufferRegion(b, region)], "B", body)
    stmt = SBlockRealize(loop_vars, predicate, block)
    mark_depth = int(rng.integers(0, depth))
    for d in reversed(range(depth)):
        annotations = {MARK_KEY: "vinsn"} if d == mark_depth else {}
        stmt = tirx.For(loop_vars[d], 0, extents[d], tirx.ForKind.SERIAL, stmt, None, annotations)
    root = SBlockRealize([], True, SBlock([], [], [], "root", stmt))
    params = [a, b, n] if symbolic else [a, b]
    func = tirx.PrimFunc(params, root).with_attrs({"global_symbol": "main", "tirx.noalias": True, "s_tir": True})
    s_tir.analysis.verify_well_formed(func)
    return tvm.IRModule({"main": func})


def IterVarFor(extent, name):  # noqa: N802 - mirrors tirx.IterVar
    return tirx.IterVar(Range(0, extent), tirx.Var(name, "int32"), tirx.IterVar.DataPar)


@pytest.mark.parametrize("seed", range(40))
def test_random_affine_guards(seed):
    mod = random_nest(np.random.default_rng(seed))
    for strategy in ("full", "partial"):
        after = TailSplit(strategy=strategy)(mod)
        s_tir.analysis.verify_well_formed(after["main"])
        assert_same_results(mod, after, trials=1, seed=seed)
        counts = analysis.instruction_count(after)
        assert all(issued > 0 for issued in counts.issued_per_site), after.script()
        if strategy == "full":
            assert analysis.conditions_under_marks(after) == 0, (mod.script(), after.script())


@pytest.mark.parametrize("seed", range(24))
def test_random_symbolic_guards(seed):
    """Guards against a run-time ``n``: every strategy is equivalent for every ``n`` from -2 to 14."""
    mod = random_nest(np.random.default_rng(1000 + seed), symbolic=True)
    for strategy in ("full", "partial"):
        after = TailSplit(strategy=strategy)(mod)
        s_tir.analysis.verify_well_formed(after["main"])
        executables = (tvm.compile(remove_marks(mod), target="llvm"), tvm.compile(remove_marks(after), target="llvm"))
        for n in range(-2, 15):
            assert_same_results(mod, after, scalar_args={"n": n}, trials=1, seed=seed, executables=executables)
        # A guard with an else branch is not removed by range intersection (its failing iterations still run
        # the else branch); guards without one leave nothing under the mark after a full split.
        if strategy == "full" and "else" not in mod.script():
            assert analysis.conditions_under_marks(after) == 0, (mod.script(), after.script())
