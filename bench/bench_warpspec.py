"""WarpSpecialize benchmark: static figures of the generated protocols and CUDA kernels.

There is no GPU on the machines this runs on so far, so nothing is timed. For every example kernel it records:
synchronization operations per pipeline iteration (tile) before and after redundancy elimination (one arrive and
one wait per channel group), data and resource channels, the stages of each ring, whether `check` finds the
protocol safe, and, where nvcc exists, ptxas' registers, barriers and shared memory for sm_80 and sm_90, next to
TVM's own software-pipelined GEMM (same tile sizes, `software_pipeline_stage` + cp.async) as the baseline.
Results go to bench/results/warpspec.json and warpspec.md with the machine and the date.
"""

from __future__ import annotations

import datetime
import json
import platform

import tvm
from tvm import s_tir, te

from bench import cli
from tvm_tailsplit.cuda import compile_cuda_source, cuda_source, gpu_available, nvcc_available
from tvm_tailsplit.warpspec import (
    WARP_SPECIALIZED_PIPELINE,
    WarpSpecialize,
    analyze,
    check,
    examples,
    tile_plan,
    unspecialized_hopper_kernel,
)
from tvm_tailsplit.warpspec.channels import allocate_channels
from tvm_tailsplit.warpspec.graphs import DATA, RESOURCE
from tvm_tailsplit.warpspec.hopper import PRODUCER_REGISTERS, consumer_registers, hopper_protocol

ARCHS = ("sm_80", "sm_90")

# name -> (kernel for the analysis with small trip counts, kernel for CUDA, threads per role)
KERNELS = {
    "seed example (straight line: totals)": (examples.seed_example, examples.seed_example, {0: 32, 1: 32}),
    "streaming, 2 stages": (lambda: examples.streaming_kernel(8, 32, 2),
                            lambda: examples.streaming_kernel(64, 256, 2), {0: 32, 1: 128}),
    "streaming, 3 stages": (lambda: examples.streaming_kernel(8, 32, 3),
                            lambda: examples.streaming_kernel(64, 256, 3), {0: 32, 1: 128}),
    "GEMM fp16/fp32, 2 stages": (lambda: examples.gemm_kernel(64, 64, 256, 64, 64, 32, stages=2),
                                 lambda: examples.gemm_kernel(1024, 1024, 1024, 64, 64, 32, stages=2),
                                 {0: 32, 1: 128}),
    "GEMM fp16/fp32, 3 stages": (lambda: examples.gemm_kernel(64, 64, 256, 64, 64, 32, stages=3),
                                 lambda: examples.gemm_kernel(1024, 1024, 1024, 64, 64, 32, stages=3),
                                 {0: 32, 1: 128}),
    "GEMM, 3 stages, two compute roles": (
        lambda: examples.gemm_kernel(64, 64, 256, 64, 64, 32, stages=3, compute_roles=2),
        lambda: examples.gemm_kernel(1024, 1024, 1024, 64, 64, 32, stages=3, compute_roles=2),
        {0: 32, 1: 64, 2: 64}),
}


def static_figures(name: str) -> dict:
    """The figures of one kernel (see the module doc)."""
    analysis_kernel, cuda_kernel, threads = KERNELS[name]
    analysis = analyze(analysis_kernel())
    unreduced = allocate_channels(analysis.cdrfg)
    report = check(analysis.protocol)
    figures = {
        "kernel": name,
        "sync_ops_per_tile_before_reduction": unreduced.sync_operations_per_iteration(),
        "sync_ops_per_tile_after_reduction": analysis.plan.sync_operations_per_iteration(),
        "edges_before_reduction": len(analysis.cdrfg.edges),
        "edges_after_reduction": len(analysis.reduced.edges),
        "data_channels": len(analysis.plan.channels_of_kind(DATA)),
        "resource_channels": len(analysis.plan.channels_of_kind(RESOURCE)),
        "stages": [g.stages for g in analysis.plan.groups],
        "check": "safe" if report.ok else "; ".join(i.message for i in report.issues),
        "check_states": report.states,
        "ptxas": {},
    }
    if nvcc_available():
        mod = WarpSpecialize("cuda", threads_per_role=threads)(tvm.IRModule({"main": cuda_kernel()}))
        for arch in ARCHS:
            usage = compile_cuda_source(cuda_source(mod, arch, tir_pipeline=WARP_SPECIALIZED_PIPELINE), arch)[0]
            figures["ptxas"][arch] = {"registers": usage.registers, "barriers": usage.barriers,
                                      "shared_memory_bytes": usage.shared_memory_bytes}
    return figures


