"""TailSplit's entry points as a TVM user meets them: the registered ``"tailsplit"`` TIR pipeline (composed from
TVM's default, compiled and run), reports named by GlobalVar, logging, and clear errors for wrong arguments."""

import functools
import logging
import os

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax, s_tir, te, tirx
from tvm.ir.instrument import pass_instrument

from tvm_tailsplit import MARK_KEY, TailSplit, TensorizeMarked, register_tail_intrinsics, split, tensorize_marked
from tvm_tailsplit.split import TAILSPLIT_PIPELINE, analysis, intrinsics, tailsplit_pipeline
from tvm_tailsplit.split.examples import symbolic_vector_multiply
from tvm_tailsplit.testing import run_guarded

WRAPPERS = {"sequential", "_pipeline", "TailSplitPipeline"}


@pass_instrument
class RecordPasses:
    def __init__(self):
        self.names = []

    def run_before_pass(self, mod, info):
        if info.name not in WRAPPERS:
            self.names.append(info.name)


def passes_run(compile_fn) -> list[str]:
    recorder = RecordPasses()
    with tvm.transform.PassContext(opt_level=3, instruments=[recorder]):
        compile_fn()
    return recorder.names


def test_tailsplit_pipeline_is_registered_and_runs_correctly():
    intrinsics.register_intrinsics()
    mod = symbolic_vector_multiply()
    executable = tvm.compile(mod, target=intrinsics.llvm_target(), tir_pipeline=TAILSPLIT_PIPELINE)
    rng = np.random.default_rng(0)
    for n in (0, 1, 15, 16, 17, 50):
        a, b = rng.uniform(-1, 1, n).astype("float32"), rng.uniform(-1, 1, n).astype("float32")
        _, _, c = run_guarded(executable, mod["main"], [a, b, np.zeros(n, "float32")], {"n": n})
        np.testing.assert_array_equal(c, a * b)


def test_tailsplit_pipeline_is_tvms_default_after_the_two_passes():
    """Composed, not copied: once tvm.compile has bound the target, the pipeline runs TailSplit, TensorizeMarked,
    then exactly the passes TVM's default pipeline runs on the same module (this fails if TVM's default changes
    under a copy)."""
    intrinsics.register_intrinsics()
    target = intrinsics.llvm_target()
    mod = symbolic_vector_multiply()
    ours = passes_run(lambda: tvm.compile(mod, target=target, tir_pipeline=TAILSPLIT_PIPELINE))
    prepared = TensorizeMarked()(TailSplit()(mod))
    default = passes_run(lambda: tvm.compile(prepared, target=target))
    assert ours[0] == default[0] == "tirx.BindTarget"
    assert ours[1:3] == ["TailSplit", "TensorizeMarked"]
    assert ours[3:] == default[1:] and len(default) > 20


def test_tailsplit_pipeline_takes_tailsplit_options():
    pipeline, finalize_host, finalize_device = tailsplit_pipeline(strategy="partial")
    assert isinstance(pipeline, tvm.transform.Pass) and callable(finalize_host) and callable(finalize_device)
    with pytest.raises(ValueError, match="strategy"):
        tailsplit_pipeline(strategy="everything")


def test_tailsplit_pipeline_with_options_registers_as_a_factory():
    """As the README and the docstring show: tvm.tirx.register_tir_pipeline takes a factory (called when compiling),
    so options go through functools.partial."""
    intrinsics.register_intrinsics()
    reports: list = []
    tirx.register_tir_pipeline("tailsplit_test_partial",
                               functools.partial(tailsplit_pipeline, strategy="partial", reports=reports))
    mod = symbolic_vector_multiply()
    executable = tvm.compile(mod, target=intrinsics.llvm_target(), tir_pipeline="tailsplit_test_partial")
    assert [nest.strategy for report in reports for nest in report.nests] == ["partial"]
    a, b = np.arange(17, dtype="float32"), np.full(17, 2, "float32")
    _, _, c = run_guarded(executable, mod["main"], [a, b, np.zeros(17, "float32")], {"n": 17})
    np.testing.assert_array_equal(c, a * b)


