"""Persistent cache of compiled llvm plans: a plan compiled once is loaded by every later process.

An entry is a 1-D plan (its operator `main` and its constant tables) or an n-D graph (`ndim`: its Relax
executable, which holds its constants, and no tables).

Algorithm: a plan's entry is keyed by everything its compiled code depends on: the transform request (the
`spec.FFTSpec` fields), the batch and the input and output layouts, the target (its JSON with `mcpu`, LLVM's
triple and the target's CPU features), the versions of tvm_tailsplit, TVM, tvm_ffi and LLVM, and the generator:
the sha256 of the FFT generator's source files (`GENERATOR_SOURCES`). The generated IR is a deterministic
function of the request, the tuning constants and these sources, so the sources' hash stands for a hash of the
IR: building the IR to hash it would cost more than loading the plan (2-30 ms against 1 ms; bench/results/
fft_cache.md). The structural hash of the scheduled IR is still recorded in the entry. A plan compiled for any
batch (`Plan.symbolic_batch`) has the batch None in its key: one entry serves every batch.

The sha256 of the key (canonical JSON) names the entry: `<name>.json` holds the metadata (the key, the plan's
variant, the IR hash, the file names, sizes and sha256 of the shared library and of the constant tables), the shared
library `<name>-<sha>.so` (`Executable.export_library`) and the tables `<name>-<sha>.npz` (the twiddles and
Rader permutations of the passes, loaded without pickle). The data files are named by their content's
hash and the metadata is written last, each through a temporary file in the same directory (created with the
process's umask, as `open()` creates files, so that other users sharing the cache can read it) and an atomic
`os.replace`: a reader sees either the old entry or the new one, and two processes filling the same entry at
once both leave a complete, valid entry (identical content keeps its name; the metadata names files that exist).

Loading checks the metadata's key against the expected one, its variant (the caller's `check_variant`) and the
files' sha256 against the metadata: an unreadable (truncated, garbage) metadata file, a variant that cannot build
the plan (an edited or damaged metadata file of the right key), a stale entry (other versions), a foreign one
(another target or request), a truncated or modified library or table file, or a library that does not load is
reported with a `PlanCacheWarning` and a logger warning naming the file and the reason, and the plan is rebuilt and
its entry overwritten. A cache directory that cannot be written only costs the compile (logged); one on a filesystem
mounted noexec, where no compiled plan loads, is not used, reported once per process (`_noexec`).

The directory is `$TVM_TAILSPLIT_CACHE_DIR` (a leading `~` expanded, as in `set_cache_dir`), else
`$XDG_CACHE_HOME/tvm_tailsplit/fft` (`~/.cache` without XDG_CACHE_HOME or with a relative one, which the XDG spec
says to ignore; a process without a home directory has no cache, logged once); `TVM_TAILSPLIT_CACHE=0` disables
the cache, and `set_cache_dir` / `using_cache_dir` override both from Python (None disables). CUDA plans are not
cached (see `store`).

Housekeeping (`prune`): entries of other formats, versions or generators (every upgrade leaves the old ones),
unreadable metadata, data files that no entry names (a rebuilt entry's old library and tables) and the temporary
files of interrupted writes are removed; entries of other targets stay (machines sharing the directory load them).
Data and temporary files are removed only once `PRUNE_GRACE_SECONDS` old: a writer writes its data files before
its metadata.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import re
import secrets
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm.target import codegen

__all__ = ["ENVIRONMENT", "FORMAT", "GENERATOR_SOURCES", "PRUNE_GRACE_SECONDS", "CachedPlan", "PlanCacheWarning",
           "cache_dir", "load", "plan_key", "prune", "set_cache_dir", "stats", "store", "using_cache_dir", "versions",
           "write_atomic"]

logger = logging.getLogger("tvm_tailsplit.fft")

# the layout of an entry; entries of another format are stale
FORMAT = 1
# the files whose code decides the generated IR (relative to the tvm_tailsplit package)
GENERATOR_SOURCES = ("fft/*.py", "ir_utils.py")
ENVIRONMENT = "environment"  # `set_cache_dir` value: follow the environment variables

# `prune` removes a data file that no entry names, or a temporary file, only once it is this old: a writer may be
# between its data files and its metadata (seconds; an hour leaves any compile time to finish)
PRUNE_GRACE_SECONDS = 3600
# the cache's own file names: an entry's metadata, its data files (named by the content's sha256), temporaries
_METADATA_NAME = re.compile(r"[0-9a-f]{32}\.json")
_DATA_NAME = re.compile(r"[0-9a-f]{32}-[0-9a-f]{16}\.(so|npz)")
_TEMPORARY_NAME = re.compile(r"\.tmp-[0-9a-f]{16}\.(so|npz|json)")

_setting: Any = ENVIRONMENT
_counts: Counter = Counter()
# directories whose mount flags this process has read (`_noexec`), and those mounted noexec, where no library
# loads: the cache is off for them in this process
_probed: set[Path] = set()
_unloadable: set[Path] = set()


class PlanCacheWarning(UserWarning):
    """A cache entry that cannot be used (truncated, garbage, stale or foreign): the plan is rebuilt."""


@dataclasses.dataclass
class CachedPlan:
    """What a plan needs from a loaded entry: its key, the compiled module, its variant's fields
    (`variants.Variant.to_dict`) and the constant tables."""

    key: dict[str, Any]
    module: tvm.runtime.Module
    variant: dict[str, Any]
    constants: list[np.ndarray]


def cache_dir() -> Path | None:
    """The cache directory in effect, or None when the cache is disabled."""
    if _setting != ENVIRONMENT:
        return _setting
    if os.environ.get("TVM_TAILSPLIT_CACHE", "1").strip().lower() in ("0", "off", "false", "no"):
        return None
    if os.environ.get("TVM_TAILSPLIT_CACHE_DIR"):
        return _expanded(os.environ["TVM_TAILSPLIT_CACHE_DIR"])
    xdg = _expanded(os.environ.get("XDG_CACHE_HOME", ""))
    if xdg.is_absolute():  # the XDG spec: a relative (or empty) path is invalid and ignored, not the cwd's
        return xdg / "tvm_tailsplit" / "fft"
    try:
        home = Path.home()
    except (RuntimeError, KeyError):  # no $HOME and no passwd entry (a container's arbitrary user id)
        _warn_no_home()
        return None
    return home / ".cache" / "tvm_tailsplit" / "fft"


def _expanded(path: str | os.PathLike) -> Path:
    """`path` with a leading `~` expanded (a variable set where no shell expands it: a .env file, a service's
    environment), as it is where no home directory is known."""
    try:
        return Path(path).expanduser()
    except RuntimeError:  # "~" without a home directory: the path as written
        return Path(path)


@functools.cache
def _warn_no_home() -> None:
    logger.warning("the FFT plan cache is disabled: this process has no home directory ($HOME is unset and the user "
                   "has no passwd entry); set TVM_TAILSPLIT_CACHE_DIR or XDG_CACHE_HOME to enable it")


def set_cache_dir(path: str | os.PathLike | None) -> Any:
    """Use `path` as the cache directory in this process (None disables the cache, `ENVIRONMENT` follows the
    environment variables again); returns the previous setting, to pass back."""
    global _setting
    if path is not None and path != ENVIRONMENT and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a directory path, None or cache.ENVIRONMENT, got {path!r} "
                        f"({type(path).__name__})")
    previous = _setting
    _setting = path if path is None or path == ENVIRONMENT else _expanded(path)
    return previous


@contextlib.contextmanager
def using_cache_dir(path: str | os.PathLike | None) -> Iterator[Path | None]:
    """`set_cache_dir(path)` for the duration of a `with` block; yields the directory in effect."""
    previous = set_cache_dir(path)
    try:
        yield cache_dir()
    finally:
        set_cache_dir(previous)


def stats() -> dict[str, int]:
    """Counts of this process's cache events: `loaded`, `missing`, `rejected` (reported and rebuilt), `stored`."""
    return {name: _counts[name] for name in ("loaded", "missing", "rejected", "stored")}