def hopper_figures() -> dict:
    """The Hopper form of `examples.hopper_gemm_kernel`: synchronization operations per tile before and after the
    transaction rewrite, the wgmma groups each consumer keeps in flight, the check of the Hopper protocol, and
    ptxas' figures (sm_90a) of the warp-specialized kernel and of its ablation."""
    analysis = analyze(examples.hopper_gemm_kernel(128, 256, 64 * 6, stages=3))
    tiles = tile_plan(analysis.tree)
    protocol = hopper_protocol(analysis.protocol, tiles)
    in_loop = [task.name for loop in analysis.tree.loops() for task in loop.children if hasattr(task, "role")]
    figures = {
        "kernel": "Hopper GEMM (128x256x64 tiles, TMA producer + 2 wgmma warpgroups; checked at 3 stages, 6 tiles)",
        "sync_ops_per_tile_sequential_commits": sum(len(analysis.protocol.ops.get(t, ())) for t in in_loop),
        "sync_ops_per_tile_transactions": sum(len(protocol.ops.get(t, ())) for t in in_loop),
        "tx_bytes_per_tile": [op.tx_bytes for ops in protocol.ops.values() for op in ops if op.tx_copies],
        "wgmma_in_flight": protocol.in_flight,
        "check": "safe" if (report := check(protocol)).ok else report.describe(),
        "check_states": report.states,
        "setmaxnreg": {"producer": PRODUCER_REGISTERS, "consumer": consumer_registers(2)},
        "ptxas_sm_90a": {},
    }
    if nvcc_available():
        func = examples.hopper_gemm_kernel(4096, 4096, None)
        modules = {"warp_specialized": WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func})),
                   "ablation": tvm.IRModule({"main": unspecialized_hopper_kernel(func)})}
        for name, mod in modules.items():
            usage = compile_cuda_source(cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE),
                                        "sm_90a")[0]
            figures["ptxas_sm_90a"][name] = {"registers": usage.registers, "spill_bytes": usage.spill_store_bytes}
    return figures


def software_pipelined_gemm(m: int = 1024, n: int = 1024, k: int = 1024) -> tvm.IRModule:
    """TVM's own pipelined GEMM for comparison: shared tiles, `software_pipeline_stage` over the k loop, cp.async.

    The same tile sizes as the warp-specialized GEMM (64 x 64 x 32), 256 threads with 4 x 4 register tiles.
    """
    a = te.placeholder((m, k), "float16", name="A")
    b = te.placeholder((k, n), "float16", name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r].astype("float32") * b[r, j].astype("float32"), axis=r),
                   name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]).with_attr("global_symbol", "main"))
    block = sch.get_sblock("C")
    i, j, kk = sch.get_loops(block)
    by, ty, yi = sch.split(i, [None, 16, 4])
    bx, tx, xi = sch.split(j, [None, 16, 4])
    ko, ki = sch.split(kk, [None, 32])
    sch.reorder(by, bx, ty, tx, ko, ki, yi, xi)
    for loop, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        sch.bind(loop, tag)
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, tx, preserve_unit_loops=True)
    for index in (0, 1):
        shared = sch.cache_read(block, index, "shared")
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, t_y, t_x, vector = sch.split(fused, [None, 16, 16, 4])
        sch.bind(t_y, "threadIdx.y")
        sch.bind(t_x, "threadIdx.x")
        sch.vectorize(vector)
    sch.decompose_reduction(block, ko)
    sch.annotate(ko, "software_pipeline_stage", [0, 0, 1])
    sch.annotate(ko, "software_pipeline_order", [0, 1, 2])
    sch.annotate(ko, "software_pipeline_async_stages", [0])
    return sch.mod


