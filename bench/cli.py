"""What every benchmark's command line shares: ``--quick`` (fewer cases and rounds) and where results go.

A full run writes ``bench/results/<name>.json`` and ``<name>.md`` (committed); a quick run writes them under
``bench/results/quick/`` (ignored by git), so it never overwrites the full results.
"""

from __future__ import annotations

import argparse
import json
import pathlib

RESULTS = pathlib.Path(__file__).parent / "results"

__all__ = ["RESULTS", "parser", "result_paths", "write_results"]


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
