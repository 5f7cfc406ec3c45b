"""plan(effort="measure" | "patient"): searched plans are correct, the estimate variant is the rules' plan, the
search reports its timings, wisdom round-trips and foreign wisdom is refused (fft/variants, search, wisdom)."""

import dataclasses
import json
import logging
import math
import re

import numpy as np
import pytest
import tvm

from tvm_tailsplit import fft
from tvm_tailsplit.cuda import CudaLimits, compile_cuda_source, cuda_target, gpu_available
from tvm_tailsplit.fft import planner, search, wisdom
from tvm_tailsplit.fft.schedule import choose_inner_vector_scale, choose_lanes
from tvm_tailsplit.fft.spec import FFTSpec
from tvm_tailsplit.fft.tuning import (
    CUDA_THREADS,
    PARALLEL_TASKS,
    PREFETCH_BYTES,
    PREFETCH_DISTANCE,
    VECTOR_LANES,
)
from tvm_tailsplit.fft.variants import Variant, estimate_variant, scratch_bytes

RNG = np.random.default_rng(7)
SM_80 = CudaLimits.of(cuda_target("sm_80"))  # the limits of target="cuda" in tests not marked gpu


def complex_input(batch: int, n: int, dtype=np.complex64) -> np.ndarray:
    return (RNG.standard_normal((batch, n)) + 1j * RNG.standard_normal((batch, n))).astype(dtype)


def relative_error(result: np.ndarray, expected: np.ndarray) -> float:
    return float(np.linalg.norm(result - expected) / np.linalg.norm(expected))


@pytest.fixture
def fresh(monkeypatch):
    """No wisdom and no cached plans before and after the test; searches time 1 ms per round."""
    monkeypatch.setattr(search, "ROUND_SECONDS", 0.001)
    fft.forget_wisdom()
    planner._cached_plan.cache_clear()
    yield
    fft.forget_wisdom()
    planner._cached_plan.cache_clear()


