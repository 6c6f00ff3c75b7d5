"""The bounded JSON reader (partplan.io.jsonfile) and the readers that use it (issue #53).

Oracles: the standard library's json.loads on the same text for what is accepted; the file kinds
made here with os.mkfifo / mkdir / a sparse file; resource.getrusage in a fresh interpreter for
"refused before reading"."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from partplan.errors import DatasetError, PartitionError, PartplanError
from partplan.io.jsonfile import read_json


def test_valid_json_is_what_the_standard_library_reads(tmp_path):
    doc = {"a": [1, 2, {"b": "é\u2603", "c": -3.5e-7}], "n": 2 ** 62, "t": True, "z": None}
    f = tmp_path / "ok.json"
    f.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    assert read_json(f, max_bytes=1 << 20, what="test file") == json.loads(f.read_text(encoding="utf-8")) == doc


@pytest.mark.parametrize("kind", ["fifo", "dir", "missing", "link-to-fifo"])
def test_what_is_no_regular_file_is_one_error_without_blocking(kind, tmp_path, alarm):
    f = tmp_path / "x.json"
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "dir":
        f.mkdir()
    elif kind == "link-to-fifo":
        os.mkfifo(tmp_path / "fifo")
        f.symlink_to(tmp_path / "fifo")
    with pytest.raises(PartitionError) as exc:
        read_json(f, max_bytes=1 << 20, what="partition config", error=PartitionError)
    msg = str(exc.value)
    assert msg.startswith(f"{f}: partition config: ") and "\n" not in msg
    assert {"fifo": "FIFO", "dir": "directory", "missing": "not found", "link-to-fifo": "FIFO"}[kind] in msg


def test_a_link_is_refused_when_not_followed(tmp_path):
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "l.json").symlink_to(tmp_path / "real.json")
    assert read_json(tmp_path / "l.json", max_bytes=99, what="x") == {}
    with pytest.raises(PartplanError, match="symbolic link"):
        read_json(tmp_path / "l.json", max_bytes=99, what="x", follow=False)


@pytest.mark.dist
def test_size_is_checked_before_reading(tmp_path):
    """A 4 GiB sparse file against a 1 MiB limit, and against PARTPLAN_MAX_BYTES, in a fresh
    interpreter: refused, and its peak RSS grows far less than the file's size (nothing was read)."""
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(4 << 30)
    code = (
        "import sys\n"
        "def hwm():   # VmHWM: this process's peak RSS in KiB (ru_maxrss would carry the parent's over exec)\n"
        "    return int(next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')).split()[1])\n"
        "from partplan.io.jsonfile import read_json\n"
        "from partplan.errors import PartplanError\n"
        "before = hwm()\n"
        "try:\n"
        "    read_json(sys.argv[1], max_bytes=int(sys.argv[2]), what='big file')\n"
        "except PartplanError as e:\n"
        "    print(e)\n"
        "print(hwm() - before)\n")
    for limit, env in [(1 << 20, {}), (1 << 40, {"PARTPLAN_MAX_BYTES": "64M"})]:
        r = subprocess.run([sys.executable, "-c", code, str(big), str(limit)], capture_output=True, text=True,
                           env={**os.environ, **env}, timeout=120)
        msg, rss_kib = r.stdout.strip().splitlines()
        assert msg.startswith(f"{big}: big file: 4294967296 bytes") and "more than the" in msg, msg
        assert int(rss_kib) < 64 << 10, rss_kib         # peak grew < 64 MiB: the 4 GiB were never read


def test_bad_text_is_one_error_naming_the_file(tmp_path):
    cases = {
        "latin1.json": ("{\"a\": \"caf\xe9\"}".encode("latin-1"), "not UTF-8 text (byte 10"),
        "utf16.json": (json.dumps({"a": 1}).encode("utf-16"), "not UTF-8 text"),
        "deep.json": (b"[" * 100_000 + b"]" * 100_000, "nested 100000 levels deep"),
        "int.json": (b'{"n": ' + b"9" * 5000 + b"}", "an integer of 5000 digits"),
        "nan.json": (b'{"n": NaN}', "NaN is not a JSON number"),
        "broken.json": (b'{"n": ', "not valid JSON"),
    }
    for name, (raw, want) in cases.items():
        f = tmp_path / name
        f.write_bytes(raw)
        with pytest.raises(PartplanError) as exc:
            read_json(f, max_bytes=1 << 20, what="test file")
        msg = str(exc.value)
        assert msg.startswith(f"{f}: test file") and want in msg and "\n" not in msg, (name, msg)


def test_a_hostile_file_name_is_shown_escaped(tmp_path):
    f = tmp_path / "evil\x1b[31m\n.json"
    f.write_bytes(b"[" * 200)
    with pytest.raises(PartplanError) as exc:
        read_json(f, max_bytes=1 << 20, what="test file")
    msg = str(exc.value)
    assert "\x1b" not in msg and "\n" not in msg and "\\x1b[31m\\n.json" in msg


