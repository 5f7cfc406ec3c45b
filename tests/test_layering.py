"""The package's layering, read from the source: no import cycle between modules, and no import that runs back up.

Layers, bottom to top: ``ir_utils`` imports nothing of the package; the other shared modules (``cuda``,
``testing``) import ``ir_utils`` at most; a wing (``split``, ``fft``, ``warpspec``) imports its own modules and the
shared ones, never another wing or the facade; the facade (``tvm_tailsplit/__init__.py``) imports the wings. Lazy
imports inside functions count too."""

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).parent.parent / "tvm_tailsplit"
IR_UTILS = "tvm_tailsplit.ir_utils"
SHARED = {IR_UTILS, "tvm_tailsplit.cuda", "tvm_tailsplit.testing"}
WINGS = ("split", "fft", "warpspec")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: pathlib.Path) -> set[str]:
    """The package modules ``path`` imports (relative imports resolved; ``from pkg import mod`` counts ``mod``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("tvm_tailsplit"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("tvm_tailsplit"):
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in MODULES else target)
    return {m for m in found if m != name}


MODULES = {module_name(p) for p in PACKAGE.rglob("*.py")}
GRAPH = {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def layer(module: str) -> str:
    if module == "tvm_tailsplit":
        return "facade"
    if module in SHARED:
        return "shared"
    parts = module.split(".")
    assert len(parts) >= 2 and parts[1] in WINGS, f"{module} belongs to no layer"
    return parts[1]


def test_every_module_belongs_to_a_layer():
    for module in MODULES:
        layer(module)


def test_no_import_runs_back_up_or_across_wings():
    wrong = []
    for module, imported in GRAPH.items():
        for target in imported:
            source_layer, target_layer = layer(module), layer(target)
            allowed = (
                source_layer == "facade"
                or target_layer == "shared" and (source_layer != "shared" or target == IR_UTILS != module)
                or target_layer == source_layer != "shared"
            )
            if not allowed:
                wrong.append(f"{module} imports {target}")
    assert not wrong, wrong


def test_no_import_cycle():
    """Module-level and lazy imports together form no cycle (a package ``__init__`` that re-exports its own
    modules is the package's index, not a module they may import back)."""
    graph = {m: {t for t in targets if not (GRAPH.get(t) is not None and m.startswith(t + "."))}
             for m, targets in GRAPH.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, cycles


def test_importing_the_package_parses_no_tvm_intrinsic_tables():
    """`import tvm_tailsplit` stays light: TVM's CUDA tensor intrinsics (hundreds of TVMScript functions, about 30 s
    to parse on a 2-core machine) are registered where the marks that name them are tensorized."""
    code = "import sys, tvm_tailsplit; print(sorted(m for m in sys.modules if m.startswith('tvm.s_tir.tensor_intrin')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert result.stdout.strip() == "[]"