@pytest.mark.parametrize("n, batch, kind", [(64, 6, "c2c"), (13, 5, "c2c"), (30, 4, "r2c"), (32, 5, "c2r")])
def test_measure_plans_match_numpy(fresh, n, batch, kind):
    p = fft.plan(n, batch, kind=kind, effort="measure", rounds=1)
    if kind == "c2c":
        x = complex_input(batch, n)
        expected = np.fft.fft(x)
    elif kind == "r2c":
        x = RNG.standard_normal((batch, n)).astype(np.float32)
        expected = np.fft.rfft(x)
    else:
        x = complex_input(batch, n // 2 + 1)
        expected = np.fft.irfft(x, n=n)
    assert relative_error(p(x), expected) < 1e-5
    timed = [c for c in p.search.candidates if c.seconds is not None]
    assert any(c.label == "estimate" for c in timed) and len(timed) >= 2
    # the estimate variant is a candidate and a winner is confirmed against it: never a slower winner
    if p.search.winner != "estimate":
        assert p.search.confirmation < 1 - search.CONFIRM_MARGIN


def scripted_search(monkeypatch, confirmation_ratio: float, threads: int = 1) -> tuple:
    """A measure search of c2c 64 x 8 whose timings are scripted: in the groups (3 rounds), the variant of twice
    the lanes takes 0.5 of the others' time; in the confirmation pairs, `confirmation_ratio` of the estimate's."""
    spec = FFTSpec(64)
    (layout_in, layout_out), target = spec.layouts(8), planner._resolve_target("llvm")
    estimate = planner.Plan(spec, 8, target, layout_in, layout_out)
    fast = f"lanes={2 * estimate.variant.lanes}"
    calls = []

    def samples(plans, rounds, run_inputs, clock, calls_per_run):
        calls.append((list(plans), rounds))
        confirming = rounds > 3  # the groups have the search's 3 rounds, the confirmation more
        ratio = confirmation_ratio if confirming else 0.5
        return {name: [(ratio if name == fast else 1.0) * 1e-3] * rounds for name in plans}

    monkeypatch.setattr(search, "timing_samples", samples)
    build = lambda variant: planner.Plan(spec, 8, target, layout_in, layout_out, variant)  # noqa: E731
    chosen, report = search.search("measure", estimate, build, estimate.variant, threads=threads, rounds=3)
    return chosen, report, fast, calls


def test_a_winner_is_kept_only_when_paired_confirmation_agrees(fresh, monkeypatch):
    chosen, report, fast, calls = scripted_search(monkeypatch, 0.9)
    assert report.winner == fast and chosen.variant.lanes == 2 * estimate_variant(FFTSpec(64), 8, None).lanes
    assert report.confirmation == pytest.approx(0.9) and "confirmed in 6 paired rounds on CPU time" in report.reason
    assert calls[-1][1] == search.CONFIRM_ROUNDS * 3


@pytest.mark.parametrize("threads, ratio", [(1, 0.985), (2, 0.975)])
def test_a_winner_that_the_confirmation_does_not_repeat_is_dropped(fresh, monkeypatch, threads, ratio):
    # within the margin of its clock (2% on CPU time, 3% on wall time with 2 threads): the estimate stays
    chosen, report, fast, calls = scripted_search(monkeypatch, ratio, threads)
    assert report.winner == "estimate" and chosen.variant == estimate_variant(FFTSpec(64), 8, None)
    assert f"{fast}, was not confirmed" in report.reason and report.confirmation == pytest.approx(ratio)
    wall = threads > 1
    assert calls[-1][1] == (search.WALL_CONFIRM_ROUNDS if wall else search.CONFIRM_ROUNDS) * 3


def test_patient_plan_matches_numpy_and_times_more_variants(fresh):
    measured = fft.plan(12, 2, effort="measure", rounds=1)
    patient = fft.plan(12, 2, effort="patient", rounds=1)
    x = complex_input(2, 12)
    assert relative_error(patient(x), np.fft.fft(x)) < 1e-5
    assert len(patient.search.candidates) > len(measured.search.candidates)


@pytest.mark.parametrize("n, batch, dtype", [(16, 1000, "complex64"), (1000, 3, "complex64"), (97, 8, "complex128"),
                                             (4096, 2, "complex64")])
def test_estimate_variant_is_the_rules(n, batch, dtype):
    spec = FFTSpec(n, dtype=dtype)
    variant = estimate_variant(spec, batch, cuda_limits=None)
    lanes = choose_lanes(spec.passes(), spec.real_dtype, batch)
    group_scratch = scratch_bytes(spec, variant)  # a lane group's scratch: 2 floats per complex, per lane
    assert group_scratch % (2 * np.dtype(spec.real_dtype).itemsize * lanes) == 0
    assert variant == Variant(spec.codelet_limit, spec.radix_limit, lanes, VECTOR_LANES[spec.real_dtype],
                              choose_inner_vector_scale(group_scratch), PARALLEL_TASKS, PREFETCH_BYTES,
                              PREFETCH_DISTANCE, CUDA_THREADS, False)
    p = fft.plan(n, batch, dtype=dtype)
    assert p.variant == variant and p.search is None and p.lanes == lanes
    # a plan built from the variant explicitly is the same IR as the default plan
    again = planner.Plan(p.spec, batch, p.target, p.input_layout, p.output_layout, variant)
    tvm.ir.assert_structural_equal(again.module, p.module)


def test_estimate_variant_on_cuda_runs_one_kernel_per_pass_beyond_shared_memory():
    assert not estimate_variant(FFTSpec(1024), 4, cuda_limits=SM_80).kernel_per_pass
    assert estimate_variant(FFTSpec(65536), 4, cuda_limits=SM_80).kernel_per_pass
    assert estimate_variant(FFTSpec(1024), 4, cuda_limits=SM_80).prefetch_bytes == 0


def test_describe_lists_timed_variants_and_why(fresh):
    text = fft.plan(64, 8, effort="measure", rounds=1).describe()
    assert "search: effort=measure, variant from timed; winner" in text
    assert "timed variants" in text and "µs per call" in text
    timed_lines = [line for line in text.splitlines() if line.startswith("  ") and line.strip()[0].isdigit()]
    assert any(line.endswith(" estimate") for line in timed_lines) and len(timed_lines) >= 2


def test_wisdom_round_trip_builds_the_same_variant_without_timing(fresh, caplog):
    first = fft.plan(24, 5, effort="measure", rounds=1)
    text = fft.export_wisdom()
    data = json.loads(text)
    assert data["format"] == 1 and data["tvm"] == tvm.__version__ and len(data["entries"]) == 1
    fft.forget_wisdom()
    planner._cached_plan.cache_clear()
    assert fft.import_wisdom(text) == 1
    with caplog.at_level(logging.INFO, logger="tvm_tailsplit.fft"):
        again = fft.plan(24, 5, effort="measure", rounds=1)
    assert again.variant == first.variant and again is not first
    assert again.search.source == "wisdom" and not again.search.candidates
    assert not [r for r in caplog.records if "fft search" in r.getMessage()]  # nothing compiled or timed
    x = complex_input(5, 24)
    assert relative_error(again(x), np.fft.fft(x)) < 1e-5


def test_wisdom_file_round_trip(fresh, tmp_path):
    fft.plan(8, 3, effort="measure", rounds=1)
    # a patient search does not take a measure search's wisdom; a measure search takes a patient one's
    assert fft.plan(8, 3, effort="patient", rounds=1).search.source == "timed"
    planner._cached_plan.cache_clear()
    assert fft.plan(8, 3, effort="measure", rounds=1).search.source == "wisdom"
    path = tmp_path / "wisdom.json"
    text = fft.export_wisdom(path)
    assert path.read_text() == text
    fft.forget_wisdom()
    assert fft.import_wisdom(path=path) == 1
    assert json.loads(text)["entries"][0]["effort"] == "patient"


@pytest.mark.parametrize("field, value", [("tvm", "0.1.0"), ("tvm_tailsplit", "0.0.0"), ("format", 99),
                                          ("host", {"cpu": "pentium", "features": "0"})])
def test_foreign_wisdom_is_ignored_with_a_warning(fresh, field, value):
    key = wisdom.problem_key(FFTSpec(8), 3, *FFTSpec(8).layouts(3), planner._resolve_target("llvm"), 1)
    variant = dataclasses.replace(estimate_variant(FFTSpec(8), 3, cuda_limits=None), prefetch_bytes=0)
    wisdom.record(key, "measure", variant)
    data = json.loads(fft.export_wisdom())
    fft.forget_wisdom()
    assert fft.import_wisdom(json.dumps(data)) == 1 and wisdom.lookup(key, "measure") == variant
    fft.forget_wisdom()
    data[field] = value
    with pytest.warns(UserWarning, match="wisdom ignored"):
        assert fft.import_wisdom(json.dumps(data)) == 0
    assert wisdom.lookup(key, "measure") is None


def test_bad_wisdom_and_bad_arguments_name_them(fresh, tmp_path):
    with pytest.raises(ValueError, match="not wisdom"):
        fft.import_wisdom("{")
    with pytest.raises(TypeError, match="text must be a str"):
        fft.import_wisdom(b"{}")
    binary = tmp_path / "wisdom.bin"  # a file that is not text: the codec's error did not say what was wrong
    binary.write_bytes(b"\xff\xfe\x00wisdom")
    with pytest.raises(ValueError, match=r"path '.*wisdom\.bin' is not wisdom \(not UTF-8 text"):
        fft.import_wisdom(path=binary)
    exported = json.loads(fft.export_wisdom())
    for entries, message in [("n", r"'entries' is a str, not a list"),
                             ([{"key": "k"}], r"\{'key': 'k'\}: no 'problem'"),
                             (["x"], "an entry is an object with problem, effort and variant, not a str")]:
        with pytest.raises(ValueError, match=message):
            fft.import_wisdom(json.dumps({**exported, "entries": entries}))
    with pytest.raises(ValueError, match="effort"):
        fft.plan(8, effort="exhaustive")
    with pytest.raises(TypeError, match="effort"):
        fft.plan(8, effort=1)
    with pytest.raises(TypeError, match="verbose"):
        fft.plan(8, verbose="yes")
    with pytest.raises(ValueError, match="rounds"):
        fft.plan(8, effort="measure", rounds=0)
    with pytest.raises(ValueError, match="radix_limit"):
        dataclasses.replace(estimate_variant(FFTSpec(8), 1, cuda_limits=None), radix_limit=64)
    with pytest.raises(ValueError, match="lanes"):
        dataclasses.replace(estimate_variant(FFTSpec(8), 1, cuda_limits=None), lanes=0)


def test_verbose_shows_progress_on_stderr(fresh, capsys):
    fft.plan(8, 8, effort="measure", rounds=1, verbose=True)
    err = capsys.readouterr().err
    assert "tvm_tailsplit.fft: fft search: compiled" in err and "µs per call" in err
    fft.plan(8, 6, effort="measure", rounds=1)
    assert "fft search" not in capsys.readouterr().err  # the handler is gone after the call


def test_overlapping_verbose_calls_share_the_stderr_handler_and_restore_the_level(capsys):
    # two threads' verbose plans that overlap (the first ends before the second): each restored the level it found,
    # so the first to end silenced the other's progress and the last left the logger at INFO for good
    logger = logging.getLogger("tvm_tailsplit.fft")
    level = logger.level
    first, second = planner._progress(True), planner._progress(True)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    logger.info("still verbose")  # the second call is still in progress
    second.__exit__(None, None, None)
    logger.info("quiet again")
    err = capsys.readouterr().err
    assert err.count("still verbose") == 1 and "quiet again" not in err
    assert logger.level == level


def test_verbose_shows_the_compile_of_an_estimate_plan(fresh, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", str(tmp_path))  # compiled here, not loaded
    fft.plan(23, 3, verbose=True)
    err = capsys.readouterr().err
    assert "building the c2c plan of n=23" in err and re.search(r"built the c2c plan of n=23 in [0-9.]+ s", err)


def test_a_candidate_that_fails_to_compile_is_logged_and_skipped(fresh, caplog):
    spec = FFTSpec(64)
    (layout_in, layout_out), target = spec.layouts(8), planner._resolve_target("llvm")

    def build(variant=None):
        if variant is not None and variant.lanes == 2 * estimate_lanes:
            raise RuntimeError("no code for these lanes")
        return planner.Plan(spec, 8, target, layout_in, layout_out, variant)

    estimate_lanes = estimate_variant(spec, 8, cuda_limits=None).lanes
    estimate = build()
    with caplog.at_level(logging.WARNING, logger="tvm_tailsplit.fft"):
        chosen, report = search.search("measure", estimate, build, estimate.variant, threads=1, rounds=1)
    failed = [c for c in report.candidates if c.variant.lanes == 2 * estimate_lanes]
    assert failed and all(c.seconds is None and "failed to compile" in c.note for c in failed)
    assert any("failed to compile" in r.getMessage() for r in caplog.records)
    assert chosen.variant.lanes != 2 * estimate_lanes


def test_timing_samples_are_seconds_per_call_of_runs_of_several_calls():
    # a CUDA run enqueues CUDA_CALLS_PER_SYNC calls and synchronizes once: its time is divided among them
    now = [0.0]

    def run_inputs(seconds_per_call):
        def run():
            now[0] += 4 * seconds_per_call  # a run of 4 calls
        return run

    samples = search.timing_samples({"a": 1e-3, "b": 3e-3}, 3, run_inputs, lambda: now[0], calls_per_run=4)
    assert samples == {"a": [pytest.approx(1e-3)] * 3, "b": [pytest.approx(3e-3)] * 3}


@pytest.mark.gpu
def test_cuda_measure_on_the_gpu_times_variants_and_keeps_a_correct_winner(fresh):
    from tvm_tailsplit.cuda import device_arch

    target = {"kind": "cuda", "arch": device_arch()}
    p = fft.plan(256, 64, target=target, effort="measure", rounds=2)
    assert p.search.source == "timed", p.search.reason
    timed = [c for c in p.search.candidates if c.seconds is not None]
    assert len(timed) >= 3 and all(0 < c.seconds < 1e-2 for c in timed), p.describe()
    assert any(c.label.startswith("cuda_threads=") for c in timed), p.describe()
    x = complex_input(64, 256)
    assert relative_error(p(x), np.fft.fft(x)) < 1e-5
    assert len(json.loads(fft.export_wisdom())["entries"]) == 1
    planner._cached_plan.cache_clear()
    again = fft.plan(256, 64, target=target, effort="measure", rounds=2)  # the winner from the wisdom, not timed
    assert again.search.source == "wisdom" and again.variant == p.variant


def test_cuda_measure_without_a_gpu_falls_back_to_the_estimate(fresh, caplog):
    if gpu_available():
        pytest.skip("a CUDA GPU is present: the search times on it")
    with caplog.at_level(logging.INFO, logger="tvm_tailsplit.fft"):
        p = fft.plan(64, 4, target="cuda", effort="measure")
    assert p.variant == estimate_variant(FFTSpec(64), 4, cuda_limits=SM_80)
    assert p.search.source == "estimate" and "no CUDA GPU" in p.search.reason
    assert any("none is present" in r.getMessage() for r in caplog.records)
    assert not json.loads(fft.export_wisdom())["entries"]  # nothing was timed, nothing is recorded


@pytest.mark.parametrize("kind, layout", [
    ("c2c", {"idist": 16, "odist": 12}),                             # gaps between transforms
    ("c2c", {"istride": 3, "idist": 1, "ostride": 3, "odist": 1}),   # the columns of a (10, 3) array
    ("r2c", {"idist": 16, "odist": 8}),
])
def test_measure_plans_of_strided_layouts_time_buffers_with_those_strides(fresh, kind, layout):
    # the search timed compact buffers, which the operator refused ("Invalid input.strides[0]")
    p = fft.plan(10, 3, kind=kind, effort="measure", rounds=1, **layout)
    assert p.search.source == "timed" and sum(c.seconds is not None for c in p.search.candidates) >= 2
    x, expected = (complex_input(3, 10), np.fft.fft) if kind == "c2c" else \
        (RNG.standard_normal((3, 10)).astype(np.float32), np.fft.rfft)
    if layout.get("istride", 1) > 1:
        x = np.ascontiguousarray(x.T).T  # rows of elements 3 apart, transforms 1 apart
    else:
        x = np.pad(x, ((0, 0), (0, 6)))[:, :10]  # rows 16 elements apart
    assert relative_error(p(x), expected(x)) < 1e-5


def test_cuda_measure_of_strided_layouts_keeps_the_estimate(fresh, monkeypatch):
    monkeypatch.setattr(search, "gpu_available", lambda: True)  # no device is touched before the layouts' check
    p = fft.plan(16, 4, target="cuda", effort="measure", istride=4, idist=1, ostride=4, odist=1)
    assert p.search.source == "estimate" and "strided device tensors" in p.search.reason
    assert p.variant == estimate_variant(FFTSpec(16), 4, SM_80, layouts=(p.input_layout, p.output_layout))


@pytest.mark.parametrize("n, kind, radices", [(40, "c2c", (8, 5)), (48, "c2c", (2, 4, 6)), (40, "r2c", (4, 5))])
def test_an_explicit_radix_order_is_correct(n, kind, radices):
    spec = FFTSpec(n, kind)
    variant = dataclasses.replace(estimate_variant(spec, 3, cuda_limits=None), radices=radices)
    assert [node.n for node in (variant.tree(spec), variant.tree(spec).right)][1] == math.prod(radices[1:])
    p = planner.Plan(spec, 3, planner._resolve_target("llvm"), *spec.layouts(3), variant)
    if kind == "c2c":
        x = complex_input(3, n)
        assert relative_error(p(x), np.fft.fft(x)) < 1e-5
    else:
        x = RNG.standard_normal((3, n)).astype(np.float32)
        assert relative_error(p(x), np.fft.rfft(x)) < 1e-5
    with pytest.raises(ValueError, match="radices"):
        dataclasses.replace(variant, radices=(3, 5)).tree(spec)


@pytest.mark.nvcc
@pytest.mark.parametrize("change", [dict(lanes=2, cuda_threads=64), dict(kernel_per_pass=True, cuda_threads=256),
                                    dict(lanes=4, radices=(4, 16))])
def test_cuda_variants_compile_with_nvcc(change):
    spec = FFTSpec(64)
    variant = dataclasses.replace(estimate_variant(spec, 4, cuda_limits=SM_80), **change)
    p = planner.Plan(spec, 4, planner._resolve_target("cuda"), *spec.layouts(4), variant)
    source = p.cuda_source("sm_80")
    # kernel name -> threads per block (each kernel is declared, then defined)
    kernels = {name: int(threads) for threads, name in re.findall(r"__launch_bounds__\((\d+)\) (\w+)\(", source)}
    assert kernels and max(kernels.values()) <= variant.cuda_threads
    assert len(kernels) == (len(p.passes.passes) if variant.kernel_per_pass else 1)
    assert compile_cuda_source(source, "sm_80")


# a process that makes a measure plan in the cache directory of its environment and reports how it was chosen
MEASURE_PROCESS = """
import json
import numpy as np
from tvm_tailsplit import fft
from tvm_tailsplit.fft import cache, planner, search

search.ROUND_SECONDS = 0.001
compiles = []
compile_plan = planner._compile
planner._compile = lambda *args: compiles.append(1) or compile_plan(*args)
p = fft.plan(24, 4, effort="measure", rounds=1)
x = (np.arange(96) % 7 - 3j * (np.arange(96) % 5)).reshape(4, 24).astype(np.complex64)
error = float(np.linalg.norm(p(x) - np.fft.fft(x)) / np.linalg.norm(np.fft.fft(x)))
print(json.dumps({"source": p.search.source, "variant": repr(p.variant), "compiles": len(compiles),
                  "error": error, **cache.stats()}))
"""


def run_process(code: str, cache_dir) -> dict:
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).parent.parent.parent
    env = {**os.environ, "TVM_TAILSPLIT_CACHE_DIR": str(cache_dir),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    env.pop("TVM_TAILSPLIT_CACHE", None)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("estimate_wins", [False, True])
def test_saved_wisdom_serves_a_later_process_without_timing_or_compiling(tmp_path, estimate_wins):
    # estimate_wins: no winner is ever confirmed (on either clock), so the search keeps the estimate variant,
    # whose plan is the rules' plan in the cache (otherwise the timings decide)
    timing = "search.ROUND_SECONDS = 0.001"
    never_confirmed = timing + "\nsearch.CONFIRM_MARGIN = search.WALL_CONFIRM_MARGIN = 1.0"
    code = MEASURE_PROCESS.replace(timing, never_confirmed if estimate_wins else timing)
    first = run_process(code, tmp_path)
    assert first["source"] == "timed" and first["compiles"] >= 2 and first["error"] < 1e-5
    assert (tmp_path / wisdom.wisdom_file()).exists()
    assert (first["variant"] == repr(estimate_variant(FFTSpec(24), 4, None))) or not estimate_wins
    second = run_process(code, tmp_path)
    # the earlier search's winner, loaded from the plan cache: nothing timed, nothing compiled
    assert (second["source"], second["variant"], second["compiles"]) == ("wisdom", first["variant"], 0)
    assert second["loaded"] >= 1 and second["error"] < 1e-5


def test_saved_wisdom_of_other_versions_is_skipped_quietly_and_forget_deletes_it(tmp_path, monkeypatch, recwarn):
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wisdom, "_read_from", set())
    saved = json.loads(fft.export_wisdom())
    saved["entries"] = [{"problem": {"made": "up"}, "effort": "measure",
                         "variant": dataclasses.asdict(estimate_variant(FFTSpec(16), 4, None))}]
    path = tmp_path / wisdom.wisdom_file()
    path.write_text(json.dumps({**saved, "tvm": "0.1.0"}))
    assert wisdom.lookup(json.dumps({"made": "up"}, sort_keys=True), "measure") is None
    assert not [w for w in recwarn if "wisdom" in str(w.message)]  # the user's cache, not their input: no warning
    path.write_text(json.dumps(saved))
    monkeypatch.setattr(wisdom, "_read_from", set())
    assert wisdom.lookup(json.dumps({"made": "up"}, sort_keys=True), "measure") is not None
    fft.forget_wisdom(saved=True)
    assert not path.exists()
    assert wisdom.lookup(json.dumps({"made": "up"}, sort_keys=True), "measure") is None


def test_saved_wisdom_that_is_not_text_is_skipped_and_replaced(fresh, tmp_path, monkeypatch):
    # a corrupted wisdom file (bytes that are not UTF-8) raised UnicodeDecodeError from every searching plan() and
    # from every record, which could not replace it
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wisdom, "_read_from", set())
    path = tmp_path / wisdom.wisdom_file()
    path.write_bytes(b'\xff\xfe{"entries": \x00')
    key = json.dumps({"made": "up"}, sort_keys=True)
    assert wisdom.lookup(key, "measure") is None
    variant = estimate_variant(FFTSpec(16), 4, None)
    wisdom.record(key, "measure", variant)
    assert [entry["problem"] for entry in json.loads(path.read_text())["entries"]] == [{"made": "up"}]


