"""One look tells commands from library: scripts/ holds only commands, each with a --help that shows
usage and examples; the package scripts/lcm/ never reaches up to a command; hooks stay on the
standard library and the package."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SCRIPTS

PACKAGE = SCRIPTS / "lcm"
HOOKS = ROOT / "hooks"
COMMAND_FILES = sorted(p for p in SCRIPTS.iterdir() if p.is_file())
COMMANDS = {p.stem for p in COMMAND_FILES}
HOOK_MODULES = {p.stem for p in HOOKS.glob("*.py")}


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth of its code (lazy imports inside functions too),
    including importlib.import_module("...") and __import__("...") with a literal name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside the package
                base = "lcm" + (f".{node.module}" if node.module else "")
                names.update(f"{base}.{alias.name}" for alias in node.names)
            else:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and (getattr(node.func, "attr", None) == "import_module"
                   or getattr(node.func, "id", None) == "__import__")):
            names.add(node.args[0].value)
    return names


def test_scripts_holds_only_commands_and_the_package():
    assert PACKAGE.is_dir()
    assert COMMAND_FILES
    assert all(p.suffix == ".py" and p.stem.startswith("lcm_") for p in COMMAND_FILES), COMMAND_FILES
    assert {p.name for p in SCRIPTS.iterdir() if p.is_dir()} <= {"lcm", "__pycache__"}


@pytest.mark.parametrize("script", COMMAND_FILES, ids=lambda p: p.name)
def test_every_file_in_scripts_prints_usage_with_examples_on_help(script):
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    text = proc.stdout
    assert text.startswith(f"usage: {script.name}"), text[:200]
    assert "Examples:" in text, f"{script.name} --help has no Examples section"
    examples = text.split("Examples:", 1)[1]
    assert f"{script.name}" in examples, f"{script.name} --help: no example runs the command"


def test_no_package_module_imports_a_command():
    offenders = {}
    for module in sorted(PACKAGE.glob("*.py")):
        commands = {name for name in imported_modules(module) if name.split(".")[0] in COMMANDS}
        if commands:
            offenders[module.name] = sorted(commands)
    assert not offenders, f"package modules import commands: {offenders}"


def stdlib_names() -> set[str]:
    """The standard library's top-level modules: sys.stdlib_module_names (3.10+), else (3.9) what
    the interpreter's own library directories and builtins hold."""
    if hasattr(sys, "stdlib_module_names"):
        return set(sys.stdlib_module_names)
    import os
    import sysconfig
    names = set(sys.builtin_module_names) | {"_frozen_importlib", "_frozen_importlib_external"}
    stdlib = sysconfig.get_paths()["stdlib"]
    for folder in (stdlib, os.path.join(stdlib, "lib-dynload")):
        for entry in os.listdir(folder):
            if entry != "site-packages":
                names.add(entry.split(".")[0])
    return names


def hook_imports() -> dict[str, set[str]]:
    return {p.name: imported_modules(p) for p in sorted(HOOKS.glob("*.py"))}


def test_hooks_import_only_the_standard_library_and_the_package():
    allowed = stdlib_names() | {"lcm"} | HOOK_MODULES
    outside = {hook: sorted(n for n in names if n.split(".")[0] not in allowed)
               for hook, names in hook_imports().items()}
    outside = {hook: names for hook, names in outside.items() if names}
    assert not outside, f"hooks import outside the stdlib and lcm: {outside}"
    assert not any(n.split(".")[0] in COMMANDS for names in hook_imports().values() for n in names)


def test_what_hooks_import_loads_nothing_but_the_standard_library_and_the_package():
    """Importing the hook modules and every package module they use, with no site-packages
    (`python3 -I -S`, as hooks.json runs them), pulls in only the stdlib and lcm: any third-party
    package stays a lazy import inside the function that needs it."""
    modules = package_modules()
    used = sorted({n for names in hook_imports().values() for n in names if n in modules and n != "lcm"})
    assert used, "the hooks use the package"
    code = (f"import sys; sys.path[:0] = [{str(HOOKS)!r}, {str(SCRIPTS)!r}]\n"
            f"import {', '.join(sorted(HOOK_MODULES) + used)}\n"
            "print('\\n'.join(sorted({m.split('.')[0] for m in sys.modules})))")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stdout.split())
    outside = loaded - stdlib_names() - {"lcm", "__main__"} - HOOK_MODULES
    assert not outside, f"loaded by the hooks' imports: {sorted(outside)}"