def test_reports_are_named_by_the_global_var(caplog):
    """A PrimFunc without ``global_symbol`` (as Relax's legalization makes them) is reported under its
    GlobalVar's name, and the report goes to the ``tvm_tailsplit`` logger (INFO with verbose)."""
    func = symbolic_vector_multiply()["main"].without_attr("global_symbol")
    reports = []
    caplog.set_level(logging.INFO, logger="tvm_tailsplit")
    TailSplit(verbose=True, reports=reports)(tvm.IRModule({"multiply_0": func}))
    assert [r.function for r in reports] == ["multiply_0"]
    assert "TailSplit multiply_0:" in caplog.text


def test_without_verbose_reports_go_to_debug(caplog):
    caplog.set_level(logging.INFO, logger="tvm_tailsplit")
    TailSplit()(symbolic_vector_multiply())
    assert "TailSplit main:" not in caplog.text
    caplog.set_level(logging.DEBUG, logger="tvm_tailsplit")
    TailSplit()(symbolic_vector_multiply())
    assert "TailSplit main:" in caplog.text


@pytest.mark.parametrize("bad", [None, "main", 3])
def test_passes_refuse_what_is_not_a_module(bad):
    for entry, name in ((TailSplit(), "TailSplit"), (TensorizeMarked(), "TensorizeMarked")):
        with pytest.raises(TypeError, match=f"{name}: mod must be a tvm.IRModule, got {type(bad).__name__}"):
            entry(bad)
    with pytest.raises(TypeError, match="tensorize_marked: mod must be a tvm.IRModule"):
        tensorize_marked(bad)


def test_a_prim_func_gets_a_hint_to_wrap_it():
    func = symbolic_vector_multiply()["main"]
    with pytest.raises(TypeError, match=r"got PrimFunc \(wrap it: tvm.IRModule"):
        TailSplit()(func)
    with pytest.raises(TypeError, match=r"got PrimFunc \(wrap it"):
        tensorize_marked(func)


def test_report_argument_must_be_a_list():
    with pytest.raises(TypeError, match="report must be a list"):
        tensorize_marked(symbolic_vector_multiply(), report="yes")


def test_register_tail_intrinsics_refuses_unknown_names():
    with pytest.raises(ValueError, match=r"by_extent\[4\] names 'also_nope', which is not a registered TensorIntrin"):
        register_tail_intrinsics("nope", by_extent={4: "also_nope"})
    with pytest.raises(TypeError, match="mark_value must be the name of a TensorIntrin"):
        register_tail_intrinsics(None, variable_length=lambda match: None)
    with pytest.raises(TypeError, match="by_extent must be a dict"):
        register_tail_intrinsics("nope", by_extent=[4])
    with pytest.raises(ValueError, match="give by_extent, variable_length or both"):
        register_tail_intrinsics("nope")


def test_the_pass_is_tvms_module_pass_in_a_sequential():
    intrinsics.register_intrinsics()
    seq = tvm.transform.Sequential([TailSplit(), TensorizeMarked()])
    assert isinstance(TailSplit(), tvm.transform.ModulePass) and TailSplit().info.name == "TailSplit"
    out = seq(symbolic_vector_multiply())
    assert isinstance(out["main"], tirx.PrimFunc) and MARK_KEY not in out.script()


@pytest.mark.parametrize("make", [lambda bad: TailSplit(reports=bad), lambda bad: TensorizeMarked(report=bad)],
                         ids=["TailSplit", "TensorizeMarked"])
def test_the_passes_refuse_a_report_list_that_is_not_a_list_when_made(make):
    """TailSplit(reports=()) was accepted and failed inside the pass, after its first function was split, with
    AttributeError: 'tuple' object has no attribute 'append' (naming neither the pass nor the argument)."""
    with pytest.raises(TypeError, match=r"(TailSplit: reports|TensorizeMarked: report) must be a list \(or None\), "
                                        "got tuple"):
        make(())


