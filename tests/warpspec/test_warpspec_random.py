"""Randomized checks: straight-line producer/consumer programs over random ranges and random rings.

For every program the reduced protocol must be safe; removing any one channel group (its wait and its arrive)
must leave a race, because after redundancy elimination no remaining dependence is implied by the others; and
a few programs run on llvm with real threads against the sequential program.
"""

import os

os.environ.setdefault("TVM_NUM_THREADS", str(max(2, os.cpu_count() or 2)))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tvm  # noqa: E402

from tvm_tailsplit.testing import guarded_array, to_tvm  # noqa: E402
from tvm_tailsplit.warpspec import (  # noqa: E402
    WarpSpecialize,
    analyze,
    check,
    examples,
    load_libatomic,
    require_concurrent_threads,
)
from tvm_tailsplit.warpspec.check import RACE  # noqa: E402


def _random_ranges(rng: np.random.Generator) -> list[tuple[int, int]]:
    width = int(rng.integers(8, 40))
    ranges = []
    for _ in range(int(rng.integers(2, 9))):
        lo = int(rng.integers(0, width - 1))
        hi = int(rng.integers(lo + 1, width + 1))
        ranges.append((lo, hi))
    return ranges


@pytest.mark.parametrize("seed", range(25))
def test_random_straight_line_protocols_are_safe_and_minimal(seed):
    ranges = _random_ranges(np.random.default_rng(seed))
    analysis = analyze(examples.seed_example(ranges))
    report = check(analysis.protocol)
    assert report.ok, (ranges, report.describe())
    protocol = analysis.protocol
    for group in analysis.plan.groups:
        broken = protocol
        for task in (group.src_task, group.dst_task):
            broken = broken.replace_ops(task, [op for op in broken.ops[task] if op.group is not group])
        assert RACE in check(broken).kinds(), (ranges, group)


@pytest.mark.parametrize("seed", range(6))
def test_random_rings_are_safe(seed):
    rng = np.random.default_rng(100 + seed)
    tiles, stages = int(rng.integers(1, 9)), int(rng.integers(1, 5))
    report = check(examples.streaming_kernel(tiles=tiles, tile=4, stages=stages))
    assert report.ok, (tiles, stages, report.describe())


@pytest.mark.parametrize("seed", range(3))
def test_random_straight_line_programs_run_on_threads(seed):
    load_libatomic()
    require_concurrent_threads(2)
    rng = np.random.default_rng(1000 + seed)
    ranges = _random_ranges(rng)
    func = examples.seed_example(ranges)
    shape = (len(ranges), max(hi for _, hi in ranges))
    x = guarded_array(shape, "float32")
    x.array[:] = rng.standard_normal(shape)
    sequential = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
    specialized = tvm.compile(WarpSpecialize("llvm", delay_us=20)(tvm.IRModule({"main": func})), target="llvm")
    results = []
    for executable in (sequential, specialized, specialized, specialized):
        out = guarded_array(shape, "float32", canary=-3.0)
        out.array[:] = 0
        executable["main"](to_tvm(x.array), to_tvm(out.array))
        out.check_canaries("O")
        results.append(out.array.copy())
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])
