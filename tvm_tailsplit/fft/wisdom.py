"""Wisdom: the variants that plan searches chose, kept in memory and exchanged as JSON text (FFTW's wisdom).

Algorithm: a search's winner is recorded under its problem: the validated request (`spec.FFTSpec`), the batch,
the input and output layouts, the target (its JSON text: kind, mcpu, arch) and TVM's thread count. A later
search of the same problem with the same or lower effort (measure < patient) takes the recorded variant and
builds its plan without timing. `export_wisdom()` writes every entry as JSON with a header: the format version,
the package and TVM versions and the host (LLVM's CPU name and a digest of its CPU features);
`import_wisdom(text)` adds the entries of such a text. A text of another format version, package, TVM, tvm_ffi
or LLVM version or host is ignored with a warning (`UserWarning`, and the logger): its variants were timed with
other code or on another machine. `forget_wisdom()` empties it. Plans already built are not affected (they are
cached).

Wisdom persists beside the compiled plans: while the plan cache is enabled (`cache.cache_dir()`), every recorded
winner is written there to the file of this environment, `wisdom-<digest>.json` (`wisdom_file`: the digest of the
format, the versions and the host, so that machines of other CPUs and environments of other versions sharing a cache
keep their own wisdom side by side): the file's entries as they are at that moment (other processes' winners
included) with this process's wisdom over them (but for a patient winner saved over this process's measure one of
the same problem: `_merged`), through a temporary file and an atomic rename (two processes recording at once may
lose one entry, never corrupt the file), and the first lookup of a process reads that file, so a later process's
measure plan is the earlier search's winner, loaded from the plan cache without timing. A saved file of other
versions or another host, or one that is not wisdom (not UTF-8 text, not JSON, an entry whose variant cannot build
its problem's plan: a corrupted file), is skipped (logged at INFO, no warning: it is the user's cache, not their
input) and replaced at the next record; `import_wisdom` refuses such text with a ValueError.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import threading
import warnings
from pathlib import Path

import tvm

from ..ir_utils import require_bools
from . import cache
from .spec import FFTSpec, check_choice
from .template import ExternalLayout
from .variants import Variant

__all__ = ["FORMAT", "export_wisdom", "forget_wisdom", "host", "import_wisdom", "lookup", "problem_key", "record",
           "wisdom_file"]

logger = logging.getLogger("tvm_tailsplit.fft")

FORMAT = 1
# efforts whose wisdom a search of each effort accepts (a patient winner serves a measure request, not back)
_ACCEPTS = {"measure": ("measure", "patient"), "patient": ("patient",)}

_lock = threading.Lock()
# problem key (JSON text) -> (effort, variant)
_wisdom: dict[str, tuple[str, Variant]] = {}
# the cache directories whose saved wisdom this process has read
_read_from: set[Path] = set()


@functools.cache
def host() -> dict[str, str]:
    """The machine wisdom belongs to: LLVM's name of this CPU and a digest of its features."""
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    features = tvm.target.codegen.llvm_get_cpu_features(tvm.target.Target({"kind": "llvm", "mcpu": cpu}))
    digest = hashlib.sha256(",".join(sorted(features)).encode()).hexdigest()[:16]
    return {"cpu": cpu, "features": digest}


def wisdom_file() -> str:
    """The name of this environment's wisdom file in a plan cache directory: `wisdom-<digest>.json`, the digest of
    the header of `export_wisdom` (format, versions, host), so that hosts (a home directory shared by machines of
    other CPUs) and environments (other package versions) sharing a cache keep their own wisdom side by side."""
    header = json.dumps({"format": FORMAT, **cache.versions(), "host": host()}, sort_keys=True)
    return f"wisdom-{hashlib.sha256(header.encode()).hexdigest()[:16]}.json"


def problem_key(spec: FFTSpec, batch: int, input_layout: ExternalLayout, output_layout: ExternalLayout,
                target: tvm.target.Target, threads: int) -> str:
    """The problem a variant was chosen for, as canonical JSON text."""
    return json.dumps({"spec": dataclasses.asdict(spec), "batch": batch, "input": dataclasses.asdict(input_layout),
                       "output": dataclasses.asdict(output_layout), "target": str(target), "threads": threads},
                      sort_keys=True)


def _saved_wisdom() -> Path | None:
    """The wisdom file of the plan cache in effect (None: the cache is disabled), read once per process."""
    directory = cache.cache_dir()
    if directory is None:
        return None
    path = directory / wisdom_file()
    if directory not in _read_from:
        _read_from.add(directory)
        entries = _read_saved(path)
        with _lock:
            for key, entry in entries.items():
                _wisdom.setdefault(key, entry)
        logger.debug("saved wisdom %s: %d variant(s)", path, len(entries))
    return path


