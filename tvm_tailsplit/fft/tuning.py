"""Every tuning constant of the FFT generator, each stated as the rule it implements (like FFTW's genfft, which
keeps its tunables in one place).

The other modules read these names; none keeps a tunable of its own. The measurements behind each rule (AVX-512,
16 MiB batches, old and new variants timed in one process) are in bench/results/fft_tuning.md, one section per
constant under the same name; `ANY_BATCH_SCRATCH_BYTES` is measured in bench/results/fft_cache.md, and
`STRIDED_LANES`, `GROUP_SCRATCH_LIMIT` and `MIN_BLOCK_LANES` have no section (their comments say why).
"""

from __future__ import annotations

# ---- breakdown (`factor`) ---------------------------------------------------------------------------------------
# A DFT of at most this many points is one straight-line codelet (the default `codelet_limit`).
CODELET_LIMIT = 32
# A larger `codelet_limit` is refused: a codelet is derived and compiled as straight-line code whose time grows
# about 7x per doubling of its size (limit = n for n = 64, 128, 256: 1.8 s, 8.7 s, 66 s; a prime 127 as one dense
# codelet 11 s), so a limit of 1024 would compile for an hour; sizes beyond it are passes over memory.
MAX_CODELET_LIMIT = 128
# A larger transform is split into radices of at most this many points, one pass over memory each (the default
# `radix_limit`): more passes of small codelets beat fewer passes whose codelets spill the vector registers.
RADIX_LIMIT = 8
# Bluestein's convolution length is the smallest m >= 2n - 1 whose prime factors are at most this (and at most
# the codelet limit, so that every factor is a codelet).
BLUESTEIN_LARGEST_PRIME = 7

# ---- lane groups and vectors (llvm: `schedule`, `passes`) --------------------------------------------------------
# A lane group holds one 128-bit vector's worth of transforms of the batch (wider vectors spill the codelets).
VECTOR_LANES = {"float32": 4, "float64": 2}
# A lane group of transforms along an axis other than the last of an n-D array (`ndim`: each element is a row of
# B consecutive complex values, the transforms side by side along it) holds this many transforms: 128 bytes of
# every row, two cache lines (one vector's width, or one transform vectorized inside, reads a fraction of each
# line it touches: 3 to 15 times slower at power-of-two B).
STRIDED_LANES = {"float32": 16, "float64": 8}
# A lane group's scratch stays within this many bytes: its lane count is halved until it does.
GROUP_SCRATCH_LIMIT = 4 * 1024 * 1024
# A vector of codelet instances of one transform is this many times the vector width when the loop divides.
INNER_VECTOR_SCALE = 2
# ... and this many times when the transform's scratch exceeds LARGE_SCRATCH_BYTES (it streams through L2/L3).
LARGE_INNER_VECTOR_SCALE = 4
LARGE_SCRATCH_BYTES = 512 * 1024
# A plan whose lane groups hold one transform is compiled once for every batch (a symbolic batch) while one group's
# scratch is at most this many bytes (beyond, one plan per batch: at n = 65536 the plan of any batch once ran 1.9x
# slower; the latest run, bench/results/fft_cache.md, 1.00-1.01x).
ANY_BATCH_SCRATCH_BYTES = 512 * 1024
# The parallel loop over lane groups has at most this many tasks, each running its groups serially in one
# scratch allocation.
PARALLEL_TASKS = 64
# A loop with unit stride on one side of a codelet pass is nested innermost (vectorized) only while the other
# side's stride along it is at most this many elements (beyond, the lanes' stores alias in the L1 sets).
VECTOR_LOOP_MAX_STRIDE = 1024
# A codelet pass's twiddle table of more than this many factors stores only the rows of the power-of-two
# elements; the others are products of at most log2(codelet size) stored factors.
DERIVED_TWIDDLE_FACTORS = 4096

# ---- prefetching (llvm: `template`) -----------------------------------------------------------------------------
# A lane group whose compact input (and output) is at most this many bytes prefetches a later group's lines.
PREFETCH_BYTES = 32 * 1024
# ... of the group at least this many bytes ahead.
PREFETCH_DISTANCE = 2048
# The cache line that one prefetch instruction fetches (bytes).
CACHE_LINE = 64

