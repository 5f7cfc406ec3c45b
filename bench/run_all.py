"""Run the benchmarks (`bench/bench_*.py`, or the ones named); each writes JSON and a markdown table under
bench/results/ (bench/results/quick/ with --quick)."""

from __future__ import annotations

import argparse
import importlib
import pathlib

BENCHMARKS = sorted(path.stem for path in pathlib.Path(__file__).parent.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m bench.run_all", description=__doc__)
    cli.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all of {BENCHMARKS})")
    cli.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    args = cli.parse_args(argv)
    unknown = sorted(set(args.names) - set(BENCHMARKS))
    if unknown:
        cli.error(f"unknown benchmark(s) {unknown}; known: {BENCHMARKS}")
    for name in args.names or BENCHMARKS:
        print(f"== {name}", flush=True)
        importlib.import_module(f"bench.{name}").main(["--quick"] if args.quick else [])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
