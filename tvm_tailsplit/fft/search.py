"""Plan search: time variants of a plan on this machine and keep the fastest (FFTW's MEASURE and PATIENT).

Algorithm: the search starts from the estimate variant (`variants.estimate_variant`, the rules of `tuning`),
which is always a candidate, so the winner is never slower than it as measured. Each knob of a `Variant` is an
axis with a few values (`axes`): the breakdown (codelet and radix limits), the order of the top-level radices,
lanes per group, vector width and inner vector scale (only while a group has fewer lanes than a vector),
prefetch (off, farther ahead) and, with more than one thread, the parallel tasks. CUDA axes are the breakdown,
threads per block, transforms per block (lanes), several kernels (`kernel_per_pass`: kernels over columns
or one per pass, see `multikernel`; a variant whose block scratch exceeds shared memory fails to build and is
skipped) and, for blocks of one transform, whether the input row is staged through shared memory (`stage_input`,
`tuning.CUDA_STAGE_INPUT`: coalesced reads against one less barrier and less shared memory).

* measure: every single-knob change of the estimate variant is timed with it, side by side; then the winning
  changes of all axes that beat the estimate are combined into one variant, and every two of the three
  fastest into others, timed with the best single change and the estimate.
* patient: then coordinate descent over wider axes: from the measure winner, each axis in turn is timed over
  all its values with the current best, and the best value kept, until a sweep changes nothing (at most
  `PATIENT_SWEEPS` sweeps).

Timing (`timing_samples`): every candidate is compiled (a candidate that fails to compile is logged and skipped;
candidates with equal breakdown trees and other fields, or whose scheduled IR is structurally equal, are timed
once), then run on fresh buffers of the plan's layouts (its strides too: the operator checks them): `rounds`
rounds, each timing every candidate in turn (the order rotates per round) as the mean call time over calls lasting
at least `ROUND_SECONDS`; a candidate's time is its median over the rounds (on the process's CPU time with one
thread on llvm, else on wall time). On CUDA one timed run enqueues `CUDA_CALLS_PER_SYNC` calls back to back and
synchronizes the device once, as the GPU benchmarks do (a synchronization per call would add its latency and the
launch's, about 10 µs, to every call). A candidate replaces the current best only when it is faster by more than
`MARGIN` (noise keeps the simpler choice). The final winner is confirmed against the estimate variant in paired
rounds (the two timed back to back, in alternating order, `CONFIRM_ROUNDS` times the rounds): it is kept only when
the median over the rounds of its time divided by the estimate's is below 1 - `CONFIRM_MARGIN` (a ratio of
neighbours cancels the drift that independent medians keep: another process, the clock, the memory's state).
Wall-time searches (more than one thread, CUDA) are noisier than CPU-time ones: there the confirmation has
`WALL_CONFIRM_ROUNDS` times the rounds and needs `WALL_CONFIRM_MARGIN`. On CUDA the timings need a GPU: without one
the search returns the estimate plan, saying why, and so it does for a CUDA plan with istride/idist/ostride/odist
(strided device tensors, which it cannot allocate). The outcome (`SearchReport`) lists every timed variant with its
time and why the winner won.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
import tvm_ffi

from ..cuda import gpu_available
from .factor import Breakdown, CooleyTukey
from .tuning import CUDA_STAGE_MIN_LANES
from .variants import Variant

__all__ = ["CONFIRM_MARGIN", "CONFIRM_ROUNDS", "CUDA_CALLS_PER_SYNC", "EFFORTS", "MARGIN", "PATIENT_SWEEPS",
           "ROUNDS", "ROUND_SECONDS", "WALL_CONFIRM_MARGIN", "WALL_CONFIRM_ROUNDS", "Candidate", "SearchReport", "axes",
           "label", "paired_ratio", "search", "seconds_per_call", "single_changes", "timing_samples"]

logger = logging.getLogger("tvm_tailsplit.fft")

EFFORTS = ("estimate", "measure", "patient")
# rounds of side-by-side timings per candidate (the median is kept) and the least time of one timing
ROUNDS = 5
ROUND_SECONDS = 0.02
# CUDA calls per synchronization of a timed run (the per-call time is the run's divided by it)
CUDA_CALLS_PER_SYNC = 16
# a candidate must be this much faster (relative) than the current best to replace it
MARGIN = 0.01
# the winner's paired confirmation against the estimate variant: this many times the rounds, and the median
# ratio of their times must be below 1 - this margin (on CPU time, one thread)
CONFIRM_ROUNDS = 2
CONFIRM_MARGIN = 0.02
# ... and on wall time (more than one thread, or a GPU), where another process's burst slows one side of a pair:
# a two-thread r2c 1024 search kept a variant 1.04-1.08x slower after a 2-round, 1% confirmation of medians
WALL_CONFIRM_ROUNDS = 4
WALL_CONFIRM_MARGIN = 0.03
# coordinate-descent sweeps of a patient search at most
PATIENT_SWEEPS = 3


@dataclass
class Candidate:
    """One variant of a search: its `label` (what changed from the estimate), `seconds` per call (median of the
    rounds of the last group it was timed in; None when not timed), `against` (the label and seconds of the
    group's first variant, the one it was compared with, in the same rounds) and `note` (why it was not timed,
    or which candidate has the same IR)."""

    label: str
    variant: Variant
    seconds: float | None = None
    note: str = ""
    against: tuple[str, float] | None = None


@dataclass
class SearchReport:
    """How a plan's variant was chosen: `effort`, `source` ("timed", "wisdom" or "estimate" when the search fell
    back to the rules), the `candidates` in the order they were timed, the `winner`'s label and the `reason`, and
    the `confirmation` (the fastest variant's median paired time ratio against the estimate variant)."""

    effort: str
    source: str
    winner: str = "estimate"
    reason: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    seconds: float = 0.0
    confirmation: float | None = None  # the fastest's paired time ratio against the estimate variant, if timed

    def describe(self) -> list[str]:
        """The report as lines of `Plan.describe()`."""
        lines = [f"search: effort={self.effort}, variant from {self.source}; winner {self.winner}: {self.reason}"]
        if self.candidates:
            lines.append(f"timed variants ({len(self.candidates)}, {self.seconds:.1f} s in all; median µs per call, "
                         "and the variant each was compared with in the same rounds):")
            for c in sorted(self.candidates, key=lambda c: (c.seconds is None, c.seconds or 0.0)):
                time_text = "-" if c.seconds is None else f"{c.seconds * 1e6:.1f}"
                notes = [c.note] if c.note else []
                if c.against is not None and c.against[0] != c.label:
                    notes.append(f"vs {c.against[1] * 1e6:.1f} {c.against[0]}")
                lines.append(f"  {time_text:>10} {c.label}" + (f" ({'; '.join(notes)})" if notes else ""))
        return lines


def _top_radices(tree: Breakdown) -> list[int]:
    """The radices of a Cooley-Tukey chain in order (one entry for any other breakdown)."""
    if isinstance(tree, CooleyTukey):
        return [tree.left.n, *_top_radices(tree.right)]
    return [tree.n]


def _orders(radices: list[int], wide: bool) -> list[tuple[int, ...]]:
    """Other orders of a chain's radices: reversed and largest first (wide: every distinct order, at most 24)."""
    if len(set(radices)) < 2:
        return []
    if wide:
        orders = sorted(set(itertools.permutations(radices)))[:24]
    else:
        largest = radices.index(max(radices))
        orders = [tuple(reversed(radices)), (radices[largest], *radices[:largest], *radices[largest + 1:])]
    return [order for order in dict.fromkeys(orders) if list(order) != radices]


def axes(base: Variant, limit: Variant, batch: int, cuda: bool, threads: int, wide: bool,
         radices: list[int] | None = None) -> dict[str, list[dict]]:
    """axis name -> field changes of `base` to try (each a dict for `dataclasses.replace`), for one target.

    `limit` bounds the breakdown (no variant's codelet or radix limit exceeds its codelet limit);
    `wide` gives the patient search's wider value sets; `radices`: the top-level radices of base's breakdown
    (other orders of them are an axis)."""
    result: dict[str, list[dict]] = {}
    c, r = base.codelet_limit, base.radix_limit
    if wide:
        breakdowns = {(cl, min(rl, cl)) for cl in (8, 16, 32, c) for rl in (2, 4, 8, 16, r)}
    else:
        breakdowns = {(c, max(2, r // 2)), (c, min(c, 2 * r)), (max(2, c // 2), min(r, max(2, c // 2)))}
    result["breakdown"] = [{"codelet_limit": cl, "radix_limit": rl, "radices": ()} for cl, rl in sorted(breakdowns)
                           if cl <= limit.codelet_limit and (cl, rl) != (c, r)]
    result["order"] = [{"radices": order} for order in _orders(radices or [], wide)]
    if cuda:
        result["cuda_threads"] = [{"cuda_threads": t} for t in ((32, 64, 128, 256, 512) if wide else (64, 256))]
        result["kernels"] = [{"kernel_per_pass": True}]
        if base.lanes < CUDA_STAGE_MIN_LANES:  # blocks of one transform: their input row staged or read in place
            result["staging"] = [{"stage_input": not base.stage_input}]
        values = (1, 2, 4, 8, base.lanes // 4, base.lanes // 2, 2 * base.lanes) if wide else \
            (base.lanes // 2, 2 * base.lanes)
        result["lanes"] = [{"lanes": value} for value in sorted(set(values))
                           if 1 <= value <= batch and value != base.lanes]
        return result
    lanes = [1, 2 * base.lanes, 4 * base.lanes] + ([base.lanes // 2, 8, 16] if wide else [])
    result["lanes"] = [{"lanes": value} for value in lanes if 1 <= value <= batch and value != base.lanes]
    widths, scales = ((4, 8, 16), (1, 2, 4)) if wide else ((2 * base.vector_width,), (base.inner_vector_scale,))
    result["vectors"] = [{"vector_width": w, "inner_vector_scale": s} for w in widths for s in scales
                         if base.lanes < w]
    distances = (4 * base.prefetch_distance,) + ((2 * base.prefetch_distance, 8 * base.prefetch_distance)
                                                 if wide else ())
    result["prefetch"] = [{"prefetch_bytes": 0}] + [{"prefetch_distance": d} for d in distances
                                                      if base.prefetch_bytes]
    if threads > 1:
        result["tasks"] = [{"parallel_tasks": t} for t in ((threads, 4 * threads, 16 * threads, 256) if wide
                                                            else (threads,))]
    return result


def single_changes(base: Variant, request: Any, limit: Variant, batch: int, cuda: bool, threads: int,
                   wide: bool) -> dict[str, list[tuple[dict, Variant]]]:
    """axis -> (change, variant) of the single-knob changes of `base` (`axes`) that build a breakdown of the
    transform `request` (a `spec.FFTSpec`): the variants a search times beside `base`."""
    result: dict[str, list[tuple[dict, Variant]]] = {}
    radices = _top_radices(base.tree(request))
    for axis, changes in axes(base, limit, batch, cuda, threads, wide, radices).items():
        result[axis] = []
        for change in changes:
            try:
                variant = dataclasses.replace(base, **change)
                variant.tree(request)
            except ValueError:  # e.g. a radix limit above the codelet limit
                continue
            result[axis].append((change, variant))
    return result


def label(variant: Variant, estimate: Variant) -> str:
    """A variant named by its changes from the estimate variant ("estimate" for none)."""
    difference = variant.differences(estimate)
    return "estimate" if difference == "same" else difference


def timing_samples(plans: dict[str, Any], rounds: int, run_inputs: Callable[[Any], Callable[[], None]],
                   clock: Callable[[], float] = time.perf_counter, calls_per_run: int = 1) -> dict[str, list[float]]:
    """label -> seconds per call of every plan in each of `rounds` rounds, timed side by side (the order rotates
    per round) on `clock`; `run_inputs(plan)` returns a zero-argument run of `calls_per_run` calls of the plan on
    its fresh buffers."""
    runs = {name: run_inputs(p) for name, p in plans.items()}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    labels = list(runs)
    for index in range(rounds):
        for name in labels[index % len(labels):] + labels[:index % len(labels)]:
            runs[name]()
            samples[name].append(seconds_per_call(runs[name], ROUND_SECONDS, clock) / calls_per_run)
    return samples


def paired_ratio(samples: list[float], reference: list[float]) -> float:
    """The median over rounds of a plan's time divided by the reference's time in the same round."""
    return statistics.median(s / r for s, r in zip(samples, reference, strict=True))


def seconds_per_call(run: Callable[[], Any], min_seconds: float,
                     clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call of `run`, called until at least `min_seconds` have passed on `clock`."""
    calls, start = 0, clock()
    while True:
        run()
        calls += 1
        elapsed = clock() - start
        if elapsed >= min_seconds:
            return elapsed / calls


class _Search:
    """One search: the compiled plans by variant, the candidates timed so far, the timing inputs."""

    def __init__(self, build: Callable[[Variant], Any], estimate_plan: Any, rounds: int,
                 clock: Callable[[], float]) -> None:
        self.build, self.rounds, self.clock = build, rounds, clock
        self.calls_per_run = CUDA_CALLS_PER_SYNC if estimate_plan.is_cuda else 1  # calls in one run of `_run`
        self.estimate = estimate_plan.variant
        self.plans: dict[Variant, Any] = {self.estimate: estimate_plan}
        self.hashes: dict[int, Variant] = {tvm_ffi.structural_hash(estimate_plan.module): self.estimate}
        self.candidates: dict[Variant, Candidate] = {}
        self.inputs: dict[str, Any] = {}
        self.samples: dict[Variant, list[float]] = {}  # of the last `time`, per round
        self.request = estimate_plan.spec
        # variants whose breakdown trees are equal and other fields too build the same IR: compiled once
        self.shapes: dict[tuple, Variant] = {self._shape(self.estimate): self.estimate}

    def _shape(self, variant: Variant) -> tuple:
        fields = variant.to_dict()
        del fields["codelet_limit"], fields["radix_limit"], fields["radices"]
        return variant.tree(self.request), tuple(sorted(fields.items()))

    def compiled(self, variant: Variant) -> Any | None:
        """The plan of `variant`, None (and a logged reason) when it fails to build or repeats another's IR."""
        if variant in self.plans:
            return self.plans[variant]
        name = label(variant, self.estimate)
        same = self.shapes.setdefault(self._shape(variant), variant)
        if same != variant:
            self.candidates[variant] = Candidate(name, variant, note=f"same breakdown as {label(same, self.estimate)}")
            self.plans[variant] = None
            return None
        try:
            started = time.perf_counter()
            plan = self.build(variant)
        except Exception as error:  # any failure of TVM's compiler skips the candidate, the search goes on
            logger.warning("fft search: variant %s failed to compile, skipped: %s", name,
                           str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__)
            self.candidates[variant] = Candidate(name, variant, note=f"failed to compile: {type(error).__name__}")
            self.plans[variant] = None
            return None
        key = tvm_ffi.structural_hash(plan.module)
        same = self.hashes.get(key)
        if same is not None and tvm_ffi.structural_equal(plan.module, self.plans[same].module):
            self.candidates[variant] = Candidate(name, variant, note=f"same IR as {label(same, self.estimate)}")
            self.plans[variant] = None
            logger.info("fft search: %s compiles to the same IR as %s, not timed", name,
                        label(same, self.estimate))
            return None
        self.hashes[key] = variant
        self.plans[variant] = plan
        logger.info("fft search: compiled %s in %.2f s", name, time.perf_counter() - started)
        return plan

    def _run(self, plan: Any) -> Callable[[], None]:
        if not self.inputs:
            rng = np.random.default_rng(0)
            device = tvm.cuda(0) if plan.is_cuda else tvm.cpu(0)
            self.inputs["device"] = device
            if plan.is_cuda:  # compact layouts (`search`)
                self.inputs["x"] = tvm.runtime.tensor(
                    rng.standard_normal(plan.input_shape).astype(plan.real_dtype), device)
                self.inputs["out"] = tvm.runtime.empty(plan.output_shape, plan.real_dtype, device)
            else:
                # buffers with the plan's strides (istride/idist/ostride/odist), which the operator checks
                (_, x), (_, out) = plan._allocate(plan.input_layout), plan._allocate(plan.output_layout)
                x[...] = rng.standard_normal(x.shape)
                self.inputs["arrays"] = (x, out)
                self.inputs["x"], self.inputs["out"] = plan._wrap(x), plan._wrap(out)
        x, out, device = self.inputs["x"], self.inputs["out"], self.inputs["device"]
        if plan.is_cuda:
            def run() -> None:
                for _ in range(self.calls_per_run):
                    plan(x, out)
                device.sync()
            return run
        function, constants = plan._function, plan._constant_tensors()
        return lambda: function(x, out, *constants)

    def time(self, variants: Iterable[Variant], rounds: int | None = None) -> dict[Variant, float]:
        """Variant -> median seconds per call of those that compile to distinct IR, timed side by side
        (`rounds`: None for the search's)."""
        plans = {}
        for variant in dict.fromkeys(variants):
            plan = self.compiled(variant)
            if plan is not None:
                plans[variant] = plan
        labelled = {label(v, self.estimate): p for v, p in plans.items()}
        samples = timing_samples(labelled, rounds or self.rounds, self._run, self.clock, self.calls_per_run)
        self.samples = {variant: samples[label(variant, self.estimate)] for variant in plans}
        medians = {name: statistics.median(values) for name, values in samples.items()}
        result = {}
        first = next(iter(labelled), None)
        for variant in plans:
            name = label(variant, self.estimate)
            seconds = medians[name]
            previous = self.candidates.get(variant)
            # a variant timed in several groups keeps its latest median, beside the group's first (the current best)
            self.candidates[variant] = Candidate(name, variant, seconds, "" if previous is None else previous.note,
                                                 (first, medians[first]))
            result[variant] = seconds
            logger.info("fft search: %-60s %10.1f µs per call", name, seconds * 1e6)
        return result

    def ratio(self, variant: Variant, rounds: int) -> float:
        """`paired_ratio` of `variant` against the estimate variant, timed in pairs over `rounds` rounds."""
        self.time([self.estimate, variant], rounds)
        return paired_ratio(self.samples[variant], self.samples[self.estimate])


def _best(times: dict[Variant, float], current: Variant) -> Variant:
    """The fastest variant, unless it beats `current` (one of them) by no more than `MARGIN`."""
    fastest = min(times, key=times.get)
    return fastest if times[fastest] < (1 - MARGIN) * times[current] else current


def search(effort: str, estimate_plan: Any, build: Callable[[Variant], Any], limit: Variant, threads: int,
           rounds: int = ROUNDS) -> tuple[Any, SearchReport]:
    """(plan, report) of the fastest variant found by `effort` ("measure" or "patient"), starting from
    `estimate_plan`; `build(variant)` compiles a plan; `limit` bounds the breakdown; `threads` is TVM's thread
    count."""
    started = time.perf_counter()
    report = SearchReport(effort, "timed")
    if estimate_plan.is_cuda and not gpu_available():
        report.source = "estimate"
        report.reason = "no CUDA GPU to time on: the rules' (estimate) variant"
        logger.info("fft search: %s needs a GPU to time CUDA plans and none is present: using the estimate "
                    "variant", effort)
        return estimate_plan, report
    if estimate_plan.is_cuda and not (estimate_plan.input_layout.is_compact()
                                      and estimate_plan.output_layout.is_compact()):
        report.source = "estimate"
        report.reason = ("a CUDA plan with istride/idist/ostride/odist runs on strided device tensors, which the "
                         "search cannot allocate: the rules' (estimate) variant")
        logger.info("fft search: %s of a CUDA plan with strided layouts is not timed: using the estimate variant",
                    effort)
        return estimate_plan, report
    # one thread on llvm: this process's CPU time, which other processes on a shared machine do not inflate as
    # they inflate wall time; more threads or a GPU: wall time (CPU time would count the pool's idle spinning)
    single = not estimate_plan.is_cuda and threads == 1
    state = _Search(build, estimate_plan, rounds, time.process_time if single else time.perf_counter)
    estimate = state.estimate

    def options(base: Variant, wide: bool) -> dict[str, list[tuple[dict, Variant]]]:
        return single_changes(base, estimate_plan.spec, limit, estimate_plan.batch, estimate_plan.is_cuda, threads,
                              wide)

    # measure: every single-knob change beside the estimate, then the winning changes combined: all of them,
    # and every two of the three fastest
    singles = options(estimate, wide=False)
    times = state.time([estimate, *(v for pairs in singles.values() for _, v in pairs)])
    best = _best(times, estimate)
    winners = []  # (seconds, change) of each axis's fastest change that beat the estimate
    for pairs in singles.values():
        timed = [(times[v], change) for change, v in pairs if v in times]
        if timed and min(timed, key=lambda t: t[0])[0] < (1 - MARGIN) * times[estimate]:
            winners.append(min(timed, key=lambda t: t[0]))
    winners.sort(key=lambda t: t[0])
    merges = [[change for _, change in winners]]
    merges += [[a, b] for i, (_, a) in enumerate(winners[:3]) for _, b in winners[i + 1:3]]
    combined = []
    for changes in merges:
        try:
            variant = dataclasses.replace(estimate, **{k: v for change in changes for k, v in change.items()})
            variant.tree(estimate_plan.spec)
        except ValueError:  # changes of two axes that do not go together
            continue
        if variant not in times:
            combined.append(variant)
    if combined:
        best = _best(state.time([estimate, best, *combined]), estimate)
    if effort == "patient":
        # coordinate descent over the wider axes from the measure winner
        for _ in range(PATIENT_SWEEPS):
            previous = best
            for pairs in options(best, wide=True).values():
                best = _best(state.time([best, *(v for _, v in pairs)]), best)
            if best == previous:
                break
    report.reason = f"no variant was more than {MARGIN:.0%} faster than the estimate variant"
    if best != estimate:
        # the winner confirmed against the estimate variant in paired rounds: noise in the groups before (another
        # process taking a core for a while) must not make a slower variant the plan
        wall = not single
        confirm_rounds = (WALL_CONFIRM_ROUNDS if wall else CONFIRM_ROUNDS) * rounds
        margin = WALL_CONFIRM_MARGIN if wall else CONFIRM_MARGIN
        ratio = report.confirmation = state.ratio(best, confirm_rounds)
        pairs = f"{confirm_rounds} paired rounds on {'wall' if wall else 'CPU'} time"
        if ratio < 1 - margin:
            report.reason = (f"the fastest, confirmed in {pairs}: its time is {ratio:.3f} of the estimate "
                             f"variant's (median ratio; {1 / ratio:.2f}x)")
        else:
            report.reason = (f"the fastest, {label(best, estimate)}, was not confirmed in {pairs}: its time was "
                             f"{ratio:.3f} of the estimate variant's (median ratio; needs below {1 - margin:.2f})")
            best = estimate
    report.seconds = time.perf_counter() - started
    report.candidates = list(state.candidates.values())
    report.winner = label(best, estimate)
    report.reason += f"; estimate variant {state.candidates[estimate].seconds * 1e6:.1f} µs per call"
    logger.info("fft search (%s): %s in %.1f s: %s", effort, report.winner, report.seconds, report.reason)
    return state.plans[best], report
