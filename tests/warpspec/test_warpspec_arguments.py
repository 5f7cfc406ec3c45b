"""WarpSpecialize's arguments: a wrong type is a TypeError, a wrong value a ValueError, each naming the argument
and what was expected, raised when the pass is created (or called, for the module)."""

import pytest
import tvm

from tvm_tailsplit.warpspec import WarpSpecialize, analyze, check, examples


def _module() -> tvm.IRModule:
    return tvm.IRModule({"main": examples.streaming_kernel(tiles=4, tile=8)})


def test_calling_the_pass_on_a_prim_func_says_to_wrap_it_in_a_module():
    with pytest.raises(TypeError, match=r"transforms an IRModule, got a PrimFunc.*tvm.IRModule\(\{'main': func\}\)"):
        WarpSpecialize("llvm")(examples.streaming_kernel(tiles=4, tile=8))


def test_calling_the_pass_on_none_names_the_expected_type():
    with pytest.raises(TypeError, match="transforms a tvm.IRModule, got NoneType"):
        WarpSpecialize("llvm")(None)


@pytest.mark.parametrize("target", ["rocm", "cuda -arch=sm_80", "LLVM"])
def test_unknown_target_strings_are_value_errors(target):
    with pytest.raises(ValueError, match=f"'llvm' and 'cuda', not '{target}'"):
        WarpSpecialize(target)


@pytest.mark.parametrize("target", [None, 123, ["llvm"]])
def test_targets_of_other_types_are_type_errors(target):
    with pytest.raises(TypeError, match=r"target must be 'llvm' or 'cuda' \(a str\) or a tvm.target.Target, got"):
        WarpSpecialize(target)


def test_a_target_object_gives_its_kind():
    specialized = WarpSpecialize(tvm.target.Target("llvm"))(_module())
    assert "T.parallel(2)" in specialized.script()
    with pytest.raises(ValueError, match="not a Target of kind 'c'"):
        WarpSpecialize(tvm.target.Target("c"))


@pytest.mark.parametrize("threads_per_role, expected", [
    ([32, 32], r"threads_per_role must be a dict from warp role \(int\) to thread count \(int\), got list"),
    ({"0": 32, "1": 32}, r"threads_per_role must map warp roles \(int\) to thread counts \(int\), got '0': 32"),
    ({0: 32.0, 1: 32}, r"got 0: 32.0 \(int: float\)"),
    ({0: True, 1: 32}, r"got 0: True \(int: bool\)"),
])
def test_threads_per_role_of_the_wrong_type(threads_per_role, expected):
    with pytest.raises(TypeError, match=expected):
        WarpSpecialize("cuda", threads_per_role=threads_per_role)


@pytest.mark.parametrize("threads", [0, -32, 48])
def test_threads_per_role_must_be_whole_warps(threads):
    with pytest.raises(ValueError, match=f"whole warps .*got {threads} threads for warp role 1"):
        WarpSpecialize("cuda", threads_per_role={0: 32, 1: threads})


def test_a_role_of_more_threads_than_a_block_has_is_refused_when_the_pass_is_created():
    """A value out of range is a ValueError when the pass is created (the docstring's promise); the total over a
    kernel's roles can only be checked when the pass meets the kernel."""
    with pytest.raises(ValueError, match="gives 2048 threads to warp role 1; CUDA runs at most 1024 threads per block"):
        WarpSpecialize("cuda", threads_per_role={0: 32, 1: 2048})
    WarpSpecialize("cuda", threads_per_role={0: 32, 1: 1024})


@pytest.mark.parametrize("options, error, expected", [
    ({"debug_check": 1}, TypeError, "debug_check must be a bool, got int 1"),
    ({"named_barriers": "yes"}, TypeError, "named_barriers must be a bool, got str 'yes'"),
    ({"delay_us": 2.5}, TypeError, "delay_us must be an int, got float 2.5"),
    ({"delay_us": -1}, ValueError, "delay_us must be at least 0, got -1"),
    ({"max_instances": "10"}, TypeError, "max_instances must be an int, got str '10'"),
    ({"max_instances": 0}, ValueError, "max_instances must be at least 1, got 0"),
    ({"threads_per_role": {0: 32, 1: 32}}, ValueError, "threads_per_role applies to the 'cuda' target only"),
    ({"named_barriers": True}, ValueError, "named_barriers applies to the 'cuda' target only"),
])
def test_llvm_options(options, error, expected):
    with pytest.raises(error, match=expected):
        WarpSpecialize("llvm", **options)


def test_delay_is_an_llvm_option():
    with pytest.raises(ValueError, match="delay_us applies to the 'llvm' target only"):
        WarpSpecialize("cuda", delay_us=5)


def test_the_pass_still_composes_with_tvm_passes():
    specialize = WarpSpecialize("llvm")
    assert isinstance(specialize, tvm.transform.Pass) and specialize.info.name == "WarpSpecialize"
    out = tvm.transform.Sequential([specialize])(_module())
    tvm.ir.assert_structural_equal(out, specialize(_module()))