def test_saving_wisdom_keeps_what_other_processes_saved_since(fresh, tmp_path, monkeypatch):
    # a process wrote its whole in-memory wisdom over the file at each record: every winner another process had
    # saved since this one first read the file was lost
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wisdom, "_read_from", set())
    variant = estimate_variant(FFTSpec(16), 4, None)
    path = tmp_path / wisdom.wisdom_file()
    wisdom.record(json.dumps({"made": "first"}), "measure", variant)
    saved = json.loads(path.read_text())
    saved["entries"].append({"problem": {"made": "elsewhere"}, "effort": "patient",
                             "variant": dataclasses.asdict(variant)})
    path.write_text(json.dumps(saved))  # another process's winner, saved meanwhile
    wisdom.record(json.dumps({"made": "second"}), "measure", variant)
    entries = {entry["problem"]["made"]: entry["effort"] for entry in json.loads(path.read_text())["entries"]}
    assert entries == {"first": "measure", "elsewhere": "patient", "second": "measure"}
    fft.forget_wisdom()  # forgotten in this process: not read back, and still kept in the file for others
    wisdom.record(json.dumps({"made": "third"}), "measure", variant)
    assert wisdom.lookup(json.dumps({"made": "first"}), "measure") is None
    assert len(json.loads(path.read_text())["entries"]) == 4


