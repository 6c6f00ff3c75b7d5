"""Package layers (ARCHITECTURE.md, issue 18 item 7): the import contract in
pyproject.toml ``[tool.importlinter]`` holds, and no module outside the layout
classes tests a layout string (they ask the layout's capabilities instead:
``lay.bfs``, ``layout_class(spec).routes``, ...).

The contract counts every import, the lazy ones inside functions included.
Run it by hand with ``lint-imports`` from the repository root.
"""
from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _contracts() -> list[tuple[str, str]]:
    """(id, name) of every contract in pyproject.toml [tool.importlinter]."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [(c["id"], c["name"]) for c in cfg["tool"]["importlinter"]["contracts"]]


@functools.lru_cache(maxsize=None)
def _lint_report() -> tuple[int, str]:
    """One ``lint-imports`` run over every contract: (exit status, report text).
    Cached, so the per-contract tests below read one report."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-c",
                             "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "200", "NO_COLOR": "1"}
    r = subprocess.run(cmd + ["--no-cache", "--no-logo"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    return r.returncode, r.stdout + r.stderr


def contract_verdict(report: str, name: str) -> tuple[str | None, str]:
    """("KEPT" | "BROKEN" | None, the contract's section of "Broken contracts")
    for the contract called ``name`` in a ``lint-imports`` report."""
    m = re.search(rf"^{re.escape(name)} (KEPT|BROKEN)\b", report, re.M)  # "KEPT (2 ignored imports)"
    if not m:
        return None, ""
    if m.group(1) == "KEPT":
        return "KEPT", ""
    broken = report[report.find("Broken contracts"):] if "Broken contracts" in report else report
    h = re.search(rf"^{re.escape(name)}\n-+\n", broken, re.M)
    if not h:
        return "BROKEN", broken
    rest = broken[h.end():]
    # the next contract's heading: a line followed by a line of dashes as long
    nxt = re.search(r"^(.+)\n-+\n", rest, re.M)
    return "BROKEN", rest[:nxt.start()] if nxt else rest


def test_import_linter_installed():
    try:
        import importlinter  # noqa: F401
    except ImportError:  # pragma: no cover
        pytest.fail("import-linter is missing: pip install -e '.[test]' (the test extra) — "
                    "the import contract of pyproject.toml cannot be checked without it")


def test_contract_verdict_reads_the_report():
    report = ("Contracts\n---------\n\nalpha one KEPT (1 ignored import)\nbeta two BROKEN\ngamma BROKEN\n\n"
              "Contracts: 1 kept, 2 broken.\n\n----------------\nBroken contracts\n----------------\n\n"
              "beta two\n--------\n\na is not allowed to import b:\n\n-   a.x -> b (l.3)\n\n\n"
              "gamma\n-----\n\nc is not allowed to import d:\n")
    assert contract_verdict(report, "alpha one") == ("KEPT", "")
    verdict, text = contract_verdict(report, "beta two")
    assert verdict == "BROKEN" and "a.x -> b (l.3)" in text and "c is not" not in text
    assert contract_verdict(report, "gamma")[0] == "BROKEN" and "c is not" in contract_verdict(report, "gamma")[1]
    assert contract_verdict(report, "delta") == (None, "")


@pytest.mark.parametrize("contract,name", _contracts(), ids=[c for c, _ in _contracts()])
@pytest.mark.dist
def test_import_contract(contract, name):
    """One contract of pyproject.toml [tool.importlinter], read from the one
    ``lint-imports`` run of this session; a broken one fails with
    import-linter's report (importer:line -> imported, and the chain)."""
    pytest.importorskip("importlinter")
    rc, out = _lint_report()
    verdict, section = contract_verdict(out, name)
    if verdict is None:
        pytest.fail(f"lint-imports (exit {rc}) did not report contract {contract!r}:\n{out}", pytrace=False)
    if verdict == "BROKEN":
        pytest.fail(f"import contract {contract!r} is broken:\n{name}\n{section.strip()}", pytrace=False)


# ----------------------------------------------------------------------------- cli is the top
def _sources(*dirs: str):
    for d in dirs:
        for p in sorted((ROOT / d).rglob("*.py")):
            if "__pycache__" not in p.parts:
                yield p, _parse(p)


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> ast.AST:
    """Each source file parsed once for the tests of this module."""
    return ast.parse(path.read_text(), filename=str(path))


def test_library_never_imports_the_cli():
    """``cli/`` is installed as ``partplan.cli``, outside the tree import-linter
    sees: no module of the library imports it (the CLI is a thin layer over the
    API), but ``partplan/__main__.py``."""
    bad = []
    for path, tree in _sources("partplan"):
        if path.name == "__main__.py":  # ``python -m partplan`` runs the CLI: above it
            continue
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:  # relative: resolve against the module's package
                    pkg = path.relative_to(ROOT).with_suffix("").parts[:-1]
                    base = list(pkg[:len(pkg) - node.level + 1])
                    mod = ".".join(base + ([mod] if mod else []))
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            if any(n == "partplan.cli" or n.startswith("partplan.cli.") or n == "cli" or n.startswith("cli.")
                   for n in names):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, "the library imports the CLI: " + ", ".join(bad)


# ----------------------------------------------------------------------------- layout strings
#: modules that define the layouts: the only ones that may interpret a layout string
LAYOUT_MODULES = {p.relative_to(ROOT).as_posix() for p in (ROOT / "partplan" / "layouts").glob("*.py")}
#: (file, source line fragment) that look like a layout test but are not (keep it short)
ALLOWED: set[tuple[str, str]] = set()

_NAMES = {"1d", "1.5d", "2d", "routed"}
_PREFIXES = ("1.5d:", "2d:", "routed:")


def _is_layout(node) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        s = node.value.strip().lower()
        return s in _NAMES or s.startswith(_PREFIXES)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_layout(e) for e in node.elts)
    return False


def layout_string_tests(tree: ast.AST, source: str) -> list[tuple[int, str]]:
    """(line, what) for every place that tests a layout string: a comparison or
    membership test against a layout name, ``.startswith("2d:")``, a layout
    string split at ``:``, a dict keyed by layout names, a tuple of layout names,
    a regular expression over layout specs."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            if any(_is_layout(x) for x in [node.left, *node.comparators]):
                hits.append((node.lineno, "compares with a layout name"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            if attr in ("startswith", "endswith") and any(_is_layout(a) for a in node.args):
                hits.append((node.lineno, f".{attr}(<layout name>)"))
            elif (attr in ("split", "rsplit", "partition") and node.args
                  and isinstance(node.args[0], ast.Constant) and node.args[0].value == ":"
                  and "layout" in ast.unparse(node.func.value).lower()):
                hits.append((node.lineno, "splits a layout string at ':'"))
            elif (attr in ("match", "fullmatch", "search", "compile") and node.args
                  and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                  and re.search(r"1\\?\.5d|\b2d\b|\b1d\b|routed", node.args[0].value)):
                hits.append((node.lineno, "a regular expression over layout specs"))
        elif isinstance(node, ast.Dict):
            if any(k is not None and _is_layout(k) for k in node.keys):
                hits.append((node.lineno, "a dict keyed by layout names"))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and _is_layout(node):
            hits.append((node.lineno, "a collection of layout names"))
    lines = source.splitlines()
    seen, out = set(), []
    for ln, what in sorted(hits):
        if ln not in seen:
            seen.add(ln)
            out.append((ln, f"{what}: {lines[ln - 1].strip()}"))
    return out


def test_layout_string_scan_finds_the_patterns():
    src = '''
if m["layout"] != "1d": pass
if lay.name in ("1d", "1.5d"): pass
if args.layout.startswith("routed"): pass
kind = str(m["layout"]).split(":")[0]
spec = {"1.5d": 1, "2d": 2}.get(name)
check_layout(m, ("1d", "routed"))
ok = re.fullmatch(r"2d:(\\d+)x(\\d+)", s)
if lay.bfs and not lay.routes: pass
x = parse_layout("1d", 4)
mod, fn = JOBS[job].split(":")
'''
    found = [ln for ln, _ in layout_string_tests(ast.parse(src), src)]
    assert found == [2, 3, 4, 5, 6, 7, 8]


def test_no_layout_string_tests_outside_the_layouts():
    """Layouts declare capabilities; nothing outside them re-interprets a layout
    string (ARCHITECTURE.md). Ask ``parse_layout(spec, k)`` / ``layout_class(spec)``
    / ``layout_from_manifest(m)`` for ``supports_owner``, ``bfs``, ``analytics``,
    ``stealing``, ``routes``, ``fold``, ``replicas``, ``gcn``, ``minibatch``,
    ``routable``, ``bottleneck``, ``layout_stats``, ``exact_replay`` (add one to
    :class:`partplan.layouts.base.Layout` when a new question comes up)."""
    bad = []
    for path, tree in _sources("partplan", "cli"):
        rel = path.relative_to(ROOT).as_posix()
        if rel in LAYOUT_MODULES:
            continue
        src = path.read_text()
        for ln, what in layout_string_tests(tree, src):
            if not any(f == rel and frag in what for f, frag in ALLOWED):
                bad.append(f"{rel}:{ln}: {what}")
    assert not bad, "layout-string tests outside partplan/layouts/ (ask a capability):\n" + "\n".join(bad)
