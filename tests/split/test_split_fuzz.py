"""TailSplit fuzzer (issue #12): random scheduled nests (``fuzz_nests.random_case``), every strategy, every pipeline.

For case ``seed`` (seeds 0 .. ``--fuzz-cases`` - 1) and each strategy, TailSplit's output must be well formed,
compile whenever the original compiles, and compute exactly what the original (marks removed) computes: every
buffer equal and every canary intact, for every ``n`` from -3 to 50 and the tile sizes ± 1 (one compiled
module serves every ``n``). Thread-bound loops run as serial loops on llvm. A case TailSplit leaves unchanged
passes. A failure message names the seed, the strategy, the pipeline, ``n`` and the stage that failed, and
prints the original TVMScript (``fuzz_nests.random_case(seed).mod``) and TailSplit's output.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import SBlockRealize

from tvm_tailsplit import TailSplit
from tvm_tailsplit.testing import assert_same_results

from .fuzz_nests import ALL_FEATURES, FuzzCase, features, random_case, runnable

STRATEGIES = ("full", "partial", "auto")


def _tvm_default(transformed: tvm.IRModule) -> tvm.runtime.Module:
    return tvm.compile(runnable(transformed), target="llvm")


# The pipelines TailSplit's output is compiled with (the reference is always compiled with TVM's default).
# Each takes TailSplit's output, marks and thread bindings included, and returns an llvm executable.
# >>> LEAD: add the package's own pipeline here once it is merged, e.g.
# >>>     "tailsplit": lambda transformed: tvm.compile(..., target="llvm", tir_pipeline="tailsplit"),
PIPELINES: dict[str, Callable[[tvm.IRModule], tvm.runtime.Module]] = {
    "tvm-default": _tvm_default,
}


@dataclass(frozen=True)
class KnownFailure:
    """A class of failures being fixed: its cases fail with ``marker`` in the message."""

    reason: str
    marker: str
    cases: dict[str, tuple[int, ...]]  # strategy -> seeds


# >>> LEAD: the exact cases that fail with a class whose fix is in progress (branch h-splitfix). Remove this list
# >>> (and KnownFailure) once the fixes are merged: a listed case that passes fails the test, so the list cannot
# >>> go stale. Seeds found by running 0 .. 499 (`--fuzz-cases=500`).
KNOWN_FAILURES = (
    KnownFailure(
        "a vectorized loop at/below the mark gets a symbolic extent: TVM refuses to vectorize it",
        "Failed to vectorize loop with extent",
        {},
    ),
    KnownFailure(
        "an unrolled loop at/below the mark gets a symbolic extent: TVM refuses to unroll it (fuzz finding F1)",
        "Cannot unroll non-constant loop",
        {},
    ),
    KnownFailure(
        "full split crashes on a loop extent that depends on an enclosing loop",
        "Invalid use of undefined variable",
        {},
    ),
    KnownFailure(
        "TVM's HoistIfThenElse hoists a guard TailSplit emits in one branch of a user's if/else above the loop, so "
        "the other branch is skipped (each listed case passes on h-splitfix, which emits two disjoint ifs)",
        "results differ",
        {},
    ),
)


def _known_failure(seed: int, strategy: str) -> KnownFailure | None:
    return next((known for known in KNOWN_FAILURES if seed in known.cases.get(strategy, ())), None)


def _show(mod: tvm.IRModule) -> str:
    try:
        return mod.script()
    except Exception as error:  # noqa: BLE001 - a module the printer refuses is still reported
        return f"<TVMScript printer failed: {error}>"


def _summary(error: Exception) -> str:
    """The first lines (numpy names the buffer there) and the last lines (TVM's check that failed) of an error."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    if len(lines) > 8:
        lines = lines[:4] + ["..."] + lines[-4:]
    return f"{type(error).__name__}: " + "\n".join(lines)


@functools.lru_cache(maxsize=1)
def _reference(seed: int) -> tuple[FuzzCase, tvm.runtime.Module, dict]:
    """The case, its reference executable (marks removed, TVM's default pipeline) and a cache of the executables
    of TailSplit's outputs by structural hash (strategies often produce the same module)."""
    case = random_case(seed)
    return case, tvm.compile(runnable(case.mod), target="llvm"), {}


def check_case(seed: int, strategy: str, pipeline: str) -> str | None:
    """Run case ``seed`` with ``strategy`` through ``pipeline``; ``None`` when it passes, else what failed."""
    case, reference, executables = _reference(seed)

    def failure(stage: str, error: Exception | str, n: int | None = None, after: tvm.IRModule | None = None) -> str:
        text = error if isinstance(error, str) else _summary(error)
        where = f"seed={seed} strategy={strategy} pipeline={pipeline}" + ("" if n is None else f" n={n}")
        shown = "" if after is None else f"\nTailSplit's output:\n{_show(after)}"
        return (f"TailSplit fuzz case {where}: {stage}: {text}\n"
                f"original (tests/split/fuzz_nests.py random_case({seed})):\n{_show(case.mod)}{shown}")

    try:
        after = TailSplit(strategy=strategy)(case.mod)
    except Exception as error:  # noqa: BLE001 - any exception of the pass is a finding
        return failure("TailSplit raised", error)
    try:
        s_tir.analysis.verify_well_formed(after["main"])
    except Exception as error:  # noqa: BLE001
        return failure("TailSplit's output is not well formed", error, after=after)
    key = (pipeline, tvm_ffi.structural_hash(after))
    if key not in executables:
        try:
            executables[key] = PIPELINES[pipeline](after)
        except Exception as error:  # noqa: BLE001 - the original compiled, so this is a finding
            return failure("TailSplit's output does not compile (the original does)", error, after=after)
    for n in case.n_values or (None,):
        try:
            assert_same_results(case.mod, after, scalar_args=case.scalar_args(n), trials=1 if n is not None else 2,
                                seed=seed, executables=(reference, executables[key]))
        except AssertionError as error:
            stage = "a canary changed (out-of-bounds write)" if "out-of-bounds" in str(error) else "results differ"
            return failure(stage, error, n=n, after=after)
    return None


def pytest_generate_tests(metafunc):
    if "fuzz_seed" in metafunc.fixturenames:
        count = metafunc.config.getoption("--fuzz-cases")
        metafunc.parametrize(
            ("fuzz_seed", "strategy", "pipeline"),
            [(seed, strategy, pipeline) for seed in range(count) for pipeline in PIPELINES for strategy in STRATEGIES],
            ids=lambda value: str(value),
        )


def test_tailsplit_fuzz(fuzz_seed, strategy, pipeline):
    message = check_case(fuzz_seed, strategy, pipeline)
    known = _known_failure(fuzz_seed, strategy)
    if known is not None:
        if message is None:
            pytest.fail(f"seed {fuzz_seed} strategy {strategy} is listed in KNOWN_FAILURES ({known.reason}) but "
                        "passes now: remove it from the list", pytrace=False)
        if known.marker in message:
            pytest.xfail(known.reason)
    if message is not None:
        pytest.fail(message, pytrace=False)


def test_fuzzer_covers_every_feature(request):
    """The cases a run checks (at least the first 40) have, between them, every feature issue #12 lists."""
    count = max(40, request.config.getoption("--fuzz-cases"))
    seen: set[str] = set()
    for seed in range(count):
        seen |= features(random_case(seed).mod)
    assert seen == ALL_FEATURES, f"features never generated: {sorted(ALL_FEATURES - seen)}"


def test_a_wrong_split_is_reported_with_its_seed(monkeypatch):
    """The check can fail: a "TailSplit" that drops every block predicate is caught on one of the first cases,
    and the message names the seed and shows the original."""

    def drop_predicates(strategy: str) -> tvm.transform.Pass:
        def transform(func, mod, ctx):
            def on_realize(realize):
                return SBlockRealize(realize.iter_values, True, realize.block)

            return func.with_body(tvm_ffi.structural_map(func.body, (SBlockRealize, on_realize), order="post"))

        return tirx.transform.prim_func_pass(transform, opt_level=0, name="DropPredicates")

    monkeypatch.setitem(globals(), "TailSplit", drop_predicates)
    message = next(m for m in (check_case(seed, "full", "tvm-default") for seed in range(10)) if m is not None)
    seed = int(message.split("seed=")[1].split()[0])
    assert "results differ" in message or "canary" in message
    assert f"random_case({seed})" in message and "T.where" in message
