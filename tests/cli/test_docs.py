"""The documentation as a product: its examples run, it speaks of the present,
its pages stay readable, and the command reference covers the parser.

1. README.md's code blocks run (rule also in docs/README.md, "Tested examples"):
   every ```python block is executed, in order, each in a fresh namespace, in one
   temporary folder, unless the line before it is ``<!-- no-test -->``; a ```sh
   block runs (bash, ``set -e``, the venv's ``partplan`` first on PATH, the same
   folder, after the python blocks) only when the line before it is
   ``<!-- test -->``.
2. No text outside CHANGELOG.md narrates history: sessions, pipeline versions
   ("v3.4", "planner v3"), issue numbers. The docs and the code are separate
   tests, so each names its own offenders (file:line).
3. README.md ≤ 250 lines; every other doc page ≤ 800 lines.
4. docs/reference/cli.md names every subcommand and every long option of the
   ``partplan`` parser, and docs/reference/options.md every option of the
   partitioner's schemas (regenerate both with ``python docs/reference/gen_cli.py``).
5. Relative links in README.md and docs/ point at files that exist.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

README_MAX_LINES = 250
PAGE_MAX_LINES = 800

# history words: sessions, versions of our own pipeline/runtime, issue numbers. Version numbers of
# dependencies ("torch 2.13", "pymetis 2023.1") carry no "v"; format versions are spelled
# "format version 2" / "format_version" and are not matched.
HISTORY = re.compile(
    r"\bsessions? \d+"                          # session 33, sessions 31-32
    r"|\bsession's\b|\bthis session\b"           # this session's code
    r"|(?<![\w.])v\d+\.\d+\b"                    # v3.4 (not 1.v2.3, not file names)
    r"|\b(?:pipeline|planner|runtime|refinement)(?: v| version )\d\b"   # planner v3, runtime v2
    r"|\bissue #?\d+|\(#\d+\)|\bissues? \d+"     # issue 18, (#20)
    r"|\bitem \d+ of the issue|\bthe issue's\b",
    re.IGNORECASE)
TEXT_SUFFIXES = {".md", ".py", ".txt", ".json", ".toml", ".cfg", ".ini", ".rst"}


# --------------------------------------------------------------------------- 1. README examples
def _blocks(text: str):
    """(language, marker, code, line) of every fenced block; marker = the HTML comment on the
    line before the fence (``test`` / ``no-test``) or ''."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w+)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mk = re.match(r"^<!--\s*([\w-]+)", lines[j]) if j >= 0 else None
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        yield m.group(1), (mk.group(1) if mk else ""), "\n".join(lines[i + 1:end]) + "\n", i + 1
        i = end + 1


def _readme_blocks(lang: str, wanted):
    return [(code, line) for la, mk, code, line in _blocks(README.read_text()) if la == lang and wanted(mk)]


def _venv_bin() -> Path:
    return Path(sys.executable).parent


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("readme")


PY_BLOCKS = _readme_blocks("python", lambda mk: mk != "no-test")
SH_BLOCKS = _readme_blocks("sh", lambda mk: mk == "test")


def test_readme_has_tested_quickstart():
    assert len(PY_BLOCKS) >= 2 and SH_BLOCKS, "README's quickstart lost its tested blocks"


@pytest.mark.parametrize("code,line", PY_BLOCKS, ids=[f"README.md:{ln}" for _, ln in PY_BLOCKS])
def test_readme_python_block(code, line, workdir, monkeypatch):
    if "torch_geometric" in code:
        pytest.importorskip("torch_geometric")
    monkeypatch.chdir(workdir)
    exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__readme__"})  # noqa: S102


@pytest.mark.parametrize("code,line", SH_BLOCKS, ids=[f"README.md:{ln}" for _, ln in SH_BLOCKS])
def test_readme_cli_block(code, line, workdir):
    exe = _venv_bin() / "partplan"
    if not exe.exists():
        pytest.skip("the partplan console script is not installed next to this python")
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    env = dict(os.environ, PATH=f"{_venv_bin()}{os.pathsep}{os.environ.get('PATH', '')}", PARTPLAN_QUIET="1")
    r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + code], cwd=workdir, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"README.md:{line} failed\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"


