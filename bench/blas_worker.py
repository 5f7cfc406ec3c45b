"""Times numpy's fp32 matmul in a process of its own, for the tail benchmark's comparison with a BLAS.

numpy's BLAS reads its thread count from the environment when it loads, so the benchmark starts this worker with
one thread requested (``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OMP_NUM_THREADS`` = 1), the same as the
single-threaded kernels it is compared with. Protocol, one line each: the worker first writes the name of the BLAS
numpy was built with; then for each line ``m n k`` on stdin it writes the seconds per call of ``A @ B``
(``A[m, k]``, ``B[k, n]``, float32, into a preallocated ``C``): the best of 3 repetitions, each lasting at least
40 ms (as ``bench_tails.seconds_per_call``).
"""

from __future__ import annotations

import sys
import time

import numpy as np

REPEATS = 3
MIN_REPEAT_SECONDS = 0.04


def blas_name() -> str:
    config = np.show_config(mode="dicts")
    blas = config.get("Build Dependencies", {}).get("blas", {})
    return f"{blas.get('name', 'unknown')} {blas.get('version', '')}".strip()


def seconds_per_call(m: int, n: int, k: int) -> float:
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype("float32")
    b = rng.uniform(-1, 1, (k, n)).astype("float32")
    c = np.empty((m, n), "float32")
    np.matmul(a, b, out=c)
    best = float("inf")
    for _ in range(REPEATS):
        calls, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < MIN_REPEAT_SECONDS:
            np.matmul(a, b, out=c)
            calls += 1
        best = min(best, elapsed / calls)
    return best


def main() -> None:
    print(blas_name(), flush=True)
    for line in sys.stdin:
        m, n, k = (int(word) for word in line.split())
        print(repr(seconds_per_call(m, n, k)), flush=True)


if __name__ == "__main__":
    main()
