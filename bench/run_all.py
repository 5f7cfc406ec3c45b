"""Run every benchmark (`bench/bench_*.py`); each writes JSON and a markdown table under bench/results/."""

import importlib
import pathlib
import sys


def main() -> int:
    here = pathlib.Path(__file__).parent
    selected = sys.argv[1:]
    for script in sorted(here.glob("bench_*.py")):
        if selected and script.stem not in selected:
            continue
        print(f"== {script.stem}", flush=True)
        importlib.import_module(f"bench.{script.stem}").main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