@functools.cache
def _generator_hash() -> str:
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for pattern in GENERATOR_SOURCES:
        for path in sorted(root.glob(pattern)):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.cache
def versions() -> dict[str, str]:
    """The versions that compiled code and timings depend on: tvm_tailsplit, TVM, tvm_ffi and LLVM."""
    try:
        # the Version line itself: `importlib.metadata.version` imports the email parser, 10 ms of a 2 ms load
        metadata = importlib.metadata.distribution("tvm-tailsplit").read_text("METADATA") or ""
        package = next((line.split(":", 1)[1].strip() for line in metadata.splitlines()
                        if line.startswith("Version:")), "unknown")
    except importlib.metadata.PackageNotFoundError:
        package = "unknown"
    return {"tvm_tailsplit": package, "tvm": tvm.__version__, "tvm_ffi": tvm_ffi.__version__,
            "llvm": str(codegen.llvm_version_major())}


_target_fields: dict[str, dict[str, Any]] = {}


def plan_key(request: dict[str, Any], target: tvm.target.Target) -> dict[str, Any]:
    """The key of a plan: `request` (the spec's fields, batch, layouts: JSON values) with the target (its JSON,
    LLVM's triple and the target's CPU features), the versions and the generator's hash."""
    text = str(target)
    if text not in _target_fields:
        _target_fields[text] = {"target": text, "triple": codegen.llvm_get_system_triple(),
                                "features": sorted(codegen.llvm_get_cpu_features(target))}
    return {"format": FORMAT, "request": request, **_target_fields[text], "versions": versions(),
            "generator": _generator_hash()}