def _read_saved(path: Path) -> dict[str, tuple[str, Variant]]:
    """The entries of the wisdom file at `path` (none when it is missing, not text, not wisdom or of other
    versions)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    except UnicodeDecodeError as error:
        logger.info("saved wisdom %s skipped: not UTF-8 text (%s)", path, error)
        return {}
    try:
        entries = _parse(text)
    except ValueError as error:
        logger.info("saved wisdom %s skipped: %s", path, error)
        return {}
    return {key: (effort, variant) for key, effort, variant in entries}


def record(key: str, effort: str, variant: Variant) -> None:
    """Remember `variant` as the winner of an `effort` search of the problem `key` (and save it in the plan
    cache's wisdom file, when the cache is enabled: the file's entries as they are now, from other processes
    too, with this process's wisdom over them, `_merged`)."""
    path = _saved_wisdom()
    with _lock:
        _wisdom[key] = (effort, variant)
        current = dict(_wisdom)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = _text(_merged(_read_saved(path), current))
        temporary, _, _ = cache.write_atomic(path.parent, ".json", lambda name: Path(name).write_text(text))
        os.replace(temporary, path)
    except OSError as error:
        logger.warning("could not save wisdom in %s: %s", path, error)


def _merged(saved: dict[str, tuple[str, Variant]], current: dict[str, tuple[str, Variant]]
            ) -> dict[str, tuple[str, Variant]]:
    """`saved` with `current`'s entries over them, except where a saved entry is of a higher effort (a patient
    winner that another process saved serves this process's measure problem, not back)."""
    merged = dict(saved)
    for key, (effort, variant) in current.items():
        stronger = key in saved and saved[key][0] != effort and saved[key][0] in _ACCEPTS[effort]
        if not stronger:
            merged[key] = (effort, variant)
    return merged


def lookup(key: str, effort: str) -> Variant | None:
    """The recorded (or saved) variant of problem `key` that a search of `effort` accepts, or None."""
    _saved_wisdom()
    with _lock:
        entry = _wisdom.get(key)
    return entry[1] if entry is not None and entry[0] in _ACCEPTS[effort] else None


def export_wisdom(path: str | os.PathLike | None = None) -> str:
    """Every recorded variant as JSON text (also written to `path` when given), the plan cache's saved wisdom
    included (read here if no lookup has read it yet)."""
    _saved_wisdom()
    with _lock:
        text = _text(_wisdom)
    if path is not None:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
    return text


def _text(wisdom: dict[str, tuple[str, Variant]]) -> str:
    """Wisdom entries as the JSON text of `export_wisdom`."""
    entries = [{"problem": json.loads(key), "effort": effort, "variant": variant.to_dict()}
               for key, (effort, variant) in sorted(wisdom.items())]
    return json.dumps({"format": FORMAT, **cache.versions(), "host": host(), "entries": entries}, indent=1)


def _ignore(reason: str) -> int:
    message = f"wisdom ignored: {reason}"
    logger.warning(message)
    warnings.warn(message, UserWarning, stacklevel=3)
    return 0


def import_wisdom(text: str | None = None, *, path: str | os.PathLike | None = None) -> int:
    """Add the variants of wisdom `text` (or of the file at `path`) made by `export_wisdom`; returns how many.
    Wisdom of another format, package or TVM version or machine is ignored with a warning."""
    if (text is None) == (path is None):
        raise TypeError("import_wisdom needs exactly one of text or path")
    if path is not None:
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except UnicodeDecodeError as error:
            raise ValueError(f"path {os.fspath(path)!r} is not wisdom (not UTF-8 text: {error}): pass a file that "
                             "export_wisdom wrote") from None
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (wisdom from export_wisdom), got {type(text).__name__}")
    try:
        entries = _parse(text)
    except _Foreign as reason:
        return _ignore(str(reason))
    with _lock:
        for key, effort, variant in entries:
            _wisdom[key] = (effort, variant)
    logger.info("wisdom: imported %d variant(s)", len(entries))
    return len(entries)


class _Foreign(ValueError):
    """Well-formed wisdom of another format, version or host."""


def _parse(text: str) -> list[tuple[str, str, Variant]]:
    """(problem key, effort, variant) of every entry of wisdom `text`; ValueError if it is not wisdom, `_Foreign`
    if it is another format's, version's or host's."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"text is not wisdom (not JSON: {error})") from None
    if not isinstance(data, dict) or "entries" not in data:
        raise ValueError("text is not wisdom (no 'entries'): pass what export_wisdom returned")
    if data.get("format") != FORMAT:
        raise _Foreign(f"format {data.get('format')!r}, this package reads format {FORMAT}")
    for name, version in cache.versions().items():
        if data.get(name) != version:
            raise _Foreign(f"made with {name} {data.get(name)!r}, this is {name} {version!r}")
    if data.get("host") != host():
        raise _Foreign(f"made on host {data.get('host')!r}, this is {host()!r}")
    if not isinstance(data["entries"], list):
        raise ValueError(f"text is not wisdom ('entries' is a {type(data['entries']).__name__}, not a list): pass "
                         "what export_wisdom returned")
    entries = []
    for entry in data["entries"]:
        try:
            if not isinstance(entry, dict):
                raise TypeError(f"an entry is an object with problem, effort and variant, not a {type(entry).__name__}")
            problem = entry["problem"]
            key = json.dumps(problem, sort_keys=True)
            effort = check_choice("effort", entry["effort"], tuple(_ACCEPTS))
            variant = Variant(**entry["variant"])
            if variant.radices and isinstance(problem, dict) and "spec" in problem:
                # a variant that cannot build its problem's plan (radices of another size) would raise from every
                # searching plan() of that problem
                variant.tree(FFTSpec(**problem["spec"]))
            entries.append((key, effort, variant))
        except KeyError as error:
            raise ValueError(f"text has a malformed wisdom entry {entry!r}: no {error}") from None
        except (TypeError, ValueError) as error:
            raise ValueError(f"text has a malformed wisdom entry {entry!r}: {error}") from None
    return entries


def forget_wisdom(saved: bool = False) -> None:
    """Forget every recorded variant in this process (plans already built stay cached); with `saved`, delete the
    plan cache's wisdom file too."""
    require_bools("forget_wisdom", saved=saved)
    with _lock:
        _wisdom.clear()
    directory = cache.cache_dir()
    if directory is not None:
        _read_from.add(directory)  # forgotten wisdom is not read back from the file
        if saved:
            # missing: nothing saved; beneath a file: the cache cannot be written, so nothing was saved there either
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                (directory / wisdom_file()).unlink()

