"""The persistent plan cache (issue #16): a second process loads a plan without compiling it, plans pickle, and
every failure mode (truncated, garbage, stale or foreign entries, concurrent writers, a disabled or unwritable
cache, the directory's environment variables) is detected, reported and rebuilt, results equal to numpy."""

import dataclasses
import hashlib
import json
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap
import time
import types
import warnings

import numpy as np
import pytest

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.fft import cache, ndim, planner, wisdom

from .fft_reference import random_complex, random_real, relative_error, tolerance

ROOT = pathlib.Path(__file__).parent.parent.parent


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """An empty cache directory for this test (through the environment, inherited by subprocesses)."""
    directory = tmp_path / "plans"
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", str(directory))
    monkeypatch.delenv("TVM_TAILSPLIT_CACHE", raising=False)
    planner._cached_plan.cache_clear()
    yield directory
    planner._cached_plan.cache_clear()


def fresh_plan(*args, **kwargs) -> tfft.Plan:
    """plan(...) without this process's in-memory plan cache: from the disk cache or compiled."""
    planner._cached_plan.cache_clear()
    return tfft.plan(*args, **kwargs)


def counts_after(action) -> dict[str, int]:
    """How many cache events of each kind `action()` caused."""
    before = cache.stats()
    action()
    return {name: value - before[name] for name, value in cache.stats().items()}


def check_c2c(plan: tfft.Plan, seed: int = 0) -> None:
    x = random_complex((plan.batch, plan.n), "complex64", seed)
    assert relative_error(plan(x), np.fft.fft(x.astype(np.complex128))) < tolerance(plan.n, "complex64")


def entry(directory: pathlib.Path) -> tuple[pathlib.Path, dict]:
    """The only entry's metadata path and content."""
    (path,) = directory.glob("*.json")
    return path, json.loads(path.read_text())


def run_python(code: str, *args: str) -> dict:
    """Run `code` in a fresh Python process (this environment, the repository importable); its last stdout line
    is JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


# a process that makes (or unpickles) a c2c plan, counts compiles and cache events, and checks it against numpy
ROUND_TRIP = """
    import json, pickle, sys
    import numpy as np
    from tvm_tailsplit import fft
    from tvm_tailsplit.fft import cache, ndim, planner

    compiles = []
    compile_plan = planner._compile
    planner._compile = lambda *args: compiles.append(1) or compile_plan(*args)
    if sys.argv[1] == "plan":
        plan = fft.plan(24, 5, norm="ortho", istride=2, idist=50)
        with open(sys.argv[2], "wb") as file:
            pickle.dump(plan, file)
    else:
        with open(sys.argv[2], "rb") as file:
            plan = pickle.load(file)
    x = np.random.default_rng(1).standard_normal((5, 50)) + 1j * np.random.default_rng(2).standard_normal((5, 50))
    x = x.astype(np.complex64)
    y = plan(x[:, :48:2])
    reference = np.fft.fft(x[:, :48:2].astype(np.complex128), norm="ortho")
    error = float(np.linalg.norm(y - reference) / np.linalg.norm(reference))
    print(json.dumps({"compiles": len(compiles), "error": error, "plan": repr(plan), **cache.stats()}))
"""


def test_a_second_process_loads_the_plan_without_compiling(cache_dir, tmp_path):
    pickled = str(tmp_path / "plan.pickle")
    first = run_python(ROUND_TRIP, "plan", pickled)
    assert (first["compiles"], first["missing"], first["stored"], first["loaded"]) == (1, 1, 1, 0)
    second = run_python(ROUND_TRIP, "plan", pickled)
    assert (second["compiles"], second["loaded"], second["stored"], second["rejected"]) == (0, 1, 0, 0)
    # a pickled plan is unpickled by another process through the cache
    third = run_python(ROUND_TRIP, "unpickle", pickled)
    assert (third["compiles"], third["loaded"]) == (0, 1)
    assert third["plan"] == first["plan"]
    for result in (first, second, third):
        assert result["error"] < tolerance(24, "complex64")


# a process that makes an n-D r2c graph, counts the graphs it compiles and its cache events, and checks it against numpy
ND_ROUND_TRIP = """
    import json
    import numpy as np
    from tvm_tailsplit.fft import cache, ndim

    compiles = []
    compile_graph = ndim.NDPlan._compile
    ndim.NDPlan._compile = lambda self: compiles.append(1) or compile_graph(self)
    x = np.random.default_rng(3).standard_normal((6, 10, 8)).astype(np.float32)
    graph = ndim.plan_nd(x.shape, (0, 2), "r2c", norm="ortho")
    y = graph(x)
    reference = np.fft.rfftn(x.astype(np.float64), axes=(0, 2), norm="ortho")
    error = float(np.linalg.norm(y - reference) / np.linalg.norm(reference))
    print(json.dumps({"compiles": len(compiles), "error": error, "describe": graph.describe(),
                      "storage": graph.storage_bytes, **cache.stats()}))
