"""What every benchmark's command line shares: ``--quick`` (fewer cases and rounds), where results go, and the
single-threaded child process that one-thread benchmarks time in.

A full run writes ``bench/results/<name>.json`` and ``<name>.md`` (committed); a quick run writes them under
``bench/results/quick/`` (ignored by git), so it never overwrites the full results.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

RESULTS = pathlib.Path(__file__).parent / "results"
ROOT = pathlib.Path(__file__).resolve().parent.parent
# the variables that give TVM, OpenMP and the BLAS libraries one thread each
SINGLE_THREAD = ("TVM_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

__all__ = ["RESULTS", "SINGLE_THREAD", "parser", "result_paths", "single_threaded_child", "write_results"]


def single_threaded_child(name: str, quick: bool, environment: dict[str, str] | None = None) -> list:
    """Run ``python -m bench.<name> --child [--quick]`` with one thread for TVM, OpenMP and BLAS (and
    ``environment``) and return the JSON list its last output line holds (its rows)."""
    env = {**os.environ, **{variable: "1" for variable in SINGLE_THREAD}, **(environment or {}),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-m", f"bench.{name}", "--child", *(["--quick"] if quick else [])],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def parser(name: str, description: str) -> argparse.ArgumentParser:
    """An ``argparse`` parser for ``python -m bench.<name>`` with the shared ``--quick`` flag."""
    cli = argparse.ArgumentParser(prog=f"python -m bench.{name}", description=description)
    cli.add_argument("--quick", action="store_true",
                     help="fewer cases and rounds, for development; results go to bench/results/quick/")
    return cli


def result_paths(stem: str, quick: bool) -> tuple[pathlib.Path, pathlib.Path]:
    """The JSON and markdown paths of a benchmark's results (under ``quick/`` for a quick run)."""
    folder = RESULTS / "quick" if quick else RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{stem}.json", folder / f"{stem}.md"


def write_results(stem: str, quick: bool, report: dict, markdown: str) -> None:
    """Write ``report`` as JSON and ``markdown`` to the benchmark's result paths (``result_paths``) and say where."""
    json_path, md_path = result_paths(stem, quick)
    json_path.write_text(json.dumps(report, indent=2))
    md_path.write_text(markdown)
    print(f"wrote {json_path} and {md_path}")