# ---- contiguous complex access (llvm: `lowering`) ---------------------------------------------------------------
# A set of strided stores rewritten into contiguous ones gathers at most this many offsets (one lane's outputs).
MAX_STORE_SET = 16
# Strided accesses of at least this many lanes to the caller's arrays (or the tables) that cover w consecutive
# floats of each of their w lanes (a square block) are w contiguous loads (stores) and a w·log2(w)-shuffle transpose.
MIN_BLOCK_LANES = 4

# ---- CUDA (`planner`, `schedule`, `multikernel`) ----------------------------------------------------------------
# Threads per thread block (a kernel whose block's shared memory spans k times CUDA_STATIC_SHARED_LIMIT, so that
# fewer blocks fit on a multiprocessor, runs k times as many, at most the target's threads per block,
# `cuda.CudaLimits.max_threads`: `schedule.cuda_block_threads`, for kernels over columns and one-kernel plans).
CUDA_THREADS = 128
# Scratch up to this many bytes is static shared memory (the most a kernel may declare statically on every
# architecture); above, dynamic shared memory, opted in per kernel up to the architecture's shared memory per
# block (`cuda.CudaLimits`, from the table `cuda.SHARED_MEMORY_PER_BLOCK`). A block's scratch above it runs in several
# kernels: a c2c Cooley-Tukey chain cut into the fewest kernels whose blocks' scratch fits (`multikernel`), else one
# kernel per pass over memory.
CUDA_STATIC_SHARED_LIMIT = 48 * 1024
# A one-kernel plan whose thread blocks hold at least this many transforms stages its compact input and output
# through shared memory (`template`, `schedule.cuda_staging`): its threads each work on their own transforms, a
# transform's row apart, so that loading the rows where a codelet reads them put every thread of a warp on its own
# cache line (n = 16: 32 lines per warp-wide load). The block copies its contiguous rows instead, consecutive threads
# on consecutive vectors (a warp's loads and stores are whole lines), behind a barrier before the first pass and
# after the last one; while the block's scratch and staged rows fit in static shared memory
# (`CUDA_STATIC_SHARED_LIMIT`), else the plan reads and writes its rows in place.
CUDA_STAGE_MIN_LANES = 2
# A one-kernel plan whose thread blocks hold one transform (fewer than CUDA_STAGE_MIN_LANES) stages its input row
# alone (the estimate variant's `stage_input`; `effort="measure"` times the other choice on a GPU): in its first pass
# the fastest-changing thread index is the pass's last loop digit, so that neighbouring threads read elements a
# codelet stride apart (n = 1024: 16 sectors of 32 bytes per warp-wide load where 8 would do; 27 at n = 1000, 32 at
# n = 4096 and 12000). The block copies its contiguous row to shared memory instead, consecutive threads on
# consecutive vectors (CUDA_STAGE_VECTOR_FLOATS), behind one barrier, and the first pass reads it there; the last
# pass's stores stay in global memory (their fastest thread index is the output's element: already consecutive
# threads on consecutive complex elements, each one 8- or 16-byte vector: `template`, complex_vectors). While the
# input is compact and the block's scratch and row fit in the architecture's shared memory per block
# (`cuda.CudaLimits.shared`: staging never adds a kernel), else the first pass reads the row in place. (cuFFT and
# VkFFT read their input coalesced; the issue requires it.)
CUDA_STAGE_INPUT = True
# ... in vectors of this many floats of the plan's real type (one complex element: 8 bytes for complex64, 16 for
# complex128; one float for a row of an odd number of reals), each staged row padded to an odd number of vectors
# (`storage_align`), so that the 32 rows that a warp's threads read at one column (one transform each) start in
# distinct banks (banks of a vector's bytes): without the padding, n = 16 put all 32 rows in one bank.
CUDA_STAGE_VECTOR_FLOATS = 2
# A staged input row of a block of one transform (CUDA_STAGE_INPUT) lies in shared memory one vector further every
# this many vectors (`template.staged_float`): the first pass reads it a codelet stride apart, which put a warp's 32
# threads on 2 banks at n = 4096 and 2048 (16-way conflicts), 4 at n = 1024 (8-way); so skewed, 4-, 2- and 4-way
# (3-way at n = 1000 either way; one vector every 16 vectors made n = 1000 8-way).
CUDA_STAGE_SKEW_VECTORS = 32
# A multi-kernel plan's block holds at least this many bytes' worth of consecutive columns (one DRAM sector: a
# warp reading strided columns reads whole sectors), more while its largest pass has fewer instances than
# CUDA_THREADS.
CUDA_SECTOR_BYTES = 32