def _name(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def _reject(path: Path, reason: str) -> None:
    message = f"FFT plan cache entry {path} is unusable ({reason}); rebuilding it"
    _counts["rejected"] += 1
    logger.warning(message)
    warnings.warn(message, PlanCacheWarning, stacklevel=4)


def _mismatch(found: dict[str, Any], key: dict[str, Any]) -> str:
    """Why an entry's key differs from the expected one, in words."""
    if found.get("format") != key["format"]:
        return f"stale: cache format {found.get('format')!r}, this version uses {key['format']}"
    if found.get("versions") != key["versions"] or found.get("generator") != key["generator"]:
        return (f"stale: written by versions {found.get('versions')} with generator "
                f"{str(found.get('generator'))[:12]}, this process has {key['versions']} with generator "
                f"{key['generator'][:12]}")
    for field in ("target", "triple", "features"):
        if found.get(field) != key[field]:
            return f"foreign: built for {field} {found.get(field)!r}, not {key[field]!r}"
    return f"foreign: built for the request {found.get('request')!r}, not {key['request']!r}"


def _checked_file(directory: Path, meta: dict[str, Any], kind: str) -> tuple[Path, str | None]:
    """The entry's `kind` ("library", "constants") file and why it is unusable (None when its size and sha256
    match the metadata)."""
    path = directory / str(meta[kind])
    try:
        data = path.read_bytes()
    except OSError as error:
        return path, f"{kind} file unreadable: {error.strerror or error}"
    if len(data) != meta[f"{kind}_bytes"]:
        return path, f"{kind} file truncated or modified: {len(data)} bytes, the metadata says {meta[f'{kind}_bytes']}"
    if hashlib.sha256(data).hexdigest() != meta[f"{kind}_sha256"]:
        return path, f"{kind} file modified: its sha256 differs from the metadata's"
    return path, None


def load(*keys: dict[str, Any], check_variant: Callable[[dict[str, Any]], str | None] | None = None,
         entry_function: str = "main") -> CachedPlan | None:
    """The cached plan of the first of `keys` that has an entry, or None (cache disabled, no entry, or an
    unusable entry, reported). `check_variant(fields)` says why an entry's variant fields cannot build the plan
    (None: they can); such an entry is unusable too, as is a library without the function `entry_function` (a 1-D
    plan's operator "main"; an n-D plan's Relax executable holds "vm_load_executable")."""
    directory = cache_dir()
    if directory is None or _noexec(directory):
        return None
    for key in keys:
        meta_path = directory / f"{_name(key)}.json"
        try:
            text = meta_path.read_text()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, UnicodeDecodeError) as error:
            _reject(meta_path, f"unreadable: {error}")
            return None
        return _load_entry(directory, meta_path, text, key, check_variant, entry_function)
    _counts["missing"] += 1
    return None


