"""Plan format constants (the source of docs/reference/plan-format.md).

A plan is a directory ``NAME.plan/`` with ``manifest.json`` (the groups and the
ordered steps of the forward and backward exchange programs), ``partition.arrow``
(global arrays) and ``rank-00000.arrow`` ... (one Arrow IPC file per rank with
that rank's step arrays, named ``<step id>.<array>``). Each Arrow file holds ONE
record batch of ONE row; every field is a column of type ``large_list<int64>``
(or ``large_list<float64>``) whose single list is the array — so arrays of
different lengths share one file and are read zero-copy from a memory map.
"""
from __future__ import annotations

FORMAT = "partplan-plan"
FORMAT_VERSION = 2
SUPPORTED_VERSIONS = (2,)
MANIFEST = "manifest.json"
PARTITION_FILE = "partition.arrow"
REBUILD_HINT = ("rebuild it with `partplan plan GRAPH --partition PARTFILE -o NEW.plan` "
                "(or `partplan partition GRAPH -k RANKS -o NEW.plan`)")


def shard_name(rank: int) -> str:
    """File name of rank ``rank``'s shard."""
    return f"rank-{rank:05d}.arrow"


PARTITION_FIELDS: dict[str, tuple[str, str]] = {
    "part": ("int64", "row block of every vertex (int64[n])"),
    "owner": ("int64", "decoupled ownership only: rank holding row j of H (int64[n])"),
    "perm": ("int64", "old → new vertex id: rank 0's held rows first (ascending old id), then rank 1, ..."),
}
