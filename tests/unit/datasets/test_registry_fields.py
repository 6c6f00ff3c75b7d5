"""The registry's entries name files in the cache: a registry from $PARTPLAN_DATASETS_DIR whose
names are paths, or whose counts and digests have the wrong type, is one DatasetError naming the
entry and field — before any name becomes a path (a name "../../x" wrote outside the cache)."""
from __future__ import annotations

import json
import re

import pytest

from partplan.datasets.registry import datasets_dir
from partplan.errors import DatasetError


def _registry_with(tmp_path, edit):
    reg = json.loads((datasets_dir() / "registry.json").read_text())
    e = next(x for x in reg["datasets"] if x["name"] == "power")
    edit(e)
    d = tmp_path / "ds"
    d.mkdir()
    (d / "registry.json").write_text(json.dumps(reg))
    return d


@pytest.mark.parametrize("edit,field", [
    (lambda e: e.__setitem__("name", "../../escape"), "'name'"),
    (lambda e: e.__setitem__("name", 5), "'name'"),
    (lambda e: e["source"].__setitem__("artifact", "../../../x.deb"), "'source.artifact'"),
    (lambda e: e.__setitem__("path", "usr/share/.."), "'path (its file name)'"),
    (lambda e: e.__setitem__("n", "lots"), "'n'"),
    (lambda e: e["source"].pop("type"), "'source'"),
    (lambda e: e["source"].__setitem__("artifact_size", -1), "'source.artifact_size'"),
    (lambda e: e.__setitem__("file_sha256", "abc"), "'file_sha256'"),
])
def test_a_registry_entry_that_names_a_path_or_lies_about_types_is_refused(tmp_path, monkeypatch, edit, field):
    from partplan.datasets import list_datasets
    from partplan.datasets.registry import registry

    monkeypatch.setenv("PARTPLAN_DATASETS_DIR", str(_registry_with(tmp_path, edit)))
    for call in (registry, lambda: list_datasets(tmp_path / "cache")):
        with pytest.raises(DatasetError, match=f"entry [0-9]+ field {re.escape(field)}"):
            call()
    assert not (tmp_path / "cache").exists()


def test_the_shipped_registry_passes_its_own_checks():
    from partplan.datasets.registry import registry
    assert len(registry()["datasets"]) >= 10


def test_a_cached_artifact_of_the_wrong_size_is_not_hashed(tmp_path, monkeypatch):
    """The artifact's recorded size is compared first (a stat): a cached file of another size (a
    huge one took a minute per 20 GB to hash) goes straight to the download."""
    import importlib

    from partplan.datasets.registry import entry
    fetch = importlib.import_module("partplan.datasets.fetch")    # (the package's `fetch` is a function)

    src = entry("power")["source"]
    art = tmp_path / "artifacts" / src["artifact"]
    art.parent.mkdir(parents=True)
    with open(art, "wb") as fh:
        fh.truncate(src["artifact_size"] + 1)          # sparse: one byte too many
    hashed = []
    real = fetch.sha256_file
    monkeypatch.setattr(fetch, "sha256_file", lambda p: hashed.append(p) or real(p))

    def offline(*a, **kw):
        raise OSError("offline")

    monkeypatch.setattr(fetch, "_download_url", offline)
    monkeypatch.setattr(fetch.shutil, "which", lambda name: None)
    monkeypatch.setattr(fetch, "_pip_download", offline)
    with pytest.raises((DatasetError, OSError)):
        fetch.fetch_artifact(src, tmp_path, progress=False)
    assert art not in hashed
