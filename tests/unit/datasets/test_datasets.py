"""Dataset registry, embedded graphs, fetch (offline with a hand-built .deb
served from a file:// URL; one real download marked slow), errors, CLI."""
import gzip
import hashlib
import io
import json
import re
import os
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from partplan import datasets as ds
from partplan.cli.main import main as cli_main
from partplan.errors import DatasetError
from partplan.datasets import registry as reg

REPO_DATASETS = Path(__file__).resolve().parents[3] / "datasets"

# Independent figures from /work/shared/notes/datasets.md (counted there by
# loading the files): n, m (undirected edges, no loops/duplicates) or, for
# hypergraphs, n, nets, pins.
EXPECTED = {
    "mdual": (258_569, 513_132, None),
    "copter2": (55_476, 352_238, None),
    "email-Enron": (36_692, 183_831, None),
    "as-22july06": (22_963, 48_436, None),
    "astro-ph": (16_706, 121_251, None),
    "cond-mat-2003": (31_163, 120_029, None),
    "power": (4_941, 6_594, None),
    "delaunay_n15": (32_768, 98_274, None),
    "rgg_n_2_15_s0": (32_768, 160_240, None),
    "ibm01": (12_752, 14_111, 50_566),
    "powersim": (15_838, 15_838, 67_562),
    "sat14_atco_enc1_opt2_10_16": (9_643, 152_744, 641_139),
}


def is_sha256(s):
    return isinstance(s, str) and len(s) == 64 and all(c in "0123456789abcdef" for c in s)


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------ registry
def test_registry_entries_complete():
    raw = json.loads((REPO_DATASETS / "registry.json").read_text())
    entries = raw["datasets"]
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names))
    assert set(EXPECTED) <= set(names)
    for e in entries:
        for f in reg.REQUIRED_FIELDS:
            assert f in e, (e["name"], f)
        for f in reg.SOURCE_FIELDS:
            assert f in e["source"], (e["name"], f)
        s = e["source"]
        assert is_sha256(e["file_sha256"]) and is_sha256(s["artifact_sha256"]), e["name"]
        assert s["type"] in ("debian-binary", "pypi-sdist")
        assert e["kind"] in ("graph", "hypergraph")
        assert (e["pins"] is None) == (e["kind"] == "graph")
        assert isinstance(e["n"], int) and isinstance(e["m"], int) and e["n"] > 0 and e["m"] > 0
        assert e["file_size"] > 0 and s["artifact_size"] > 0
        assert s["url"].startswith("https://") and s["url"].endswith("/" + s["artifact"])
        assert s["package"] in s["artifact"] and s["version"] in s["artifact"]
        if s["type"] == "pypi-sdist":
            assert s["artifact"] == f"{s['package']}-{s['version']}.tar.gz"
            assert not e["path"].startswith("/") and ".." not in e["path"].split("/")   # inside the tarball
        else:
            assert s["artifact"].endswith(".deb") and not e["path"].startswith("/")
        assert e["license"] and e["citation"] and e["format"] in ("metis", "gt", "hgr", "edgelist")
        if e["embedded"]:
            assert is_sha256(e["embedded"]["sha256"]) and e["embedded"]["compression"] in ("none", "gzip")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_registry_counts_match_notes(name):
    e = ds.info(name)
    n, m, pins = EXPECTED[name]
    assert (e["n"], e["m"], e["pins"]) == (n, m, pins)


def test_required_sources_and_versions():
    src = {e["name"]: e["source"] for e in reg.registry()["datasets"]}
    assert src["mdual"]["package"] == src["copter2"]["package"] == "libmetis-doc"
    assert src["mdual"]["version"] == "5.1.0.dfsg-7"
    assert {src[k]["package"] for k in ("email-Enron", "as-22july06", "astro-ph", "cond-mat-2003")} == \
        {"python3-graph-tool"}
    assert src["delaunay_n15"]["package"] == "kahip" and src["delaunay_n15"]["version"] == "3.25"
    assert src["ibm01"]["package"] == "mtkahypar" and src["powersim"]["version"] == "1.7.post1"


# ------------------------------------------------------------------ embedded
def test_embedded_files_match_recorded_sha256_and_size_budget():
    emb = ds.embedded()
    assert "email-Enron" in emb
    total = 0
    for nm in emb:
        e = ds.info(nm)
        p = REPO_DATASETS / e["embedded"]["file"]
        assert sha256(p) == e["embedded"]["sha256"]
        total += p.stat().st_size
        # the embedded bytes are the artifact's file (uncompressed if we gzipped it)
        raw = p.read_bytes()
        if e["embedded"]["compression"] == "gzip":
            raw = gzip.decompress(raw)
        assert hashlib.sha256(raw).hexdigest() == e["file_sha256"]
        assert len(raw) == e["file_size"]
    assert total <= 2 * 2 ** 20


