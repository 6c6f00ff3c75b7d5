"""What an Arrow IPC file (a plan's shard, a ``.arrow`` / ``.feather`` table)
claims, read from its footer and message headers before pyarrow builds any
array: the record batches' row counts, whether their buffers are
compressed, and how many bytes they decompress to.

pyarrow decompresses a compressed buffer to whatever size its first 8 bytes
declare, and builds arrays whose declared lengths it does not compare with
their buffers until they are validated: a re-signed 100 KB file can ask for
gigabytes or crash the process. :func:`ipc_batches` reads the flatbuffers of
the footer and of each record batch's message itself (a few hundred bytes per
batch, bounds-checked) so a reader can refuse before pyarrow touches them.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

_MAGIC = b"ARROW1"
_RECORD_BATCH = 3          # MessageHeader union: Schema 1, DictionaryBatch 2, RecordBatch 3


class IpcProblem(ValueError):
    """The file's IPC structure is malformed or unsupported (one line)."""


@dataclass(frozen=True)
class BatchInfo:
    """One record batch as its message header declares it."""
    rows: int                 # the batch's length
    compressed: bool          # its buffers are compressed (LZ4 / ZSTD)
    body_bytes: int           # bytes of the message body in the file
    decompressed_bytes: int   # bytes its buffers take once read (declared sizes of compressed buffers)
    node_lengths: tuple = ()  # the length of each array node, columns and their children depth first


class _Flat:
    """A bounds-checked reader of one flatbuffer."""

    def __init__(self, buf: bytes):
        self.b = buf

    def _u(self, fmt: str, pos: int):
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > len(self.b):
            raise IpcProblem("a flatbuffer offset points outside its message")
        return struct.unpack_from(fmt, self.b, pos)[0]

    def root(self) -> int:
        return self._u("<I", 0)

    def field(self, table: int, i: int) -> int | None:
        """Position of field ``i`` of the table at ``table`` (None: absent)."""
        vt = table - self._u("<i", table)
        vlen = self._u("<H", vt)
        if 4 + 2 * i + 2 > vlen:
            return None
        off = self._u("<H", vt + 4 + 2 * i)
        return table + off if off else None

    def ref(self, pos: int) -> int:
        return pos + self._u("<I", pos)

    def scalar(self, table: int, i: int, fmt: str, default=0):
        pos = self.field(table, i)
        return default if pos is None else self._u(fmt, pos)

    def vector(self, table: int, i: int, elem: int) -> tuple[int, int]:
        """(first element's position, count) of vector field ``i`` (0, 0 when absent)."""
        pos = self.field(table, i)
        if pos is None:
            return 0, 0
        v = self.ref(pos)
        n = self._u("<I", v)
        if v + 4 + n * elem > len(self.b):
            raise IpcProblem("a flatbuffer vector runs past its message")
        return v + 4, n


def _footer(data) -> tuple[_Flat, int]:
    size = len(data)
    if size < 18 or bytes(data[:6]) != _MAGIC or bytes(data[size - 6:]) != _MAGIC:
        raise IpcProblem("not an Arrow IPC file (magic bytes missing)")
    flen = struct.unpack_from("<i", bytes(data[size - 10:size - 6]))[0]
    if flen <= 0 or flen > size - 18:
        raise IpcProblem(f"footer length {flen} does not fit the file")
    return _Flat(bytes(data[size - 10 - flen:size - 10])), size


def ipc_batches(data) -> list[BatchInfo]:
    """The record batches the Arrow IPC file ``data`` (bytes, memoryview,
    mmap or pyarrow buffer) declares, from its footer and message headers;
    raises :class:`IpcProblem` on a malformed structure (offsets outside the
    file, buffers outside their body, a message that is not a record batch,
    dictionary batches — which partplan's files never hold)."""
    mv = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else memoryview(data)
    f, size = _footer(mv)
    root = f.root()
    _, ndict = f.vector(root, 2, 24)
    if ndict:
        raise IpcProblem("holds dictionary batches (not written by partplan)")
    first, nbatch = f.vector(root, 3, 24)
    out = []
    for b in range(nbatch):
        off, mlen, body = struct.unpack_from("<qi4xq", f.b, first + 24 * b)
        if off < 8 or mlen < 8 or body < 0 or off + mlen + body > size:
            raise IpcProblem(f"record batch {b}: its block ({off}, {mlen}, {body}) lies outside the file")
        head = bytes(mv[off:off + 8])
        cont, length = struct.unpack("<Ii", head)
        start = off + 8
        if cont != 0xFFFFFFFF:          # the pre-1.0 framing: the length comes first
            length, start = struct.unpack("<i", head[:4])[0], off + 4
        if length <= 0 or start + length > off + mlen:
            raise IpcProblem(f"record batch {b}: message length {length} does not fit its block")
        m = _Flat(bytes(mv[start:start + length]))
        mroot = m.root()
        if m.scalar(mroot, 1, "<B") != _RECORD_BATCH:
            raise IpcProblem(f"record batch {b}: the message is not a record batch")
        hpos = m.field(mroot, 2)
        if hpos is None:
            raise IpcProblem(f"record batch {b}: the message has no header")
        rb = m.ref(hpos)
        rows = m.scalar(rb, 0, "<q")
        if rows < 0:
            raise IpcProblem(f"record batch {b}: negative length {rows}")
        compressed = m.field(rb, 3) is not None
        nfirst, nnode = m.vector(rb, 1, 16)        # FieldNode structs: (length, null count)
        lengths = tuple(struct.unpack_from("<q", m.b, nfirst + 16 * i)[0] for i in range(nnode))
        bfirst, nbuf = m.vector(rb, 2, 16)
        body_at = off + mlen
        total = 0
        for i in range(nbuf):
            boff, blen = struct.unpack_from("<qq", m.b, bfirst + 16 * i)
            if boff < 0 or blen < 0 or boff + blen > body:
                raise IpcProblem(f"record batch {b}: buffer {i} ({boff}, {blen}) lies outside the message body "
                                 f"({body} bytes)")
            if compressed and blen >= 8:
                raw = struct.unpack("<q", bytes(mv[body_at + boff:body_at + boff + 8]))[0]
                total += blen - 8 if raw == -1 else max(raw, 0)
            else:
                total += blen
        out.append(BatchInfo(int(rows), compressed, int(body), int(total), lengths))
    return out


__all__ = ["BatchInfo", "IpcProblem", "ipc_batches"]