# --------------------------------------------------------------------------- 2. history words
def _text_files(*tops: Path):
    for top in tops:
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        for p in paths:
            if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts \
                    and p.name != "CHANGELOG.md":
                yield p


def _offenders(*tops: Path) -> list[str]:
    out = []
    for p in _text_files(*tops):
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = HISTORY.search(line)
            if m:
                out.append(f"{p.relative_to(ROOT)}:{n}: {m.group(0)!r}")
    return out


def test_history_regex_matches_what_it_should():
    for bad in ("session 33", "Sessions 31-32", "v3.4", "(v3.6)", "planner v3", "Runtime v2", "issue 18",
                "#20 fixed (#20)", "item 4 of the issue", "this session's code"):
        assert HISTORY.search(bad), bad
    for fine in ("torch 2.13.0", "torch>=2.1,<3", "format version 2", "format_version", "mtkahypar==1.7.post1",
                 "numpy 1.26", "pyarrow 15.0", "partplan-plan", "a v-cycle", "issues: none", "rev2.3"):
        assert not HISTORY.search(fine), fine


def test_docs_speak_of_the_present():
    bad = _offenders(README, DOCS, ROOT / "examples" / "README.md")
    assert not bad, "history belongs in CHANGELOG.md; found:\n" + "\n".join(bad)


def test_code_speaks_of_the_present():
    tops = [p for p in (ROOT / "cli", ROOT / "partplan", ROOT / "benchmarks", ROOT / "examples") if p.exists()]
    bad = _offenders(*tops)
    files = sorted({b.split(":")[0] for b in bad})
    assert not bad, (f"history words in {len(bad)} lines of {len(files)} files (move the story to "
                     "CHANGELOG.md, keep the reason):\n" + "\n".join(bad))


# --------------------------------------------------------------------------- 3. page lengths
def test_page_lengths():
    n = len(README.read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES})"
    long = [f"{p.relative_to(ROOT)}: {len(p.read_text().splitlines())}"
            for p in sorted(DOCS.rglob("*.md")) if len(p.read_text().splitlines()) > PAGE_MAX_LINES]
    assert not long, f"doc pages over {PAGE_MAX_LINES} lines: {long}"


# --------------------------------------------------------------------------- 4. CLI reference
def _parser():
    try:
        from partplan.cli.main import build_parser, iter_parsers
    except ImportError:
        sys.path.insert(0, str(ROOT))
        from cli.main import build_parser, iter_parsers
    return list(iter_parsers(build_parser()))


def test_cli_reference_names_every_command_and_option():
    text = "".join((DOCS / "reference" / page).read_text() for page in ("cli.md", "cli-run.md"))
    missing = []
    for path, p in _parser():
        if path and f"`partplan {' '.join(path)}`" not in text:
            missing.append("command: partplan " + " ".join(path))
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction) or a.help == argparse.SUPPRESS:
                continue
            for opt in a.option_strings:
                if opt.startswith("--") and opt != "--help" and f"`{opt}`" not in text:
                    missing.append(f"partplan {' '.join(path)} {opt}".replace("  ", " "))
    assert not missing, ("docs/reference/cli.md or cli-run.md is stale (run python docs/reference/gen_cli.py); missing:\n"
                         + "\n".join(missing))


def test_options_reference_names_every_option():
    from partplan.partition.engines import REGISTRY, engine_schema
    from partplan.partition.schema import GROUPS
    text = (DOCS / "reference" / "options.md").read_text()
    names = {n for s in GROUPS.values() for n in s} | {n for e in REGISTRY for n in engine_schema(e)}
    missing = sorted(n for n in names if f"| `{n}` |" not in text)
    missing += sorted(e for e in REGISTRY if f"`{e}`" not in text)
    assert not missing, ("docs/reference/options.md is stale (run python docs/reference/gen_cli.py); "
                         f"missing: {missing}")


# --------------------------------------------------------------------------- 5. links
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_relative_links_resolve():
    broken = []
    for page in [README, *sorted(DOCS.rglob("*.md")), ROOT / "CHANGELOG.md", ROOT / "examples" / "README.md"]:
        if not page.exists():
            continue
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue
                path = target.split("#")[0]
                if path and not (page.parent / path).exists():
                    broken.append(f"{page.relative_to(ROOT)}:{n}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)