def test_a_mark_left_as_code_by_the_pipeline_is_logged(caplog):
    """With tir_pipeline="tailsplit" no report list can be passed to TensorizeMarked, and a mark whose region
    cannot match its intrinsic (an add marked with the multiply) compiled to scalar code without a word anywhere.
    Every record now goes to the tvm_tailsplit logger: a mark left as code at INFO, naming loop, block and why."""
    n = tirx.Var("n", "int32")
    a, b = te.placeholder((n,), "float32", name="A"), te.placeholder((n,), "float32", name="B")
    c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]).with_attr("global_symbol", "main"))
    _, lanes = sch.split(sch.get_loops(sch.get_sblock("C"))[0], [None, 16])
    sch.annotate(lanes, MARK_KEY, intrinsics.MUL_16)
    caplog.set_level(logging.INFO, logger="tvm_tailsplit")
    executable = tvm.compile(sch.mod, target=intrinsics.llvm_target(), tir_pipeline=TAILSPLIT_PIPELINE)
    left = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "TensorizeMarked" in r.getMessage()]
    assert len(left) == 2, left
    assert all("loop i_1 (block C_" in m and "left: " in m and "expected Mul" in m for m in left), left
    x, y = (np.random.default_rng(0).uniform(-1, 1, 37).astype("float32") for _ in range(2))
    got = run_guarded(executable, sch.mod["main"], [x, y, np.zeros(37, "float32")], {"n": 37})[2]
    np.testing.assert_array_equal(got, x + y)


def _relax_multiply_model() -> tvm.IRModule:
    """A Relax function main(x, y) of symbolic length calling the marked PrimFunc ``multiply`` (``call_tir``)."""
    intrinsics.register_intrinsics()
    multiply = symbolic_vector_multiply()["main"]
    length = tirx.Var("n", "int64")
    x, y = (relax.Var(name, relax.TensorType([length], "float32")) for name in ("x", "y"))
    builder = relax.BlockBuilder()
    with builder.function("main", [x, y]):
        function = builder.add_func(multiply.without_attr("global_symbol"), "multiply")
        product = builder.emit(relax.call_tir(function, [x, y], relax.TensorType([length], "float32")))
        builder.emit_func_output(product)
    return builder.get()