"""


def graph_entry(directory: pathlib.Path) -> tuple[pathlib.Path, dict]:
    """The metadata path and content of the one n-D graph's entry."""
    entries = [(path, json.loads(path.read_text())) for path in directory.glob("*.json")]
    (found,) = [(path, meta) for path, meta in entries if meta["key"]["request"].get("graph") == "n-D"]
    return found


def test_a_second_process_loads_the_nd_graph_without_compiling(cache_dir):
    first = run_python(ND_ROUND_TRIP)
    # the graph and its two 1-D plans (r2c along axis 2, c2c along axis 0)
    assert (first["compiles"], first["missing"], first["stored"], first["loaded"]) == (1, 3, 3, 0)
    second = run_python(ND_ROUND_TRIP)
    assert (second["compiles"], second["loaded"], second["stored"], second["rejected"]) == (0, 3, 0, 0)
    # the loaded graph derives its IR on demand: the same description and memory plan
    assert (second["describe"], second["storage"]) == (first["describe"], first["storage"])
    for result in (first, second):
        assert result["error"] < tolerance(80, "complex64")


def fresh_graph(shape: tuple[int, ...]) -> ndim.NDPlan:
    """The c2c plan_nd(shape) over every axis without this process's in-memory caches: from the disk cache or
    compiled."""
    planner._cached_plan.cache_clear()
    ndim._cached_plan_nd.cache_clear()
    return ndim.plan_nd(shape, tuple(range(len(shape))), "c2c")


def check_graph(graph: ndim.NDPlan) -> None:
    x = random_complex(graph.input_shape, "complex64", 5)
    assert relative_error(graph(x), np.fft.fftn(x.astype(np.complex128))) < tolerance(x.size, "complex64")


def test_an_unusable_graph_entry_is_reported_and_rebuilt(cache_dir):
    check_graph(fresh_graph((4, 6)))
    # the graph's library replaced by a 1-D plan's (its size and hash written into the metadata): it loads, but
    # it is not a Relax executable
    path, meta = graph_entry(cache_dir)
    plan_meta = next(json.loads(other.read_text()) for other in cache_dir.glob("*.json") if other != path)
    for field in ("library", "library_bytes", "library_sha256"):
        meta[field] = plan_meta[field]
    path.write_text(json.dumps(meta))
    with pytest.warns(cache.PlanCacheWarning, match="no function 'vm_load_executable'"):
        counts = counts_after(lambda: check_graph(fresh_graph((4, 6))))
    assert counts == {"loaded": 2, "missing": 0, "rejected": 1, "stored": 1}
    # the entry was overwritten: the next graph loads it
    counts = counts_after(lambda: check_graph(fresh_graph((4, 6))))
    assert counts == {"loaded": 3, "missing": 0, "rejected": 0, "stored": 0}


def test_a_loaded_plan_describes_itself_like_a_compiled_one(cache_dir):
    built = fresh_plan(97, 3)
    loaded = fresh_plan(97, 3)
    assert loaded is not built
    assert (loaded.lanes, loaded.input_shape, loaded.output_shape) == (built.lanes, built.input_shape,
                                                                       built.output_shape)
    assert loaded.describe() == built.describe()  # builds the passes and the IR on demand
    assert loaded.workspace_bytes == built.workspace_bytes
    check_c2c(loaded)


