"""graph-tool property maps: a file written byte by byte from the documented
format (graph-tool, "The gt file format"), the real polblogs labels against the
counts in Adamic & Glance (2005), and malformed property sections."""
import gzip
import struct

import numpy as np
import pytest

from partplan.errors import GraphFormatError
from partplan.io import read_gt, read_gt_properties
from partplan.datasets import embedded_path


def _s(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def _gt(props: bytes, nprops: int) -> bytes:
    # 3 vertices, directed: 0->1, 0->2, 2->1 ; ids 1 byte wide (N < 256)
    head = b"\xe2\x9b\xbe gt" + bytes([1, 0]) + _s(b"hand made") + bytes([1]) + struct.pack("<Q", 3)
    adj = struct.pack("<Q", 2) + bytes([1, 2]) + struct.pack("<Q", 0) + struct.pack("<Q", 1) + bytes([1])
    return head + adj + struct.pack("<Q", nprops) + props


def test_hand_made_file_every_kind(tmp_path):
    props = (bytes([0]) + _s(b"title") + bytes([6]) + _s(b"toy")                       # graph string
             + bytes([1]) + _s(b"club") + bytes([2]) + struct.pack("<3i", 7, -1, 3)    # vertex int32
             + bytes([1]) + _s(b"ok") + bytes([0]) + bytes([1, 0, 1])                  # vertex bool
             + bytes([1]) + _s(b"pos") + bytes([11])                                   # vertex vector<double>
             + struct.pack("<Q2d", 2, 1.5, 2.5) + struct.pack("<Q", 0) + struct.pack("<Q1d", 1, -4.0)
             + bytes([2]) + _s(b"w") + bytes([4]) + struct.pack("<3d", 0.5, 1.0, 2.0))  # edge double
    f = tmp_path / "toy.gt"
    f.write_bytes(_gt(props, 5))
    pr = read_gt_properties(f)
    assert pr["graph"] == {"title": "toy"}
    assert pr["vertex"]["club"].tolist() == [7, -1, 3]
    assert pr["vertex"]["ok"].tolist() == [True, False, True]
    assert [a.tolist() for a in pr["vertex"]["pos"]] == [[1.5, 2.5], [], [-4.0]]
    assert pr["edge"]["w"].tolist() == [0.5, 1.0, 2.0]
    assert read_gt(f).nnz == 3  # the structure reader still skips the properties


def test_gzip_and_big_endian(tmp_path):
    head = b"\xe2\x9b\xbe gt" + bytes([1, 1]) + struct.pack(">Q", 0) + bytes([0]) + struct.pack(">Q", 2)
    adj = struct.pack(">Q", 1) + bytes([1]) + struct.pack(">Q", 0)
    props = struct.pack(">Q", 1) + bytes([1]) + struct.pack(">Q", 1) + b"v" + bytes([1]) + struct.pack(">2h", -2, 300)
    f = tmp_path / "be.gt.gz"
    f.write_bytes(gzip.compress(head + adj + props))
    assert read_gt_properties(f)["vertex"]["v"].tolist() == [-2, 300]


@pytest.mark.parametrize("props,nprops,msg", [
    (bytes([1]) + _s(b"club") + bytes([2]) + struct.pack("<2i", 1, 2), 1, "truncated"),   # 2 of 3 values
    (bytes([5]) + _s(b"x") + bytes([2]), 1, "key type"),
    (bytes([1]) + _s(b"x") + bytes([42]), 1, "value type"),
    (bytes([1]) + _s(b"x") + bytes([5]), 1, "long double"),
    (b"", 2, "truncated"),
])
def test_malformed_property_section(tmp_path, props, nprops, msg):
    f = tmp_path / "bad.gt"
    f.write_bytes(_gt(props, nprops))
    with pytest.raises(GraphFormatError, match=msg) as ei:
        read_gt_properties(f)
    assert "bad.gt" in str(ei.value)


def test_polblogs_labels_match_the_paper():
    pr = read_gt_properties(embedded_path("polblogs"))
    value = pr["vertex"]["value"]
    assert value.shape == (1490,)
    # Adamic & Glance (2005): 758 liberal and 732 conservative blogs
    assert np.bincount(value.astype(np.int64)).tolist() == [758, 732]
    assert pr["vertex"]["label"][0] == "100monkeystyping.com"