def _load_entry(directory: Path, meta_path: Path, text: str, key: dict[str, Any],
                check_variant: Callable[[dict[str, Any]], str | None] | None, entry_function: str
                ) -> CachedPlan | None:
    """The plan of the entry whose metadata `meta_path` reads `text`, or None when it is unusable (reported)."""
    try:
        meta = json.loads(text)
        found = meta["key"]
        files = {kind: (meta[kind], meta[f"{kind}_bytes"], meta[f"{kind}_sha256"]) for kind in ("library", "constants")}
        variant = dict(meta["variant"])
    except (ValueError, KeyError, TypeError) as error:
        _reject(meta_path, f"not a plan cache entry (truncated or garbage metadata: {type(error).__name__}: {error})")
        return None
    if found != key:
        _reject(meta_path, _mismatch(found if isinstance(found, dict) else {}, key))
        return None
    if any(not isinstance(name, str) or "/" in name or os.sep in name for name, _, _ in files.values()):
        _reject(meta_path, "foreign: its file names point outside the cache directory")
        return None
    problem = check_variant(variant) if check_variant is not None else None
    if problem:
        _reject(meta_path, f"its variant cannot build the plan: {problem}")
        return None
    for kind in ("library", "constants"):
        path, problem = _checked_file(directory, meta, kind)
        if problem:
            _reject(path, problem)
            return None
    constants_path = directory / meta["constants"]
    library_path = directory / meta["library"]
    try:
        with np.load(constants_path, allow_pickle=False) as tables:
            constants = [tables[f"arr_{index}"] for index in range(len(tables.files))]
        module = tvm.runtime.load_module(str(library_path))
        if not module.implements_function(entry_function):
            raise LookupError(f"the library has no function {entry_function!r}")  # foreign
    except Exception as error:  # numpy, dlopen and TVM report a bad file each with their own error types
        first_line = (str(error).splitlines() or [""])[0]
        _reject(library_path, f"does not load: {type(error).__name__}: {first_line}")
        return None
    _counts["loaded"] += 1
    logger.debug("loaded the compiled plan %s from %s", key["request"], library_path)
    return CachedPlan(key, module, variant, constants)


def write_atomic(directory: Path, suffix: str, write) -> tuple[Path, int, str]:
    """Write a file through `write(path)` under a temporary name in `directory`; returns (temporary path, size,
    sha256). The file keeps the mode it was created with (`_create_temporary`), whatever `write` did to it."""
    temporary, mode = _create_temporary(directory, suffix)
    try:
        write(str(temporary))
        if temporary.stat().st_mode & 0o777 != mode:
            with contextlib.suppress(OSError):  # (a filesystem without modes: the file as written)
                os.chmod(temporary, mode)
        data = temporary.read_bytes()
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary, len(data), hashlib.sha256(data).hexdigest()


def _create_temporary(directory: Path, suffix: str) -> tuple[Path, int]:
    """A new empty file `.tmp-<random><suffix>` in `directory` and its permission bits: created as `open()`
    creates files, 0666 less the process's umask. (mkstemp's 0600 made an entry written by one user, such as a
    container image's cache warmed as root or a team's shared directory, unreadable to the others, whose processes
    found every entry unusable and compiled every plan again.)"""
    while True:
        path = directory / f".tmp-{secrets.token_hex(8)}{suffix}"
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        try:
            return path, os.fstat(handle).st_mode & 0o777
        finally:
            os.close(handle)


def _noexec(directory: Path) -> bool:
    """Whether `directory` is on a filesystem mounted noexec, where no library loads ("failed to map segment from
    shared object"): every plan would be reported unusable, compiled and written again, so the cache is off for it
    in this process, reported once. Checked once per directory that exists, from its mount flags (no library is
    loaded to find out)."""
    if directory in _probed:
        return directory in _unloadable
    try:
        flags = os.statvfs(directory).f_flag
    except OSError:  # not there (yet: `store` creates it) or not a directory: nothing to load or store
        return False
    _probed.add(directory)
    if flags & getattr(os, "ST_NOEXEC", 0):
        _unloadable.add(directory)
        message = (f"FFT plan cache directory {directory} is on a filesystem mounted noexec, where the compiled plans "
                   "it would hold cannot load: the plan cache is off for it in this process; set "
                   "TVM_TAILSPLIT_CACHE_DIR to a directory that can")
        logger.warning(message)
        warnings.warn(message, PlanCacheWarning, stacklevel=4)
    return directory in _unloadable


