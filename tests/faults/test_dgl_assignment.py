"""DGL assignment folders (partition_meta.json + <ntype>.txt) read a block at a time (issue #53).

Oracles: the ids the test writes (numpy), the line numbers it put the hostile tokens on, the peak
RSS (VmHWM) of a fresh interpreter that refuses a hostile text."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from partplan.errors import PartitionError
from partplan.io import foreign
from partplan.io.foreign import read_dgl_assignment, read_partition_any


def _folder(tmp_path, text: bytes, k=4, name="asg"):
    d = tmp_path / name
    d.mkdir()
    (d / "partition_meta.json").write_text(json.dumps({"num_parts": k}))
    (d / "_N.txt").write_bytes(text)
    return d


@pytest.mark.parametrize("block", [16, 61, 4 << 20])
def test_ids_across_blocks_equal_what_was_written(tmp_path, monkeypatch, block):
    monkeypatch.setattr(foreign, "_TEXT_BLOCK", block)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 4, 500)
    lines = []
    for i, v in enumerate(ids):
        if i % 37 == 0:
            lines.append("")            # blank lines
        if i % 53 == 0:
            lines.append("# comment")   # comment lines
        lines.append(str(v))
    d = _folder(tmp_path, ("\n".join(lines) + "\n").encode())
    assert np.array_equal(read_dgl_assignment(d), ids)
    assert np.array_equal(read_partition_any(d, ids.size), ids)
    no_newline = _folder(tmp_path, ("\n".join(map(str, ids))).encode(), name="nonl")
    assert np.array_equal(read_dgl_assignment(no_newline), ids)


@pytest.mark.parametrize("block", [16, 4 << 20])
def test_hostile_lines_are_one_error_naming_the_line(tmp_path, monkeypatch, block):
    monkeypatch.setattr(foreign, "_TEXT_BLOCK", block)
    good = [str(i % 4) for i in range(300)]
    cases = {
        "big": (good[:200] + ["9"] + good[200:], "line 201: part id 9 >= num_parts = 4 of partition_meta.json"),
        "word": (good[:250] + ["x1"] + good[250:], "line 251: part id 'x1' is not an integer"),
        "neg": (good[:10] + ["-3"] + good[10:], "line 11: negative part id -3"),
        "two": (good[:99] + ["1 2"] + good[99:], "line 100: expected one part id per line"),
        "huge": (good + ["9" * 30], "line 301: "),   # beyond 64 bits (or longer than a 16-byte block)
    }
    for name, (lines, want) in cases.items():
        d = _folder(tmp_path, ("\n".join(lines) + "\n").encode(), name=name)
        with pytest.raises(PartitionError) as exc:
            read_dgl_assignment(d)
        msg = str(exc.value)
        assert msg.startswith(f"{d / '_N.txt'}:") and want in msg and "\n" not in msg, (name, msg)
    d = _folder(tmp_path, ("\n".join(good) + "\n").encode(), name="count")
    with pytest.raises(PartitionError, match="has 300 part ids but the graph has 301 vertices"):
        read_partition_any(d, 301)
    with pytest.raises(PartitionError, match="has more than 299 part ids but the graph has 299 vertices"):
        read_partition_any(d, 299)
    empty = _folder(tmp_path, b"\n\n# nothing\n", name="empty")
    with pytest.raises(PartitionError, match="empty partition file"):
        read_dgl_assignment(empty)


def test_a_line_longer_than_a_block_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(foreign, "_TEXT_BLOCK", 64)
    d = _folder(tmp_path, b"0\n1\n" + b"1" * 200 + b"\n")
    with pytest.raises(PartitionError, match=r"_N\.txt:line 3: longer than 64 bytes"):
        read_dgl_assignment(d)


def test_the_budget_bounds_the_array_before_it_is_allocated(tmp_path, monkeypatch):
    d = _folder(tmp_path, b"0\n1\n" * 5000)
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "40000")   # 10 000 ids need 80 000 bytes
    with pytest.raises(PartitionError, match=r"_N\.txt: 10000 part ids needs at least 78\.1 KiB, above the "
                                              r"memory budget"):
        read_dgl_assignment(d)


_CHILD = r"""
import sys
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) << 10
from partplan.errors import PartplanError
from partplan.io.foreign import read_dgl_assignment
import pyarrow.csv  # noqa: F401  (imported before the baseline)
base = hwm()
try:
    read_dgl_assignment(sys.argv[1])
    print("accepted")
except PartplanError as e:
    print(str(e).replace("\n", " "))
print(hwm() - base)
"""


@pytest.mark.dist
@pytest.mark.slow
@pytest.mark.parametrize("tail", [b"7\n", b"x\n"])
def test_a_refusal_holds_a_block_not_the_file(tmp_path, tail):
    """96 MiB of valid ids, then a hostile last line: refused naming that line, the peak RSS above
    the interpreter's start within 2 x the file + 200 MiB (the whole-file reading needed ~10 x)."""
    d = tmp_path / "big"
    d.mkdir()
    (d / "partition_meta.json").write_text(json.dumps({"num_parts": 4}))
    unit = b"0\n1\n2\n3\n" * (1 << 17)   # 1 MiB, 524 288 ids
    with open(d / "_N.txt", "wb") as fh:
        for _ in range(96):
            fh.write(unit)
        fh.write(tail)
    size = (d / "_N.txt").stat().st_size
    r = subprocess.run([sys.executable, "-c", _CHILD, str(d)], capture_output=True, text=True, timeout=300)
    msg, grew = r.stdout.strip().splitlines()[-2:]
    assert f"_N.txt:line {96 * 524288 + 1}: part id" in msg, r.stdout + r.stderr
    assert int(grew) <= 2 * size + (200 << 20), (int(grew) >> 20, size >> 20)