def test_readers_that_use_it(tmp_path, monkeypatch):
    """A partition's sidecar, a DGL partition config and the dataset registry: hostile JSON is one
    error of the reader's own type naming the file."""
    from partplan.datasets import registry
    from partplan.io.foreign import _read_json
    from partplan.plan.partitions import saved_partition_meta
    part = tmp_path / "g.part.npy"
    np.save(part, np.zeros(4, dtype=np.int64))
    side = tmp_path / "g.part.npy.json"
    side.write_bytes(b'{"n": 4, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}")
    with pytest.raises(PartitionError, match=r"g\.part\.npy\.json: partition sidecar: JSON nested 5001 levels"):
        saved_partition_meta(part)
    with open(side, "wb") as fh:
        fh.truncate(1 << 30)
    with pytest.raises(PartitionError, match=r"g\.part\.npy\.json: partition sidecar: 1073741824 bytes"):
        saved_partition_meta(part)
    side.write_text('{"n": 4, "model": "graph"}')
    assert saved_partition_meta(part)["n"] == 4
    cfg = tmp_path / "dgl.json"
    os.mkfifo(cfg)
    with pytest.raises(PartitionError, match=r"dgl\.json: partition config: is a FIFO"):
        _read_json(cfg)
    reg = tmp_path / "registry.json"
    reg.write_bytes(b"\xff\xfe{}")
    with pytest.raises(DatasetError, match=r"registry\.json: dataset registry: not UTF-8 text \(byte 0"):
        registry._load_registry(str(reg), 0, 3)


@pytest.mark.dist
@pytest.mark.slow
def test_worker_config_is_bounded(tmp_path):
    from partplan.runtime.worker import main
    os.mkfifo(tmp_path / "cfg.json")
    r = subprocess.run([sys.executable, "-m", "partplan.runtime.worker", str(tmp_path / "cfg.json")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"partplan: error: {tmp_path / 'cfg.json'}: worker config: is a FIFO")
    assert main([]) == 2


def test_nesting_depth_across_blocks_equals_a_recursive_walk(monkeypatch):
    """json_depth sums a block at a time: its depth equals the parsed value's own (brackets inside
    strings ignored, quotes escaped by runs of backslashes that cross a block's end), whatever the
    block size."""
    import random

    from partplan import _files

    def depth(o):
        if isinstance(o, (list, dict)):
            return 1 + max((depth(x) for x in (o.values() if isinstance(o, dict) else o)), default=0)
        return 0

    rng = random.Random(53)

    def gen(d):
        if d > 7 or rng.random() < 0.3:
            return rng.choice([1, "a[{", None, '}]"x', -2.5, "\\", '\\"]', "\\\\[", "x\\\\\\\"{"])
        if rng.random() < 0.5:
            return [gen(d + 1) for _ in range(rng.randint(0, 3))]
        return {f"k{i}[": gen(d + 1) for i in range(rng.randint(0, 3))}

    for block in (1, 2, 3, 5, 64, 1 << 22):
        monkeypatch.setattr(_files, "_DEPTH_BLOCK", block)
        monkeypatch.setattr(_files, "_ESCAPED_BLOCK", block)
        for _ in range(200):
            text = json.dumps(gen(0)).encode()
            assert _files.json_depth(text) == depth(json.loads(text)), (block, text)


def test_the_depth_of_a_long_string_of_escapes_takes_bounded_memory():
    """A regex over the strings kept state per character of a string: a 40 MB string in a
    manifest took 4.9 GB. The count now takes a bounded amount whatever the string's length."""
    import tracemalloc

    from partplan import _files
    for body in (b"x" * 8_000_000, b"\\n" * 4_000_000):
        raw = b'{"a": "' + body + b'", "b": [[1, "]"]]}'
        tracemalloc.start()
        try:
            assert _files.json_depth(raw) == 3
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 128 << 20, peak


@pytest.mark.dist
@pytest.mark.slow
def test_a_large_json_refusal_stays_within_twice_the_file(tmp_path):
    """A 150 MiB JSON text refused at its end (a NaN after 150 MiB of whitespace and an array): the
    peak RSS above the interpreter's start is at most 2 x the file + 200 MiB (the depth count took
    ~20 x the file before it went by blocks)."""
    f = tmp_path / "big.json"
    with open(f, "wb") as fh:
        fh.write(b"[" + b" " * (150 << 20) + b"NaN]")
    code = ("import sys\n"
            "def hwm():\n"
            "    return int(next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')).split()[1])\n"
            "from partplan.io.jsonfile import read_json\n"
            "from partplan.errors import PartplanError\n"
            "before = hwm()\n"
            "try:\n"
            "    read_json(sys.argv[1], max_bytes=1 << 30, what='big file')\n"
            "except PartplanError as e:\n"
            "    print(e)\n"
            "print(hwm() - before)\n")
    r = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, text=True, timeout=300)
    msg, grew_kib = r.stdout.strip().splitlines()
    assert msg.startswith(f"{f}: big file: outside partplan's JSON limits: NaN is not a JSON number"), msg
    assert int(grew_kib) << 10 <= 2 * f.stat().st_size + (200 << 20), int(grew_kib) >> 10