@pytest.mark.parametrize("arguments", [
    {"n": 12, "batch": 3, "norm": "ortho", "istride": 2, "idist": 30, "ostride": 1, "odist": 13},
    {"n": 10, "batch": 2, "kind": "r2c", "dtype": "complex128"},
    {"n": 9, "batch": 2, "kind": "c2r", "direction": "backward", "norm": "forward", "codelet_limit": 4,
     "radix_limit": 3},
])
def test_plans_pickle_as_their_arguments(cache_dir, arguments):
    plan = fresh_plan(**arguments)
    planner._cached_plan.cache_clear()
    copies = []
    counts = counts_after(lambda: copies.append(pickle.loads(pickle.dumps(plan))))
    assert counts["loaded"] == 1 and counts["stored"] == 0
    copy = copies[0]
    assert copy is not plan and repr(copy) == repr(plan)
    # the repr of a plan of other strides names them (it read like the compact plan's)
    assert ("istride=2, idist=30, ostride=1, odist=13" in repr(plan)) == ("istride" in arguments)
    assert (copy.input_layout, copy.output_layout, copy.spec, copy.target.export()) == (
        plan.input_layout, plan.output_layout, plan.spec, plan.target.export())
    real = np.dtype(plan.real_dtype)
    if plan.kind == "r2c":
        x = random_real((plan.batch, plan.n), real.name)
        assert np.array_equal(copy(x), plan(x))
        assert relative_error(copy(x), np.fft.rfft(x)) < tolerance(plan.n, plan.dtype)
    else:
        span = plan.input_layout.distance * plan.batch
        x = random_complex(span, plan.dtype).view(real).reshape(-1)
        view = np.lib.stride_tricks.as_strided(x, plan.input_shape, tuple(s * real.itemsize for s in
                                                                          plan.input_layout.strides()))
        assert np.array_equal(copy(view), plan(view))


def test_a_plan_of_a_variant_with_its_own_breakdown_limits_pickles_as_its_request(cache_dir):
    # a search's "breakdown" winner (codelet_limit=16, radix_limit=4) pickled the variant's limits as the request's:
    # the copy had another spec, so it missed its entry in the plan cache and compiled again
    variant = dataclasses.replace(fresh_plan(48, 4).variant, codelet_limit=16, radix_limit=4)
    plan = fresh_plan(48, 4, variant=variant)
    planner._cached_plan.cache_clear()
    copies = []
    counts = counts_after(lambda: copies.append(pickle.loads(pickle.dumps(plan))))
    assert counts["loaded"] == 1 and counts["stored"] == 0
    assert (copies[0].spec, copies[0].variant) == (plan.spec, plan.variant)
    check_c2c(copies[0])


def corrupt(directory: pathlib.Path, how) -> None:
    """Apply `how(metadata path, metadata)` to the only entry."""
    path, meta = entry(directory)
    how(path, meta)