def test_a_relax_module_compiles_through_the_pipeline_and_exports(caplog, tmp_path):
    """A Relax model calling a marked PrimFunc (`call_tir`, symbolic length): `tvm.compile(..., tir_pipeline=
    "tailsplit")` runs TailSplit and TensorizeMarked on its PrimFuncs (reported under the function's name, the mark
    tensorized), and the library round-trips through `export_library` / `load_module` into Relax's VM, equal to
    numpy at every length."""
    model = _relax_multiply_model()
    caplog.set_level(logging.DEBUG, logger="tvm_tailsplit")
    executable = tvm.compile(model, target=intrinsics.llvm_target(), tir_pipeline=TAILSPLIT_PIPELINE)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("TailSplit multiply:") and "strategy: full split" in m for m in messages), messages
    assert any(m.startswith("TensorizeMarked multiply: loop i_1 (block C_0") and "tensorized with" in m
               for m in messages), messages
    path = os.path.join(tmp_path, "model.so")
    executable.export_library(path)
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    rng = np.random.default_rng(0)
    for n in (0, 1, 15, 16, 17, 100):
        a, b = rng.uniform(-1, 1, n).astype("float32"), rng.uniform(-1, 1, n).astype("float32")
        np.testing.assert_array_equal(vm["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b)).numpy(), a * b)


def test_tensorize_marked_and_remove_marks_keep_a_relax_modules_vdevices():
    """A Relax module's global infos (its ``vdevice`` list, which ``R.vdevice`` annotations index) were dropped by
    ``tensorize_marked`` (and by ``remove_marks``, through ``ir_utils.map_loops``), though ``TailSplit`` keeps them:
    a module that declared its devices lost them. Both now keep them; the result still builds and runs on the VM."""
    from tvm_tailsplit.split.rewrite import remove_marks

    declared = {"vdevice": [relax.VDevice(intrinsics.llvm_target(), 0, "global")]}
    model = _relax_multiply_model()
    model = tvm.IRModule(model.functions, attrs=model.attrs, global_infos=declared)
    for transformed in (tensorize_marked(TailSplit()(model)), remove_marks(model)):
        assert "vdevice" in transformed.global_infos
        tvm.ir.assert_structural_equal(transformed.global_infos["vdevice"], model.global_infos["vdevice"])
        vm = relax.VirtualMachine(tvm.compile(transformed, target=intrinsics.llvm_target()), tvm.cpu())
        rng = np.random.default_rng(0)
        for n in (0, 17):
            a, b = rng.uniform(-1, 1, n).astype("float32"), rng.uniform(-1, 1, n).astype("float32")
            np.testing.assert_array_equal(vm["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b)).numpy(), a * b)


LOWER_PAST_BLOCKS = [s_tir.transform.LowerInitBlock(), s_tir.transform.ConvertBlocksToOpaque(),
                     s_tir.transform.CompactBufferAllocation(), s_tir.transform.LowerOpaqueBlock()]


def lowered_marks(mod: tvm.IRModule) -> list[str]:
    """The marks of ``mod["main"]`` in the form LowerOpaqueBlock gives them: T.attr(loop_var, MARK_KEY, value)."""
    found = []
    tvm_ffi.structural_walk(mod["main"].body, (tirx.AttrStmt, lambda node: found.append(node.value.value)
                                                if node.attr_key == MARK_KEY else None))
    return found


def test_tailsplit_after_tvms_lower_opaque_block_splits_the_lowered_marks():
    """LowerOpaqueBlock (TVM's, composed before TailSplit in a Sequential) lowers each pragma_emit_insn loop
    annotation to T.attr(i_1, "pragma_emit_insn", ...) above the loop: TailSplit found no marks there, reported
    'no marks (pragma_emit_insn), unchanged' and left every guard, and instruction_count counted 0 sites. Such marks
    are split now, stay in their lowered form, and the program still means the original."""
    mod = symbolic_vector_multiply(instruction="vmul16")
    lowered = tvm.transform.Sequential(LOWER_PAST_BLOCKS)(mod)
    assert lowered_marks(lowered) == ["vmul16"] and analysis.conditions_under_marks(lowered) == 1
    counts = [analysis.instruction_count(m, symbolic_values={"n": 40}) for m in (mod, lowered)]
    assert counts[0] == counts[1] and counts[1].sites == 1
    reports = []
    split = tvm.transform.Sequential([*LOWER_PAST_BLOCKS, TailSplit(reports=reports)])(mod)
    assert reports[0].changed and "no marks" not in str(reports[0])
    assert lowered_marks(split) == ["vmul16", "vmul16"] and analysis.conditions_under_marks(split) == 0
    assert "annotations" not in split.script()  # no loop annotation left beside the attributes
    executable = tvm.compile(split, target="llvm")
    rng = np.random.default_rng(0)
    for n in (0, 1, 15, 16, 17, 40):
        a, b = rng.uniform(-1, 1, n).astype("float32"), rng.uniform(-1, 1, n).astype("float32")
        _, _, c = run_guarded(executable, mod["main"], [a, b, np.zeros(n, "float32")], {"n": n})
        np.testing.assert_array_equal(c, a * b)


@pytest.mark.parametrize("function", [split.split_function, split.find_marks], ids=["split_function", "find_marks"])
@pytest.mark.parametrize("bad", ["module", None], ids=["module", "None"])
def test_the_function_level_entry_points_refuse_what_is_not_a_prim_func(function, bad):
    """split.split_function and split.find_marks (public, taking one PrimFunc) given a module failed with
    AttributeError: 'IRModule' object has no attribute 'body'; now a TypeError naming the function."""
    mod = symbolic_vector_multiply()
    argument = mod if bad == "module" else None
    hint = r" \(take one of its functions: mod\['main'\]\)" if bad == "module" else ""
    with pytest.raises(TypeError, match=rf"{function.__name__}: func must be a tirx.PrimFunc, got "
                                        rf"{type(argument).__name__}{hint}$"):
        function(argument)