def store(key: dict[str, Any], executable: Any, variant: dict[str, Any], constants: list[np.ndarray],
          ir_hash: int) -> Path | None:
    """Write the entry of `key` (an llvm executable, its variant's fields, constant tables and IR structural hash);
    returns its metadata path, or None when the cache is disabled or cannot be written (logged).

    Only llvm plans are stored. Without a GPU, a CUDA executable exports (its device module holds the CUDA
    source only) but `load_module` refuses the library (no CUDA loader is registered without the driver), so CUDA
    plans are not cached; they compile at their first call on the GPU (not tried on a machine with a GPU)."""
    directory = cache_dir()
    if directory is None:
        return None
    name = _name(key)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if _noexec(directory):
            return None
        meta: dict[str, Any] = {"key": key, "variant": variant, "ir_structural_hash": ir_hash,
                                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        writers = {"library": (".so", executable.export_library),
                   "constants": (".npz", lambda path: np.savez(path, *constants))}
        for kind, (suffix, write) in writers.items():
            temporary, size, digest = write_atomic(directory, suffix, write)
            final = f"{name}-{digest[:16]}{suffix}"
            os.replace(temporary, directory / final)
            meta.update({kind: final, f"{kind}_bytes": size, f"{kind}_sha256": digest})
        text = json.dumps(meta, indent=1, sort_keys=True)
        temporary, _, _ = write_atomic(directory, ".json", lambda path: Path(path).write_text(text))
        os.replace(temporary, directory / f"{name}.json")
    except Exception as error:  # a read-only or full disk, a missing linker: the plan works without its entry
        logger.warning("could not write the FFT plan cache entry %s in %s: %s: %s", name, directory,
                       type(error).__name__, error)
        return None
    _counts["stored"] += 1
    logger.debug("stored the compiled plan %s as %s", key["request"], directory / f"{name}.json")
    return directory / f"{name}.json"


def prune(everything: bool = False, grace_seconds: float = PRUNE_GRACE_SECONDS) -> dict[str, int]:
    """Remove from the cache directory what no process of this environment loads; returns the counts of files
    removed (`stale`: metadata of entries of another format, versions or generator, or unreadable; `orphaned`: data
    files that no remaining entry names; `temporary`: leftovers of interrupted writes) and `bytes` freed.

    Entries of other targets stay (machines sharing the directory load them); `everything=True` removes every
    entry and its files whatever their age. Otherwise data and temporary files younger than `grace_seconds` stay (a
    writer may be between its data files and its metadata). Only the cache's own file names are touched (never the
    wisdom files: `forget_wisdom(saved=True)`). Without a cache directory (disabled, or not created yet) nothing is
    removed."""
    counts = {"stale": 0, "orphaned": 0, "temporary": 0, "bytes": 0}
    directory = cache_dir()
    if directory is None or not directory.is_dir():
        return counts
    current = {"format": FORMAT, "versions": versions(), "generator": _generator_hash()}
    now = time.time()
    names = {path.name: path for path in directory.iterdir()}

    def remove(path: Path, kind: str) -> None:
        with contextlib.suppress(FileNotFoundError):  # (another process pruning at once)
            size = path.stat().st_size
            path.unlink()
            counts[kind] += 1
            counts["bytes"] += size

    kept_data: set[str] = set()
    for name, path in names.items():
        if not _METADATA_NAME.fullmatch(name):
            continue
        try:
            meta = json.loads(path.read_text())
            key = meta["key"]
            stale = everything or any(key.get(field) != value for field, value in current.items())
            data = [meta["library"], meta["constants"]]
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            stale, data = True, []
        if stale:
            remove(path, "stale")
        else:
            kept_data.update(str(name) for name in data)
    for name, path in names.items():
        kind = ("orphaned" if _DATA_NAME.fullmatch(name) and name not in kept_data
                else "temporary" if _TEMPORARY_NAME.fullmatch(name) else None)
        with contextlib.suppress(FileNotFoundError):
            if kind is not None and (everything or now - path.stat().st_mtime >= grace_seconds):
                remove(path, kind)
    logger.info("pruned the FFT plan cache %s: %s", directory, counts)
    return counts