def test_wisdom_whose_variant_cannot_build_its_problem_is_refused_or_skipped(fresh, tmp_path, monkeypatch):
    # radices that do not multiply to the problem's size: the entry was accepted and every searching plan() of the
    # problem raised "radices (3, 5) do not multiply to the complex transform size 24"
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wisdom, "_read_from", set())
    spec = FFTSpec(24)
    key = wisdom.problem_key(spec, 4, *spec.layouts(4), planner._resolve_target("llvm"), tvm.runtime.num_threads())
    bad = dataclasses.replace(estimate_variant(spec, 4, cuda_limits=None), radices=(3, 5))
    text = json.dumps({**json.loads(fft.export_wisdom()),
                       "entries": [{"problem": json.loads(key), "effort": "measure", "variant": bad.to_dict()}]})
    with pytest.raises(ValueError, match=r"malformed wisdom entry .*radices \(3, 5\) do not multiply"):
        fft.import_wisdom(text)
    (tmp_path / wisdom.wisdom_file()).write_text(text)  # the saved file: skipped, so a plan() searches again
    assert wisdom.lookup(key, "measure") is None


def test_export_includes_the_saved_wisdom_before_any_plan(fresh, tmp_path, monkeypatch):
    # the saved file was read at a process's first lookup only: exported before any searching plan(), the wisdom was
    # empty, and after one it held every saved entry
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wisdom, "_read_from", set())
    variant = estimate_variant(FFTSpec(16), 4, None)
    wisdom.record(json.dumps({"made": "up"}), "measure", variant)
    fft.forget_wisdom()
    monkeypatch.setattr(wisdom, "_read_from", set())  # a new process with the same cache
    assert [entry["problem"] for entry in json.loads(fft.export_wisdom())["entries"]] == [{"made": "up"}]
    fft.forget_wisdom()  # forgotten: not read back
    assert not json.loads(fft.export_wisdom())["entries"]


