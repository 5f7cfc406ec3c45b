"""The tail benchmark's variants (bench/tail_variants.py): every way of compiling a workload computes what numpy
computes, on canary-guarded buffers; the unvectorized reference is the guarded schedule without vectorize; the
divisible shape and the useful work are as the benchmark reads them."""

import pytest
import tvm

from bench import tail_variants as tv
from tvm_tailsplit.split.conditions import loop_vars_in

from .test_workloads import SHAPES, check_against_numpy, workload_params


@pytest.mark.parametrize("variant", tv.VARIANTS + tv.REFERENCE_VARIANTS)
@pytest.mark.parametrize("name", workload_params(SHAPES))
def test_benchmark_variants_match_numpy(name, variant, target):
    shape = SHAPES[name][0]
    mod = tv.build_variant(name, variant, shape)
    computed = tv.divisible_shape(name, shape) if variant == "divisible" else shape
    check_against_numpy(name, mod, computed, target, seed=1)


@pytest.mark.parametrize("name", workload_params(SHAPES))
def test_unvectorized_reference_is_the_guarded_schedule_without_vectorize(name):
    def loop_kinds(mod):
        return [loop.kind for loop in loop_vars_in(mod["main"].body)]

    shape = SHAPES[name][0]
    guarded = loop_kinds(tv.build_variant(name, "guarded", shape))
    unvectorized = loop_kinds(tv.build_variant(name, "guarded_unvectorized", shape))
    vectorized = tvm.tirx.ForKind.VECTORIZED
    # the lane loops of the dense layer and the matmul carry a guard: sch.vectorize refuses them (LLVM's vectorizer
    # is left with them), so the two variants are the same there; the element-wise op's guard is on h
    assert (vectorized in guarded) == (name == "elementwise_nc1hwc0") and vectorized not in unvectorized
    assert [tvm.tirx.ForKind.SERIAL if kind == vectorized else kind for kind in guarded] == unvectorized


def test_divisible_shape_and_useful_work():
    # the matmul kernel covers the whole reduction: only M and N are tiled
    assert tv.divisible_shape("matmul_fp32", dict(m=127, n=255, k=129)) == dict(m=128, n=256, k=129)
    assert tv.useful_work("matmul_fp32", dict(m=128, n=256, k=129)) == 1.0
    assert tv.divisible_shape("dense_int8_vnni", dict(m=127, n=1000, k=255)) == dict(m=128, n=1008, k=255)