@pytest.mark.parametrize(("build", "message"), [
    (lambda: examples.gemm_kernel(0, 64, 64), "gemm_kernel: m must be a positive int or None, got 0"),
    (lambda: examples.gemm_kernel(64, 64, None), "gemm_kernel: k must be a positive int, got None"),
    (lambda: examples.gemm_kernel(64, -32, 64), "gemm_kernel: n must be a positive int, got -32"),
    (lambda: examples.hopper_gemm_kernel(16, 0, 64), "hopper_gemm_kernel: n must be a positive int, got 0"),
    (lambda: examples.hopper_gemm_kernel(16.5, 256, 64), "hopper_gemm_kernel: m must be a positive int or None, "
                                                         "got 16.5"),
    (lambda: examples.hopper_gemm_kernel(16, 256, 0), "hopper_gemm_kernel: k must be a positive int or None, got 0"),
    (lambda: examples.symbolic_k_gemm_kernel(64, 64, stages=0), "symbolic_k_gemm_kernel: stages must be a positive "
                                                                 "int, got 0"),
    # compute_roles=3 was refused as "the GEMM sizes must be multiples of the tile sizes" (32 rows do not split in
    # three), naming neither the argument nor the values; k not a multiple of block_k likewise
    (lambda: examples.gemm_kernel(compute_roles=3), "symbolic_k_gemm_kernel: compute_roles must be 1 or 2, got 3"),
    (lambda: examples.gemm_kernel(block_m=33, compute_roles=2),
     r"symbolic_k_gemm_kernel: block_m \(33\) must split into the rows of the 2 compute roles"),
    (lambda: examples.gemm_kernel(64, 64, 100), r"gemm_kernel: k must be a multiple of block_k \(16\), got 100"),
])
def test_example_gemm_sizes_are_checked_by_name(build, message):
    """A GEMM example with an empty or fractional size is refused (it built a kernel of no rows, or failed deep in
    TVM with an IntImm error)."""
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize(("build", "expected"), [
    (lambda: examples.streaming_kernel(tiles=4, tile=4, stages=-1), "streaming_kernel: stages must be a positive int"),
    (lambda: examples.streaming_kernel(tiles=4, tile=4, stages=0), "streaming_kernel: stages must be a positive int"),
    (lambda: examples.streaming_kernel(tiles=4, tile=0), "streaming_kernel: tile must be a positive int"),
    (lambda: examples.streaming_kernel(tiles=-1, tile=4), "streaming_kernel: tiles must be a non-negative int"),
    (lambda: examples.symbolic_streaming_kernel(tile=4, stages=-3),
     "symbolic_streaming_kernel: stages must be a positive int"),
    (lambda: examples.scheduled_scale_kernel(n=100, tile=32), "scheduled_scale_kernel: n .* multiple of tile"),
    (lambda: examples.scheduled_scale_kernel(n=64, tile=0), "scheduled_scale_kernel: tile must be a positive int"),
    (lambda: examples.seed_example(()), r"seed_example: ranges must be .* \(lo, hi\) pairs with 0 <= lo < hi"),
    (lambda: examples.seed_example(((5, 3),)), r"seed_example: ranges must be .* got \(5, 3\)"),
])
def test_example_kernels_name_a_bad_argument(build, expected):
    # A negative stage count built a kernel with a negative ring (TVM's "cannot make uint from negative value" when
    # compiled), 0 stages a TVMScript diagnostic, an empty seed "max() arg is an empty sequence".
    with pytest.raises(ValueError, match=expected):
        build()


@pytest.mark.parametrize("kernel, expected", [
    (None, r"the kernel must be a tvm.tirx.PrimFunc, got NoneType$"),
    ("main", r"got str$"),
    ("module", r"got IRModule \(pass one of its functions, e.g. mod\['main'\]\)"),
])
def test_analyze_and_check_of_something_other_than_a_prim_func_are_type_errors(kernel, expected):
    """The call the docs show for the pass (on a module) given to `analyze` / `check` names the type, not a missing
    attribute."""
    kernel = _module() if kernel == "module" else kernel
    for function in (analyze, check):
        with pytest.raises(TypeError, match=expected):
            function(kernel)


@pytest.mark.parametrize("call, error, expected", [
    # a str reached a comparison ("'<' not supported between instances of 'str' and 'int'"), 0 or a negative bound
    # was used as given (no state explored: "exploration stopped after -1 states"), "yes" was taken for True
    (lambda f: analyze(f, max_instances="10"), ValueError, r"^analyze: max_instances must be a positive int, got '10'"),
    (lambda f: analyze(f, max_instances=0), ValueError, r"^analyze: max_instances must be a positive int, got 0"),
    (lambda f: analyze(f, unroll="yes"), TypeError, r"^analyze: unroll must be None, True or False, got str 'yes'"),
    (lambda f: check(f, max_states="5"), ValueError, r"^check: max_states must be a positive int, got '5'"),
    (lambda f: check(f, max_states=-1), ValueError, r"^check: max_states must be a positive int, got -1"),
    (lambda f: check(f, max_instances=0), ValueError, r"^check: max_instances must be a positive int, got 0"),
    (lambda f: check(analyze(f).protocol, max_states=0), ValueError, r"^check: max_states must be a positive int"),
])
def test_analyze_and_check_name_a_bad_bound(call, error, expected):
    with pytest.raises(error, match=expected):
        call(examples.streaming_kernel(tiles=4, tile=8))