def package_modules() -> dict[str, Path]:
    """lcm's modules by dotted name: lcm.vault.db, lcm.maps.worker, ..."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(SCRIPTS).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def test_the_package_has_no_import_cycle():
    """Layers run one way (storage, reading and search, compaction and the model seam): no module
    reaches, even lazily inside a function, a module that reaches back to it."""
    modules = package_modules()
    graph = {name: {dep for dep in (".".join(n.split(".")[:i]) for n in imported_modules(path)
                                    for i in range(2, n.count(".") + 2))
                    if dep in modules and dep != name}
             for name, path in modules.items()}
    state: dict[str, int] = {}  # 1 on the path being walked, 2 done

    def walk(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                return path + [name, dep]
            if dep not in state and (cycle := walk(dep, path + [name])):
                return cycle
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state and (cycle := walk(name, [])):
            pytest.fail("import cycle: " + " -> ".join(cycle[cycle.index(cycle[-1]):]))


def test_only_the_model_seam_imports_anthropic():
    files = sorted(PACKAGE.rglob("*.py")) + COMMAND_FILES + sorted(HOOKS.glob("*.py"))
    importers = {str(p.relative_to(SCRIPTS if SCRIPTS in p.parents else ROOT)) for p in files
                 if p.suffix == ".py" and any(m == "anthropic" or m.startswith("anthropic.")
                                              for m in imported_modules(p))}
    assert importers == {"lcm/base/llm.py"}


def wing_of(module: str) -> str:
    """lcm.vault.db -> vault; lcm.cli -> cli (a top-level module is a wing of one)."""
    return module.split(".")[1]


def test_the_package_top_level_is_a_handful_of_wings_each_mapped():
    """scripts/lcm/ holds the wings (folders) and the few one-module wings, at most 25 names; each
    wing's __init__ docstring names every module in it, and lcm/__init__.py lists every wing."""
    import lcm
    top = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert len(top) <= 25, top
    names = {p.stem for p in PACKAGE.iterdir() if p.name not in ("__init__.py", "__pycache__")}
    assert set(lcm.WINGS) == names, (sorted(lcm.WINGS), sorted(names))
    for wing in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        doc = ast.get_docstring(ast.parse((wing / "__init__.py").read_text(encoding="utf-8")), clean=False) or ""
        mapped = {line.split()[0] for line in doc.splitlines() if line.startswith("  ") and not line.startswith("   ")}
        modules = {p.stem for p in wing.glob("*.py") if p.stem != "__init__"}
        assert modules <= mapped, f"lcm/{wing.name}/__init__.py does not name {sorted(modules - mapped)}"
        assert not mapped - modules, f"lcm/{wing.name}/__init__.py names missing modules {sorted(mapped - modules)}"
        assert (lcm.__doc__ or "").count(f"  {wing.name} "), f"lcm/__init__.py does not describe the {wing.name} wing"


def test_a_module_imports_only_its_own_wing_and_the_wings_before_it():
    """The one layering rule: lcm.__init__.WINGS is the order, lazy imports inside functions count."""
    import lcm
    order = {wing: i for i, wing in enumerate(lcm.WINGS)}
    modules = package_modules()
    upward = {}
    for name, path in modules.items():
        if name == "lcm":
            continue
        for dep in imported_modules(path):
            if dep.startswith("lcm.") and order[wing_of(dep)] > order[wing_of(name)]:
                upward.setdefault(name, set()).add(dep)
    assert not upward, f"modules importing a later wing: {upward}"


def test_one_import_path_per_name():
    """No module re-exports another's name: no `name = lcm.x.y` alias at the top level, and every
    name imported with `from lcm.x import name` is used by the importer itself."""
    aliases = {}
    for name, path in package_modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute)
                    and ast.unparse(node.value).startswith("lcm.")):
                aliases.setdefault(name, []).append(ast.unparse(node))
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lcm"):
                for alias in node.names:
                    if (alias.asname or alias.name) not in used:
                        aliases.setdefault(name, []).append(f"from {node.module} import {alias.name} (unused: a re-export)")
    assert not aliases, aliases


def _architecture_section(title: str) -> str:
    text = (ROOT / "references" / "architecture.md").read_text(encoding="utf-8")
    start = text.index(title)
    return text[start:text.index("\n#", start + len(title))]


def test_the_code_map_names_every_module_of_every_wing():
    """references/architecture.md's code map: one row per wing, in lcm.WINGS' order, naming exactly
    the modules the wing's folder holds."""
    import lcm
    rows = [line.split("|")[1:-1] for line in _architecture_section("## Code map").splitlines()
            if line.startswith("| `")]
    assert [r[0].strip().strip("`") for r in rows] == list(lcm.WINGS)
    for wing, _what, modules in rows:
        wing = wing.strip().strip("`")
        named = set(re.findall(r"(?:^|, )`(\w+)`", re.sub(r" \([^)]*\)", "", modules.strip())))
        folder = PACKAGE / wing
        actual = ({p.stem for p in folder.glob("*.py") if p.stem != "__init__"} if folder.is_dir() else {wing})
        assert named == actual, f"code map row {wing}: names {sorted(named)}, the wing holds {sorted(actual)}"


def test_where_to_change_what_names_files_that_exist():
    """Every file the 'where to change what' table sends a reader to exists (a template such as
    scripts/lcm_<verb>.py or hooks/<event>.py stands for files that do)."""
    table = _architecture_section("### Where to change what")
    named = set(re.findall(r"`([\w./<>-]+\.(?:py|md|json|toml))`", table))
    assert len(named) >= 15, named
    for path in sorted(named):
        pattern = re.sub(r"<[^>]+>", "*", path)
        assert list(ROOT.glob(pattern)), f"architecture.md names {path}, which does not exist"
