#!/usr/bin/env bash
# The GPU session's runbook: everything issues #13, #14 and #15 need measured, in calls that fit the `device` tool.
#
# A session lent a GPU has about 30 minutes of it, at most 10 per command, and the machine starts bare. Stage TVM
# first (../shared/device/stage-tvm.sh: two calls), then, while the machine is warm, one call per part, in this
# order (what resolves the issues first: the three measured tables, then the tests that must pass there):
#
#   export PYTHONPATH=/tmp/site:$PWD && bash bench/gpu_session.sh gemm       # warpspec + tails tables (#14, #15)
#   export PYTHONPATH=/tmp/site:$PWD && bash bench/gpu_session.sh fft        # FFT table (#13), then plan searches
#                                                                            # (bench_fft_cuda_search, 240 s)
#   export PYTHONPATH=/tmp/site:$PWD && bash bench/gpu_session.sh tests      # every `gpu` test but the sanitizer's
#   export PYTHONPATH=/tmp/site:$PWD && bash bench/gpu_session.sh sanitize   # compute-sanitizer: Hopper GEMM, FFT
#   export PYTHONPATH=/tmp/site:$PWD && bash bench/gpu_session.sh tilings    # tails table + every mma tiling
#   export PYTHONPATH=/tmp/site:$PWD && bash bench/gpu_session.sh tails      # the tails table alone (#15), all the
#                                                                            # part's time (its rows written as made)
#
# The test parts run their tests in `WORKERS` processes (pytest-xdist, in the GPU image): they spend their time
# compiling (TVM and nvcc, one core each), which the machine's 16 cores do side by side; no test is timed. Extra
# arguments of `tests` name the tests to run instead of all of them (a rerun of the failures: their node ids).
# Each part stops itself before the tool's 10-minute limit (`PART_SECONDS`) and leaves its logs and result files
# flat under $OUT (at most 8 files come back), so a part that runs out of time still returns what it finished.
# Copy the returned bench/results files into the checkout and commit them with the machine and date they carry.
#
# Seen on an H100 (2026-11-25): the staging's second call can run the first part too (`bash .device/b/install.sh
# && export ... && bash bench/gpu_session.sh gemm`); `gemm` took 420 s, `fft` 75 s, and `tests` ran 160 of its
# 161 tests in its 560 s (the dispatch tests compile for 80-135 s each). Idle time between calls counts: have the
# next command ready before the last one returns. That session ran gemm, fft and tests; sanitize and tilings are
# still to run.
set -uo pipefail

part=${1:-}
out=${OUT:-/tmp/gpu_session_out}
PART_SECONDS=${PART_SECONDS:-560}
WORKERS=${WORKERS:-12}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$SECONDS

# run NAME SECONDS COMMAND...: COMMAND with at most SECONDS (and what is left of the part's time), its output
# in $out/NAME.log
run() {
    local name=$1 seconds=$2
    shift 2
    local left=$((PART_SECONDS - (SECONDS - start)))
    ((seconds > left)) && seconds=$left
    if ((seconds < 20)); then
        echo "$name: not started, the part's time is spent" | tee -a "$out/$name.log"
        return 0
    fi
    echo "== $name ($seconds s at most): $*"
    timeout --signal=INT --kill-after=15 "$seconds" "$@" 2>&1 | tee "$out/$name.log"
    echo "== $name: exit ${PIPESTATUS[0]} after $((SECONDS - start)) s of the part"
}

# collect PATH NAME: bench/results/PATH.{json,md} into $out as NAME.{json,md}
collect() {
    for suffix in json md; do
        [ -f "bench/results/$1.$suffix" ] && cp "bench/results/$1.$suffix" "$out/$2.$suffix"
    done
    return 0
}

case $part in
gemm)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    python3 -c "import tvm; d = tvm.cuda(0); print('TVM', tvm.__version__, d.device_name, d.compute_version)" \
        | tee -a "$out/device.txt"
    run warpspec 300 python3 -m bench.bench_warpspec_cuda
    run tails 400 python3 -m bench.bench_tails_cuda
    collect warpspec_cuda warpspec_cuda
    collect tails_cuda tails_cuda
    ;;
fft)
    run fft 300 python3 -m bench.bench_fft_cuda
    collect fft_cuda fft_cuda
    # then plan searches on the device, the rows furthest from cuFFT first, each row written as it finishes: no
    # row starts after SEARCH_SECONDS (a row takes 10-60 s), so that the session keeps its time for the tests
    search=${SEARCH_SECONDS:-240}
    left=$((PART_SECONDS - (SECONDS - start) - 90))
    ((search > left)) && search=$left
    run fft-search 560 python3 -m bench.bench_fft_cuda_search --seconds "$search"
    collect fft_cuda_search fft_cuda_search
    ;;
tests)
    shift
    # every test marked gpu but the sanitizer's (the tutorials' module needs nbformat, which the GPU image lacks)
    run tests 560 python3 -m pytest -q -rfEs -m gpu -p no:cacheprovider -n "$WORKERS" \
        --junitxml="$out/tests.xml" --ignore=tests/test_tutorials.py \
        --ignore=tests/warpspec/test_warpspec_sanitizer.py "${@:-tests}"
    ;;
sanitize)
    run gemm-sanitizer 360 python3 -m pytest -q -rfEs -m gpu -p no:cacheprovider -n "$((WORKERS / 3))" \
        --junitxml="$out/sanitizer.xml" tests/warpspec/test_warpspec_sanitizer.py
    run fft-sanitizer 200 python3 -m bench.bench_fft_cuda --quick --sanitize
    collect quick/fft_cuda fft_cuda_sanitize
    ;;
tails)
    run tails 560 python3 -m bench.bench_tails_cuda
    collect tails_cuda tails_cuda
    ;;
tilings)
    run tilings 560 python3 -m bench.bench_tails_cuda --tilings
    collect tails_cuda tails_cuda_tilings
    ;;
*)
    echo "usage: bash bench/gpu_session.sh {gemm|fft|tests [TEST ...]|sanitize|tails|tilings}   (see the top of this file)" >&2
    exit 2
    ;;
esac
