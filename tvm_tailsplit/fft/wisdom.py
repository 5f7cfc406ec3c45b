"""Wisdom: the variants that plan searches chose, kept in memory and exchanged as JSON text (FFTW's wisdom).

Algorithm: a search's winner is recorded under its problem: the validated request (`spec.FFTSpec`), the batch,
the input and output layouts, the target (its JSON text: kind, mcpu, arch) and TVM's thread count. A later
search of the same problem with the same or lower effort (measure < patient) takes the recorded variant and
builds its plan without timing. `export_wisdom()` writes every entry as JSON with a header: the format version,
the package and TVM versions and the host (LLVM's CPU name and a digest of its CPU features);
`import_wisdom(text)` adds the entries of such a text. A text of another format version, package or TVM version
or host is ignored with a warning (`UserWarning`, and the logger): its variants were timed with other code or on
another machine. `forget_wisdom()` empties it. Plans already built are not affected (they are cached).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import threading
import warnings

import tvm

from .spec import FFTSpec, check_choice
from .template import ExternalLayout
from .variants import Variant

__all__ = ["FORMAT", "export_wisdom", "forget_wisdom", "host", "import_wisdom", "lookup", "problem_key", "record"]

logger = logging.getLogger("tvm_tailsplit.fft")

FORMAT = 1
# efforts whose wisdom a search of each effort accepts (a patient winner serves a measure request, not back)
_ACCEPTS = {"measure": ("measure", "patient"), "patient": ("patient",)}

_lock = threading.Lock()
# problem key (JSON text) -> (effort, variant)
_wisdom: dict[str, tuple[str, Variant]] = {}


@functools.cache
def host() -> dict[str, str]:
    """The machine wisdom belongs to: LLVM's name of this CPU and a digest of its features."""
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    features = tvm.target.codegen.llvm_get_cpu_features(tvm.target.Target({"kind": "llvm", "mcpu": cpu}))
    digest = hashlib.sha256(",".join(sorted(features)).encode()).hexdigest()[:16]
    return {"cpu": cpu, "features": digest}


def _versions() -> dict[str, str]:
    try:
        package = importlib.metadata.version("tvm_tailsplit")
    except importlib.metadata.PackageNotFoundError:
        package = "unknown"
    return {"tvm_tailsplit": package, "tvm": tvm.__version__}


def problem_key(spec: FFTSpec, batch: int, input_layout: ExternalLayout, output_layout: ExternalLayout,
                target: tvm.target.Target, threads: int) -> str:
    """The problem a variant was chosen for, as canonical JSON text."""
    return json.dumps({"spec": dataclasses.asdict(spec), "batch": batch, "input": dataclasses.asdict(input_layout),
                       "output": dataclasses.asdict(output_layout), "target": str(target), "threads": threads},
                      sort_keys=True)


def record(key: str, effort: str, variant: Variant) -> None:
    """Remember `variant` as the winner of an `effort` search of the problem `key`."""
    with _lock:
        _wisdom[key] = (effort, variant)


def lookup(key: str, effort: str) -> Variant | None:
    """The recorded variant of problem `key` that a search of `effort` accepts, or None."""
    with _lock:
        entry = _wisdom.get(key)
    return entry[1] if entry is not None and entry[0] in _ACCEPTS[effort] else None


def export_wisdom(path: str | os.PathLike | None = None) -> str:
    """Every recorded variant as JSON text (also written to `path` when given)."""
    with _lock:
        entries = [{"problem": json.loads(key), "effort": effort, "variant": variant.to_dict()}
                   for key, (effort, variant) in sorted(_wisdom.items())]
    text = json.dumps({"format": FORMAT, **_versions(), "host": host(), "entries": entries}, indent=1)
    if path is not None:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
    return text


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
        with open(path, encoding="utf-8") as file:
            text = file.read()
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (wisdom from export_wisdom), got {type(text).__name__}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"text is not wisdom (not JSON: {error})") from None
    if not isinstance(data, dict) or "entries" not in data:
        raise ValueError("text is not wisdom (no 'entries'): pass what export_wisdom returned")
    if data.get("format") != FORMAT:
        return _ignore(f"format {data.get('format')!r}, this package reads format {FORMAT}")
    for name, version in _versions().items():
        if data.get(name) != version:
            return _ignore(f"made with {name} {data.get(name)!r}, this is {name} {version!r}")
    if data.get("host") != host():
        return _ignore(f"made on host {data.get('host')!r}, this is {host()!r}")
    entries = []
    for entry in data["entries"]:
        try:
            problem = entry["problem"]
            key = json.dumps(problem, sort_keys=True)
            effort = check_choice("effort", entry["effort"], tuple(_ACCEPTS))
            entries.append((key, effort, Variant(**entry["variant"])))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"text has a malformed wisdom entry {entry!r}: {error}") from None
    with _lock:
        for key, effort, variant in entries:
            _wisdom[key] = (effort, variant)
    logger.info("wisdom: imported %d variant(s)", len(entries))
    return len(entries)


def forget_wisdom() -> None:
    """Forget every recorded variant (plans already built stay cached)."""
    with _lock:
        _wisdom.clear()