def test_forget_saved_wisdom_of_an_unusable_cache_directory_has_nothing_to_delete(fresh, tmp_path, monkeypatch):
    # a cache "directory" that is a file (or beneath one) holds no wisdom file: forget raised NotADirectoryError
    (tmp_path / "file").write_text("not a directory")
    for directory in (tmp_path / "file", tmp_path / "file" / "below"):
        monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", str(directory))
        fft.forget_wisdom(saved=True)
    assert (tmp_path / "file").read_text() == "not a directory"


def test_saving_wisdom_keeps_a_patient_winner_another_process_saved_over_a_measure_one(fresh, tmp_path,
                                                                                         monkeypatch):
    # this process's measure winner of a problem overwrote the patient winner that another process had saved since:
    # every later patient plan() of the problem searched again
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wisdom, "_read_from", set())
    measured = estimate_variant(FFTSpec(16), 4, None)
    patient = dataclasses.replace(measured, lanes=2)
    path = tmp_path / wisdom.wisdom_file()
    wisdom.record(json.dumps({"made": "P"}), "measure", measured)
    saved = json.loads(path.read_text())
    saved["entries"][0].update(effort="patient", variant=patient.to_dict())  # another process's patient search
    path.write_text(json.dumps(saved))
    wisdom.record(json.dumps({"made": "Q"}), "measure", measured)
    entries = {entry["problem"]["made"]: (entry["effort"], entry["variant"]["lanes"])
               for entry in json.loads(path.read_text())["entries"]}
    assert entries == {"P": ("patient", 2), "Q": ("measure", measured.lanes)}
    wisdom.record(json.dumps({"made": "P"}), "patient", measured)  # the same effort: this process's is the newer
    assert [entry["variant"]["lanes"] for entry in json.loads(path.read_text())["entries"]
            if entry["problem"] == {"made": "P"}] == [measured.lanes]