def baseline_figures() -> dict:
    """ptxas figures of TVM's software-pipelined GEMM (2 stages, cp.async), per architecture."""
    figures = {"kernel": "TVM software-pipelined GEMM (baseline, 2 stages, cp.async)", "ptxas": {}}
    if nvcc_available():
        with tvm.transform.PassContext(config={"tirx.use_async_copy": True}):
            for arch in ARCHS:
                usage = compile_cuda_source(cuda_source(software_pipelined_gemm(), arch), arch)[0]
                figures["ptxas"][arch] = {"registers": usage.registers, "barriers": usage.barriers,
                                          "shared_memory_bytes": usage.shared_memory_bytes}
    return figures


def _markdown(results: dict) -> str:
    lines = [
        "# WarpSpecialize: static figures",
        "",
        f"Machine: {results['machine']}; date: {results['date']}; GPU: {results['gpu']}; nvcc: {results['nvcc']}.",
        "No timings: there is no GPU here. Sync ops per tile = one arrive + one wait per channel group.",
        "",
        "| kernel | sync ops/tile before | after | edges before | after | data ch. | resource ch. | stages "
        "| check | sm_80 regs/bars/smem | sm_90 regs/bars/smem |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["kernels"]:
        ptxas = [f"{u['registers']}/{u['barriers']}/{u['shared_memory_bytes']}" if (u := row["ptxas"].get(a))
                 else "-" for a in ARCHS]
        lines.append(
            f"| {row['kernel']} | {row['sync_ops_per_tile_before_reduction']} "
            f"| {row['sync_ops_per_tile_after_reduction']} | {row['edges_before_reduction']} "
            f"| {row['edges_after_reduction']} | {row['data_channels']} | {row['resource_channels']} "
            f"| {row['stages']} | {row['check']} | {ptxas[0]} | {ptxas[1]} |"
        )
    baseline = results["baseline"]
    ptxas = [f"{u['registers']}/{u['barriers']}/{u['shared_memory_bytes']}" if (u := baseline["ptxas"].get(a))
             else "-" for a in ARCHS]
    lines.append(f"| {baseline['kernel']} | - | - | - | - | - | - | - | - | {ptxas[0]} | {ptxas[1]} |")
    hopper = results["hopper"]
    ptxas = "; ".join(f"{name} {u['registers']} registers, {u['spill_bytes']} spill bytes"
                      for name, u in hopper["ptxas_sm_90a"].items()) or "-"
    in_flight = ", ".join(f"{task} {depth}" for task, depth in hopper["wgmma_in_flight"].items()) or "none"
    lines += ["", "## Hopper form (`WarpSpecialize(\"cuda\", hopper=True)`)", "",
              f"{hopper['kernel']}: sync ops per tile {hopper['sync_ops_per_tile_sequential_commits']} with "
              f"sequential commits, {hopper['sync_ops_per_tile_transactions']} with one `expect_tx` transaction "
              f"({hopper['tx_bytes_per_tile']} bytes) shared by both consumer warpgroups; wgmma groups in flight "
              f"per consumer {in_flight} (`wgmma.wait_group` that many, then the release of the stage read as many "
              f"tiles earlier); check: {hopper['check']} "
              f"({hopper['check_states']} states); setmaxnreg producer {hopper['setmaxnreg']['producer']} / consumers "
              f"{hopper['setmaxnreg']['consumer']}; sm_90a ptxas (launch bound = register file / threads): {ptxas}. "
              "Timings: `bench_warpspec_cuda` on a GPU."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = cli.parser("bench_warpspec", (__doc__ or "").split("\n\n")[0]).parse_args(argv)
    results = {
        "machine": f"{platform.node()} ({platform.machine()}, {platform.processor() or 'cpu'}, "
                   f"{platform.system()} {platform.release()})",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": gpu_available(),
        "nvcc": nvcc_available(),
        "kernels": [static_figures(name) for name in KERNELS],
        "baseline": baseline_figures(),
        "hopper": hopper_figures(),
    }
    json_path, md_path = cli.result_paths("warpspec", args.quick)
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    markdown = _markdown(results)
    md_path.write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    main()
