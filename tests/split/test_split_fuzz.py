"""TailSplit fuzzer (issue #12): random scheduled nests (``fuzz_nests.random_case``), every strategy, two pipelines.

For case ``seed`` (seeds 0 .. ``--fuzz-cases`` - 1, default 16) and each strategy, TailSplit's output must be well
formed, compile whenever the original compiles, and compute exactly what the original (marks removed, TVM's default
pipeline) computes: every buffer equal and every canary intact, for every ``n`` from -3 to 50 and the tile sizes
± 1 (one compiled module serves every ``n``). ``PIPELINES`` compiles TailSplit's output with TVM's default pipeline
(every strategy) and the original with the package's ``"tailsplit"`` pipeline (its default strategy). Thread-bound
loops run as serial loops on llvm. A case TailSplit leaves unchanged passes. A failure message names the seed, the
strategy, the pipeline, ``n`` and the stage that failed, and prints the original TVMScript
(``fuzz_nests.random_case(seed).mod``) and TailSplit's output.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import SBlockRealize
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.split.pipeline import TAILSPLIT_PIPELINE
from tvm_tailsplit.testing import assert_same_results, threads_as_serial_loops

from .fuzz_nests import ALL_FEATURES, MARK_VALUE, FuzzCase, features, random_case, runnable

STRATEGIES = ("full", "partial", "auto")


@T.prim_func(s_tir=True)
def _never_matching_desc(a: T.handle, c: T.handle):
    A = T.match_buffer(a, (1,), "int8", offset_factor=1)
    C = T.match_buffer(c, (1,), "int8", offset_factor=1)
    with T.sblock("root"):
        T.reads(C[0:1], A[0:1])
        T.writes(C[0:1])
        with T.sblock("update"):
            vk = T.axis.reduce(1, 0)
            with T.init():
                C[0] = T.int8(0)
            C[0] = C[0] + A[vk]


# The fuzz marks name this intrinsic: int8, so it matches no generated block and ``tensorize_marked`` leaves every
# region as code; its description has an init, so marked reductions that keep theirs are accepted.
s_tir.TensorIntrin.register(MARK_VALUE, _never_matching_desc, _never_matching_desc, override=True)


def _tvm_default(original: tvm.IRModule, transformed: tvm.IRModule, strategy: str) -> tvm.runtime.Module:
    return tvm.compile(runnable(transformed), target="llvm")


def _tailsplit(original: tvm.IRModule, transformed: tvm.IRModule, strategy: str) -> tvm.runtime.Module:
    """The package's pipeline as users get it (``tir_pipeline="tailsplit"``: TailSplit with its default strategy
    "auto", ``tensorize_marked``, TVM's default) on the original, thread-bound loops made serial first."""
    return tvm.compile(threads_as_serial_loops(original), target="llvm", tir_pipeline=TAILSPLIT_PIPELINE)


# The pipelines a case is compiled with, and the strategies each is run with (the reference is always the original
# through TVM's default pipeline). Each takes the original, TailSplit's output with that strategy (marks and thread
# bindings included) and the strategy, and returns an llvm executable. The package's pipeline runs TailSplit again
# inside, so it runs with its default strategy only, to keep `make test` near a minute.
PIPELINES: dict[str, tuple[Callable[[tvm.IRModule, tvm.IRModule, str], tvm.runtime.Module], tuple[str, ...]]] = {
    "tvm-default": (_tvm_default, STRATEGIES),
    "tailsplit": (_tailsplit, ("auto",)),
}


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
    key = (pipeline, strategy if pipeline == "tailsplit" else tvm_ffi.structural_hash(after))
    if key not in executables:
        try:
            executables[key] = PIPELINES[pipeline][0](case.mod, after, strategy)
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
            [(seed, strategy, pipeline) for seed in range(count)
             for pipeline, (_, strategies) in PIPELINES.items() for strategy in strategies],
            ids=lambda value: str(value),
        )


def test_tailsplit_fuzz(fuzz_seed, strategy, pipeline):
    message = check_case(fuzz_seed, strategy, pipeline)
    if message is not None:
        pytest.fail(message, pytrace=False)


def test_fuzzer_covers_every_feature(request):
    """The cases of the default run (``--fuzz-cases`` defaults to 16) have, between them, every feature issue #12
    lists (a run with fewer cases checks fewer features)."""
    count = max(16, request.config.getoption("--fuzz-cases"))
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