def truncate_library(path, meta):
    library = path.parent / meta["library"]
    library.write_bytes(library.read_bytes()[: meta["library_bytes"] // 2])


def truncate_metadata(path, meta):
    path.write_text(path.read_text()[:100])


def garbage_metadata(path, meta):
    path.write_bytes(os.urandom(300))


def garbage_constants(path, meta):
    (path.parent / meta["constants"]).write_bytes(b"not an npz file")


def foreign_library(path, meta):
    """A library that is not a plan, its size and hash written into the metadata (a consistent but foreign
    entry)."""
    library = path.parent / meta["library"]
    data = b"\x7fELF" + os.urandom(2000)
    library.write_bytes(data)

    meta.update(library_bytes=len(data), library_sha256=hashlib.sha256(data).hexdigest())
    path.write_text(json.dumps(meta))


def old_version(path, meta):
    meta["key"]["versions"]["tvm_tailsplit"] = "0.0.1"
    path.write_text(json.dumps(meta))


def other_generator(path, meta):
    meta["key"]["generator"] = "0" * 64
    path.write_text(json.dumps(meta))


def foreign_target(path, meta):
    meta["key"]["target"] = '{"kind":"llvm","tag":"","keys":["cpu"],"mcpu":"cortex-a72"}'
    meta["key"]["features"] = ["neon"]
    path.write_text(json.dumps(meta))


def invalid_variant(path, meta):
    """A damaged variant in metadata of the right key: radices that do not multiply to the size."""
    meta["variant"]["radices"] = [3, 5]
    path.write_text(json.dumps(meta))


def invalid_variant_field(path, meta):
    meta["variant"]["lanes"] = "4"
    path.write_text(json.dumps(meta))


def foreign_request(path, meta):
    meta["key"]["request"]["spec"]["n"] += 1
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize(("how", "reason"), [
    (truncate_library, "library file truncated or modified"),
    (truncate_metadata, "truncated or garbage metadata"),
    (garbage_metadata, "unreadable|truncated or garbage metadata"),
    (garbage_constants, "constants file truncated or modified"),
    (foreign_library, "does not load"),
    (old_version, r"stale: written by versions \{.*'0\.0\.1'"),
    (other_generator, "stale: .* with generator 000000000000"),
    (foreign_target, "foreign: built for target .*cortex-a72"),
    (foreign_request, "foreign: built for the request"),
    # a metadata file of the right key whose variant cannot build the plan raised from every plan() of it
    (invalid_variant, r"its variant cannot build the plan: ValueError: radices \(3, 5\)"),
    (invalid_variant_field, "its variant cannot build the plan: TypeError: lanes must be an integer"),
])
def test_unusable_entries_are_reported_and_rebuilt(cache_dir, caplog, how, reason):
    check_c2c(fresh_plan(20, 2))
    corrupt(cache_dir, how)
    with pytest.warns(cache.PlanCacheWarning, match=reason) as warned:
        counts = counts_after(lambda: check_c2c(fresh_plan(20, 2)))
    assert counts == {"loaded": 0, "missing": 0, "rejected": 1, "stored": 1}
    assert str(cache_dir) in str(warned[0].message) and "rebuilding it" in str(warned[0].message)
    assert any(record.levelname == "WARNING" and str(cache_dir) in record.getMessage() for record in caplog.records)
    # the entry was overwritten: the next process (here: the next plan) loads it
    counts = counts_after(lambda: check_c2c(fresh_plan(20, 2)))
    assert counts == {"loaded": 1, "missing": 0, "rejected": 0, "stored": 0}


# a process that waits for the others, then builds the same plan and writes and reads its entry many times
CONCURRENT = """
    import json, os, pathlib, sys, time
    from tvm_tailsplit import fft
    from tvm_tailsplit.fft import cache

    ready, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    ready.touch()
    while not go.exists():
        time.sleep(0.005)
    plan = fft.plan(30, 4)
    key = cache.plan_key(plan._request(plan.symbolic_batch, plan._chosen), plan.target)
    loads = 0
    for _ in range(15):
        cache.store(key, plan.executable, plan.variant.to_dict(), plan._constants, 0)
        loads += cache.load(key) is not None
    print(json.dumps({"loads": loads, **cache.stats()}))
"""


def test_concurrent_writers_leave_a_valid_entry(cache_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    go = tmp_path / "go"
    workers = []
    for index in range(3):
        ready = tmp_path / f"ready{index}"
        workers.append((ready, subprocess.Popen([sys.executable, "-c", textwrap.dedent(CONCURRENT), str(ready),
                                                 str(go)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                text=True)))
    deadline = time.monotonic() + 120
    while not all(ready.exists() for ready, _ in workers) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()  # all processes start building and writing at once
    for _, worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        result = json.loads(out.strip().splitlines()[-1])
        # every load by any process, while the others wrote the same entry, found a complete, valid entry
        assert result["loads"] == 15 and result["rejected"] == 0
        assert "PlanCacheWarning" not in err
    assert not list(cache_dir.glob(".tmp-*"))  # no temporary file left behind
    counts = counts_after(lambda: check_c2c(fresh_plan(30, 4)))
    assert counts == {"loaded": 1, "missing": 0, "rejected": 0, "stored": 0}


@pytest.mark.parametrize("umask", [0o022, 0o077], ids=["umask022", "umask077"])
def test_entries_and_wisdom_are_written_with_the_umask_of_the_process(cache_dir, umask):
    # the files were created by mkstemp (mode 0600) and kept that mode: a cache filled by one user (a container
    # image warmed as root, a team's shared TVM_TAILSPLIT_CACHE_DIR) was unreadable to every other user, whose
    # processes reported each entry unusable ("Permission denied") and compiled every plan again
    previous = os.umask(umask)
    try:
        plan = fresh_plan(20, 3)
        check_c2c(plan)
        wisdom.record(json.dumps({"problem": "of this test"}), "measure", plan.variant)
    finally:
        os.umask(previous)
        wisdom.forget_wisdom()
    files = list(cache_dir.iterdir())
    assert {path.suffix for path in files} == {".json", ".so", ".npz"}
    assert (cache_dir / wisdom.wisdom_file()).exists()
    assert {path.name: oct(path.stat().st_mode & 0o666) for path in files} == \
        {path.name: oct(0o666 & ~umask) for path in files}


def test_prune_removes_what_no_process_of_this_environment_loads(cache_dir):
    # every upgrade left its entries, a rebuilt entry its old files and a killed writer its temporaries: the
    # directory only grew. prune removes them and keeps what loads (this environment's and other targets' entries)
    plans = {n: fresh_plan(n, 3) for n in (8, 12, 16, 20)}
    metas = {json.loads(path.read_text())["key"]["request"]["spec"]["n"]: path for path in cache_dir.glob("*.json")}
    old_version(metas[8], json.loads(metas[8].read_text()))
    foreign_target(metas[12], json.loads(metas[12].read_text()))
    stale_files = [cache_dir / json.loads(metas[n].read_text())[kind]
                   for n in (8, 16) for kind in ("library", "constants")]
    garbage_metadata(metas[16], None)
    library = (cache_dir / json.loads(metas[20].read_text())["library"]).read_bytes()
    planted = {"orphan": "0" * 32 + "-" + "1" * 16 + ".so", "temporary": ".tmp-" + "2" * 16 + ".so",
               "young orphan": "3" * 32 + "-" + "4" * 16 + ".npz", "young temporary": ".tmp-" + "5" * 16 + ".json",
               "user file": "notes.txt", "wisdom": "wisdom-" + "6" * 16 + ".json"}
    for name in planted.values():
        (cache_dir / name).write_bytes(library)
    an_hour_ago = time.time() - cache.PRUNE_GRACE_SECONDS - 60
    for path in cache_dir.iterdir():
        if path.name not in (planted["young orphan"], planted["young temporary"]):
            os.utime(path, (an_hour_ago, an_hour_ago))

    counts = cache.prune()
    assert counts["stale"] == 2 and counts["orphaned"] == 5 and counts["temporary"] == 1
    assert counts["bytes"] > 6 * len(library) // 2
    left = {path.name for path in cache_dir.iterdir()}
    assert metas[12].name in left and metas[20].name in left and metas[8].name not in left
    assert not any(path.name in left for path in stale_files)
    assert planted["orphan"] not in left and planted["temporary"] not in left
    assert {planted[name] for name in ("young orphan", "young temporary", "user file", "wisdom")} <= left
    assert counts_after(lambda: check_c2c(fresh_plan(20, 3))) == {"loaded": 1, "missing": 0, "rejected": 0,
                                                                  "stored": 0}
    assert cache.prune() == {"stale": 0, "orphaned": 0, "temporary": 0, "bytes": 0}

    counts = cache.prune(everything=True)
    assert counts["stale"] == 2 and counts["orphaned"] == 5 and counts["temporary"] == 1
    assert {path.name for path in cache_dir.iterdir()} == {planted["user file"], planted["wisdom"]}
    assert counts_after(lambda: check_c2c(fresh_plan(20, 3)))["stored"] == 1
    del plans


def test_prune_without_a_cache_directory_removes_nothing(cache_dir, monkeypatch):
    assert cache.prune() == {"stale": 0, "orphaned": 0, "temporary": 0, "bytes": 0}  # not created yet
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE", "0")
    assert cache.prune(everything=True) == {"stale": 0, "orphaned": 0, "temporary": 0, "bytes": 0}


def test_the_cache_can_be_disabled(cache_dir, monkeypatch):
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE", "0")
    assert cache.cache_dir() is None
    counts = counts_after(lambda: check_c2c(fresh_plan(14, 2)))
    assert counts == {"loaded": 0, "missing": 0, "rejected": 0, "stored": 0}
    assert not cache_dir.exists()
    monkeypatch.delenv("TVM_TAILSPLIT_CACHE")
    with cache.using_cache_dir(None) as directory:  # from Python
        assert directory is None
        counts = counts_after(lambda: check_c2c(fresh_plan(14, 2)))
        assert counts["stored"] == 0 and not cache_dir.exists()
    assert cache.cache_dir() == cache_dir  # the environment's directory again


def test_the_directory_follows_the_environment_and_python(cache_dir, tmp_path, monkeypatch):
    check_c2c(fresh_plan(15, 2))
    assert len(list(cache_dir.glob("*.json"))) == 1  # $TVM_TAILSPLIT_CACHE_DIR
    monkeypatch.delenv("TVM_TAILSPLIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "tvm_tailsplit" / "fft"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "tvm_tailsplit" / "fft"
    # a relative XDG_CACHE_HOME is invalid (the XDG spec: ignore it); it put the cache in the cwd of each process
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "tvm_tailsplit" / "fft"
    monkeypatch.delenv("XDG_CACHE_HOME")
    with cache.using_cache_dir(tmp_path / "python"):
        check_c2c(fresh_plan(15, 2))
    assert len(list((tmp_path / "python").glob("*.json"))) == 1
    with pytest.raises(TypeError, match="path must be a directory path"):
        cache.set_cache_dir(3)
    # a "~" that no shell expanded (a .env file, a service's environment) made a directory named "~" in the cwd
    monkeypatch.setenv("TVM_TAILSPLIT_CACHE_DIR", "~/fft-plans")
    assert cache.cache_dir() == tmp_path / "home" / "fft-plans"
    with cache.using_cache_dir("~/python") as directory:
        assert directory == tmp_path / "home" / "python"


def test_a_process_without_a_home_directory_runs_without_a_cache(cache_dir, monkeypatch, caplog):
    # a container's arbitrary user id without $HOME or a passwd entry: Path.home() raised RuntimeError from every
    # plan() (and so from every transform) when neither cache variable was set
    def no_home(cls):
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("TVM_TAILSPLIT_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(pathlib.Path, "home", classmethod(no_home))
    cache._warn_no_home.cache_clear()
    assert cache.cache_dir() is None
    counts = counts_after(lambda: check_c2c(fresh_plan(21, 2)))
    assert counts == {"loaded": 0, "missing": 0, "rejected": 0, "stored": 0}
    assert sum("no home directory" in record.getMessage() for record in caplog.records) == 1
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_dir))  # XDG_CACHE_HOME needs no home directory
    assert cache.cache_dir() == cache_dir / "tvm_tailsplit" / "fft"


def test_an_unwritable_cache_only_costs_the_compile(cache_dir, caplog):
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    cache_dir.write_text("a file where the directory should be")
    counts = counts_after(lambda: check_c2c(fresh_plan(18, 2)))
    assert counts["stored"] == 0
    assert any("could not write the FFT plan cache entry" in record.getMessage() for record in caplog.records)


def test_a_directory_mounted_noexec_turns_the_cache_off_once(cache_dir, monkeypatch):
    # a cache on a filesystem mounted noexec ("failed to map segment from shared object"): every plan of every
    # process was reported unusable with a PlanCacheWarning, compiled and written again
    statvfs = os.statvfs

    def noexec(path):
        result = statvfs(path)
        if str(path).startswith(str(cache_dir)):
            return types.SimpleNamespace(f_flag=result.f_flag | os.ST_NOEXEC)
        return result

    monkeypatch.setattr(os, "statvfs", noexec)
    with pytest.warns(cache.PlanCacheWarning, match="mounted noexec"):
        check_c2c(fresh_plan(22, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.PlanCacheWarning)
        counts = counts_after(lambda: [check_c2c(fresh_plan(22, 2)), check_c2c(fresh_plan(24, 2))])
    assert counts == {"loaded": 0, "missing": 0, "rejected": 0, "stored": 0}
    assert not list(cache_dir.glob("*.so"))


def test_one_compiled_plan_serves_every_batch_of_one_transform_groups(cache_dir):
    # n = 64 runs lane groups of one transform (vectorized inside the transform): one plan for batches 2, 3, ...
    counts = counts_after(lambda: check_c2c(fresh_plan(64, 3)))
    assert (counts["stored"], counts["loaded"]) == (1, 0)
    for batch in (2, 5, 17):
        counts = counts_after(lambda batch=batch: check_c2c(fresh_plan(64, batch), seed=batch))
        assert (counts["stored"], counts["loaded"]) == (0, 1)
        assert fresh_plan(64, batch).symbolic_batch
    # a batch of 1 has its own plan (a serial group loop), and so has a transform in groups of several lanes
    single = fresh_plan(64, 1)
    assert not single.symbolic_batch and single.batch == 1
    check_c2c(single)
    grouped = fresh_plan(20, 6)
    assert grouped.lanes > 1 and not grouped.symbolic_batch
    check_c2c(grouped)
    assert len(list(cache_dir.glob("*.json"))) == 3
    assert "compiled once for every batch but 1" in fresh_plan(64, 4).describe()