def test_hosts_sharing_a_cache_keep_their_own_saved_wisdom(fresh, tmp_path, monkeypatch):
    # one wisdom.json for every host: a machine of another CPU sharing the cache (a home directory on NFS) skipped
    # the file as foreign and replaced it at its next record, so the hosts searched again in turn
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", str(tmp_path))
    variant = estimate_variant(FFTSpec(16), 4, None)
    this_host = wisdom.host()
    for name, machine in (("here", this_host), ("there", {"cpu": "neoverse-v2", "features": "0" * 16})):
        monkeypatch.setattr(wisdom, "host", lambda machine=machine: machine)
        monkeypatch.setattr(wisdom, "_read_from", set())
        fft.forget_wisdom()
        wisdom.record(json.dumps({"made": name}), "measure", variant)
    monkeypatch.setattr(wisdom, "host", lambda: this_host)  # back on this host, in a new process
    monkeypatch.setattr(wisdom, "_read_from", set())
    fft.forget_wisdom()
    monkeypatch.setattr(wisdom, "_read_from", set())
    assert wisdom.lookup(json.dumps({"made": "here"}), "measure") == variant
    assert len(list(tmp_path.glob("wisdom-*.json"))) == 2


def test_forget_wisdom_takes_a_bool():
    with pytest.raises(TypeError, match="forget_wisdom: saved must be a bool, got str 'yes'"):
        fft.forget_wisdom("yes")