def test_embedded_provenance_documented():
    text = (REPO_DATASETS / "README.md").read_text()
    for nm in ds.embedded():
        e = ds.info(nm)
        for needle in (e["embedded"]["file"], e["source"]["package"], e["source"]["version"],
                       e["path"], e["file_sha256"], e["embedded"]["sha256"]):
            assert needle in text, (nm, needle)


def test_load_email_enron_embedded_no_download(tmp_path, monkeypatch):
    monkeypatch.setenv("PARTPLAN_DATA", str(tmp_path / "empty-cache"))
    g = ds.load("email-Enron")
    assert (g.n, g.nnz // 2) == (36_692, 183_831)
    assert g.is_symmetric() and not g.has_self_loops() and not g.directed
    assert g.name == "email-Enron"
    assert not (tmp_path / "empty-cache").exists()


def _parse_metis_plain(text):
    """Oracle: METIS .graph adjacency with plain Python."""
    lines = [ln for ln in text.splitlines() if not ln.startswith("%")]
    n = int(lines[0].split()[0])
    edges = set()
    for u, ln in enumerate(lines[1:n + 1]):
        for tok in ln.split():
            v = int(tok) - 1
            if v != u:
                edges.add((min(u, v), max(u, v)))
    return n, edges


def test_load_delaunay_embedded_matches_plain_parse():
    g = ds.load("delaunay_n15")
    n, edges = _parse_metis_plain(gzip.decompress((REPO_DATASETS / "delaunay_n15.graph.gz").read_bytes()).decode())
    assert g.n == n == 32_768 and g.nnz // 2 == len(edges) == 98_274
    rows = np.repeat(np.arange(g.n), g.row_nnz)
    upper = g.indices > rows
    assert set(zip(rows[upper].tolist(), g.indices[upper].tolist())) == edges
    assert g.row_nnz.max() == 18  # max degree from the notes


def test_corrupt_embedded_file_is_rejected(tmp_path, monkeypatch):
    d = tmp_path / "datasets"
    shutil.copytree(REPO_DATASETS, d)
    blob = bytearray((d / "email-Enron.gt.gz").read_bytes())
    blob[100] ^= 0xFF
    (d / "email-Enron.gt.gz").write_bytes(bytes(blob))
    monkeypatch.setenv("PARTPLAN_DATASETS_DIR", str(d))
    with pytest.raises(DatasetError, match="sha256"):
        ds.load("email-Enron")
    # `datasets list` said "embedded" from the registry alone; the copy is checked now
    rows = {r["name"]: r for r in ds.list_datasets()}
    assert rows["email-Enron"]["embedded"] and not rows["email-Enron"]["embedded_ok"]
    assert rows["polblogs"]["embedded_ok"]
    # `info` refused with the sha256 error; it shows the registry's record and why the copy is not used
    e = ds.info("email-Enron")
    assert e["local"] is None and "sha256" in e["local_problem"] and e["license"] and e["source"]["package"]


def test_a_damaged_download_is_named_as_such(fake_registry, capsys):
    """A cached download whose bytes changed read as "not in the cache" (and `list` showed "-"):
    it is named, with the fetch that replaces it, in load, info and list."""
    entry, _, cache = fake_registry
    ds.fetch("tiny")
    f = cache / "tiny" / "tiny.graph"
    f.write_bytes(f.read_bytes()[:-1] + b"9")
    with pytest.raises(DatasetError, match=r"size or sha256 differs .*datasets fetch tiny"):
        ds.load("tiny")
    assert "sha256" in ds.info("tiny")["local_problem"]
    row = ds.list_datasets()[0]
    assert not row["cached"] and row["cache_damaged"]
    assert cli_main(["datasets", "list"]) == 0
    assert re.search(r"^tiny .* corrupt ", capsys.readouterr().out, re.M)
    ds.fetch("tiny")                      # fetched again: verified
    assert ds.info("tiny")["local_problem"] is None and ds.list_datasets()[0]["cached"]


def test_fetch_json_names_each_dataset_once_as_the_registry_spells_it(capsys):
    """``fetch POWER Power email-enron --json`` keyed its output by the names as typed (power twice)."""
    import json

    from partplan.cli.main import main
    capsys.readouterr()
    assert main(["datasets", "fetch", "email-enron", "EMAIL-ENRON", "polblogs", "--json", "-q"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["email-Enron", "polblogs"]


def test_force_alone_returns_an_embedded_dataset_without_a_download(tmp_path, monkeypatch):
    """``fetch polblogs --force`` downloaded a 43 MB package although polblogs is embedded: only
    --from-source downloads an embedded dataset."""
    import importlib
    F = importlib.import_module("partplan.datasets.fetch")      # the module (the package exports the function)

    def no_download(*a, **k):
        raise AssertionError("downloaded")
    monkeypatch.setattr(F, "fetch_artifact", no_download)
    assert F.fetch("polblogs", tmp_path, force=True) == ds.embedded_path("polblogs")
    with pytest.raises(AssertionError, match="downloaded"):
        F.fetch("polblogs", tmp_path, from_source=True)


# ------------------------------------------------------------------ errors
def test_unknown_name_lists_choices():
    with pytest.raises(DatasetError) as ei:
        ds.load("no-such-graph")
    msg = str(ei.value)
    assert "no-such-graph" in msg and "email-Enron" in msg and "mdual" in msg
    with pytest.raises(DatasetError, match="did you mean email-Enron"):
        ds.info("email-enronn")


def test_case_insensitive_name():
    assert ds.info("EMAIL-enron")["name"] == "email-Enron"


def test_not_cached_without_fetch(tmp_path):
    with pytest.raises(DatasetError, match="partplan datasets fetch mdual"):
        ds.load("mdual", cache_dir=tmp_path)


def test_load_hypergraph_of_graph_dataset():
    with pytest.raises(DatasetError, match="column_net"):
        ds.load_hypergraph("email-Enron")


def test_load_graph_of_hypergraph_dataset(tmp_path):
    with pytest.raises(DatasetError, match="ibm01.*is a hypergraph.*load_hypergraph"):
        ds.load_graph("ibm01", cache_dir=tmp_path)
    assert ds.load_graph("email-Enron").n == 36_692


# ------------------------------------------------- fetch, offline (file:// URL)
TINY = b"% path 1-2-3\n3 2\n2\n1 3\n2\n"


def make_deb(path, files):
    """A minimal Debian binary package: ar archive with debian-binary,
    control.tar.xz and data.tar.xz (built here with tarfile, independent of
    the code under test)."""
    def tar_xz(entries):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:xz") as tf:
            for name, content in entries.items():
                ti = tarfile.TarInfo("./" + name)
                ti.size = len(content)
                tf.addfile(ti, io.BytesIO(content))
        return buf.getvalue()

    members = [("debian-binary", b"2.0\n"),
               ("control.tar.xz", tar_xz({"control": b"Package: fake\nVersion: 1.0\nArchitecture: all\n"})),
               ("data.tar.xz", tar_xz(files))]
    with open(path, "wb") as fh:
        fh.write(b"!<arch>\n")
        for name, blob in members:
            fh.write(f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(blob):<10}`\n".encode())
            fh.write(blob)
            if len(blob) % 2:
                fh.write(b"\n")


@pytest.fixture
def fake_registry(tmp_path, monkeypatch):
    """A datasets dir whose one entry ships in a local .deb reached by file:// URL."""
    deb = tmp_path / "srv" / "fake-graphs_1.0_all.deb"
    deb.parent.mkdir()
    make_deb(deb, {"usr/share/fake/tiny.graph": TINY, "usr/share/fake/other.txt": b"x" * 999})
    if shutil.which("dpkg-deb"):  # the hand-built package is a valid .deb
        out = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
        assert b"tiny.graph" in out
    entry = {
        "name": "tiny", "kind": "graph", "domain": "test", "n": 3, "m": 2, "pins": None,
        "source": {"type": "debian-binary", "package": "fake-graphs", "version": "1.0", "architecture": "all",
                   "distribution": "test", "artifact": deb.name, "artifact_sha256": sha256(deb),
                   "artifact_size": deb.stat().st_size, "url": deb.as_uri()},
        "path": "usr/share/fake/tiny.graph", "format": "metis",
        "file_sha256": hashlib.sha256(TINY).hexdigest(), "file_size": len(TINY),
        "license": "CC0", "citation": "-", "notes": "-", "embedded": None}
    d = tmp_path / "datasets"
    d.mkdir()
    bump = [10 ** 18]

    def write(e):
        (d / "registry.json").write_text(json.dumps({"schema_version": 1, "datasets": [e]}))
        bump[0] += 10 ** 9  # a distinct mtime for each version (the registry is cached by mtime)
        os.utime(d / "registry.json", ns=(bump[0], bump[0]))

    write(entry)
    monkeypatch.setenv("PARTPLAN_DATASETS_DIR", str(d))
    monkeypatch.setenv("PARTPLAN_DATA", str(tmp_path / "cache"))
    return entry, write, tmp_path / "cache"


def test_fetch_extracts_and_verifies(fake_registry):
    entry, _, cache = fake_registry
    p = ds.fetch("tiny", progress=False)
    assert p == cache / "tiny" / "tiny.graph"
    assert p.read_bytes() == TINY
    assert sha256(cache / "artifacts" / entry["source"]["artifact"]) == entry["source"]["artifact_sha256"]
    assert [x.name for x in cache.iterdir() if x.name.startswith(".")] == []  # no temp leftovers
    g = ds.load("tiny")
    assert (g.n, g.nnz) == (3, 4) and g.indices.tolist() == [1, 0, 2, 1]
    assert ds.list_datasets()[0]["cached"] is True


def test_fetch_rejects_wrong_artifact_sha(fake_registry):
    entry, write, cache = fake_registry
    entry["source"]["artifact_sha256"] = "0" * 64
    write(entry)
    with pytest.raises(DatasetError, match="sha256 mismatch"):
        ds.fetch("tiny", progress=False)
    assert not (cache / "artifacts" / entry["source"]["artifact"]).exists()
    assert not (cache / "tiny" / "tiny.graph").exists()


def test_fetch_rejects_wrong_file_sha(fake_registry):
    entry, write, cache = fake_registry
    entry["file_sha256"] = "f" * 64
    write(entry)
    with pytest.raises(DatasetError, match="tiny.graph.*sha256 mismatch"):
        ds.fetch("tiny", progress=False)
    assert not (cache / "tiny" / "tiny.graph").exists()
    assert list((cache / "tiny").iterdir()) == []


def test_fetch_missing_member(fake_registry):
    entry, write, _ = fake_registry
    entry["path"] = "usr/share/fake/absent.graph"
    write(entry)
    with pytest.raises(DatasetError, match="has no file usr/share/fake/absent.graph"):
        ds.fetch("tiny", progress=False)


def test_tampered_cache_is_fetched_again(fake_registry):
    _, _, cache = fake_registry
    p = ds.fetch("tiny", progress=False)
    p.write_bytes(b"3 0\n\n\n\n")
    assert ds.local_path("tiny") is None
    assert ds.fetch("tiny", progress=False).read_bytes() == TINY


def test_loaded_counts_checked_against_registry(fake_registry):
    entry, write, _ = fake_registry
    entry["m"] = 3
    write(entry)
    ds.fetch("tiny", progress=False)
    with pytest.raises(DatasetError, match="registry records n=3, m=3"):
        ds.load("tiny")


def test_unreachable_url_is_a_dataset_error(fake_registry, monkeypatch):
    entry, write, _ = fake_registry
    entry["source"]["url"] = (Path(entry["source"]["url"][7:]).parent / "gone.deb").as_uri()
    write(entry)
    monkeypatch.setattr(shutil, "which", lambda name: None)  # no apt-get fallback here
    with pytest.raises(DatasetError, match="cannot download"):
        ds.fetch("tiny", progress=False)


def test_extract_member_from_sdist_tarball(tmp_path):
    from partplan.datasets.fetch import extract_member

    tgz = tmp_path / "fakepkg-1.0.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        for name, blob in (("fakepkg-1.0/setup.py", b"pass\n"), ("fakepkg-1.0/examples/tiny.graph", TINY)):
            ti = tarfile.TarInfo(name)
            ti.size = len(blob)
            tf.addfile(ti, io.BytesIO(blob))
        link = tarfile.TarInfo("fakepkg-1.0/examples/link.graph")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
    dest = tmp_path / "out" / "t.graph"
    dest.parent.mkdir()
    extract_member(tgz, "pypi-sdist", "fakepkg-1.0/examples/tiny.graph", dest, hashlib.sha256(TINY).hexdigest())
    assert dest.read_bytes() == TINY
    with pytest.raises(DatasetError, match="not a regular file"):
        extract_member(tgz, "pypi-sdist", "fakepkg-1.0/examples/link.graph", tmp_path / "out" / "l", "0" * 64)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["t.graph"]


# ------------------------------------------------------------ real download
def _online(url="https://deb.debian.org/debian/"):
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5)
        return True
    except Exception:
        return False


@pytest.mark.slow
def test_fetch_real_debian_artifact(tmp_path):
    if not _online():
        pytest.skip("deb.debian.org is not reachable (no network)")
    p = ds.fetch("copter2", tmp_path, progress=False)
    e = ds.info("copter2", tmp_path)
    assert sha256(p) == e["file_sha256"] and e["local"] == str(p)
    assert sha256(tmp_path / "artifacts" / "libmetis-doc_5.1.0.dfsg-7_all.deb") == \
        "1a1ec91160520e1fa16f82fa62e195811b5afc6521a17b3e6ebad9e560c45c5c"
    g = ds.load("copter2", cache_dir=tmp_path)
    assert (g.n, g.nnz // 2) == EXPECTED["copter2"][:2]


@pytest.mark.slow
@pytest.mark.dist   # pip download
def test_fetch_real_pypi_sdist(tmp_path):
    if not _online("https://pypi.org/simple/mtkahypar/"):
        pytest.skip("pypi.org is not reachable (no network)")
    h = ds.load_hypergraph("ibm01", fetch=True, cache_dir=tmp_path)
    assert (h.n, h.m, h.num_pins) == EXPECTED["ibm01"]
    assert sha256(tmp_path / "artifacts" / "mtkahypar-1.7.post1.tar.gz") == \
        "56ec927936e7e1e63ed3acaaafc12f3e4cb4bf0676dfc8ddc10651cae897065a"


# ------------------------------------------------------------------------ CLI
def test_cli_list_and_info_json(capsys):
    assert cli_main(["datasets", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} >= set(EXPECTED)
    assert next(r for r in rows if r["name"] == "email-Enron")["embedded"] is True
    assert cli_main(["datasets", "info", "ibm01", "--json"]) == 0
    e = json.loads(capsys.readouterr().out)
    assert e["pins"] == 50_566 and e["source"]["package"] == "mtkahypar"


def test_cli_errors(capsys):
    assert cli_main(["datasets", "info", "nope"]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    assert cli_main(["datasets", "fetch"]) == 2
    assert cli_main(["datasets", "generate", "rmat", "-o", "x.mtx"]) == 2
    assert "--scale" in capsys.readouterr().err


def test_cli_fetch_embedded_json(capsys):
    assert cli_main(["datasets", "fetch", "email-Enron", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert Path(out["email-Enron"]) == REPO_DATASETS / "email-Enron.gt.gz"


def test_cli_generate_rmat_roundtrip(tmp_path, capsys):
    from partplan.io import read_graph

    out = tmp_path / "r.mtx"
    assert cli_main(["datasets", "generate", "rmat", "--scale", "8", "--seed", "3", "-o", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    g = read_graph(out)
    want = ds.rmat(8, seed=3)
    assert g.n == want.n == res["n"] and np.array_equal(g.indices, want.indices)
    assert np.array_equal(g.indptr, want.indptr) and res["fingerprint"] == want.fingerprint


def test_cli_generate_grid(tmp_path, capsys):
    from partplan.io import read_graph

    out = tmp_path / "g.graph"
    assert cli_main(["datasets", "generate", "grid3d", "--nx", "3", "--ny", "4", "--nz", "5", "-o", str(out)]) == 0
    g = read_graph(out)
    assert g.n == 60 and g.nnz // 2 == 2 * 4 * 5 + 3 * 3 * 5 + 3 * 4 * 4


def test_cli_fetch_offline_into_cache_dir(fake_registry, tmp_path, capsys):
    other = tmp_path / "other-cache"
    assert cli_main(["datasets", "fetch", "--all", "--cache", str(other), "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert Path(out["tiny"]) == other / "tiny" / "tiny.graph" and Path(out["tiny"]).read_bytes() == TINY
    assert cli_main(["datasets", "list", "--cache", str(other), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["cached"] is True
    assert cli_main(["datasets", "fetch", "tiny", "--all"]) == 2


def test_pips_progress_lines_go_to_stderr(tmp_path, monkeypatch):
    """With progress on, pip's own lines ("Looking in indexes ...") went to stdout, where
    `datasets fetch --json` prints its JSON."""
    import importlib
    import subprocess
    import sys

    F = importlib.import_module("partplan.datasets.fetch")     # the module (the package exports a function)
    seen = {}

    def fake_run(cmd, **kw):
        seen.update(kw)
        return subprocess.CompletedProcess(cmd, 1, "", "no network")
    monkeypatch.setattr(F.subprocess, "run", fake_run)
    with pytest.raises(DatasetError, match="pip download"):
        F._pip_download({"package": "x", "version": "1", "artifact": "x.tar.gz"}, tmp_path, True)
    assert seen["stdout"] is sys.stderr
