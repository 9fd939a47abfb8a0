"""Reading what W&B wrote offline: the transaction log ``RUN_DIR/wandb/offline-run-*-<id>/run-<id>.wandb``.

W&B keeps each run's records (history rows, config, summary, files) in a log of protobuf
``wandb_internal_pb2.Record`` messages, framed as LevelDB's log format with W&B's own header: the file
starts with ``b":W&B"``, magic ``0xBEE1`` and version 0; then come 32 KiB blocks of chunks, each with a
7-byte header (CRC32 of type byte and data, little-endian length, type FULL/FIRST/MIDDLE/LAST). W&B
0.31's Python package has no reader of it (its writer and ``wandb sync`` are in the Go core), so this
module reads the framing and parses the records with W&B's own protobuf classes.

A process killed with ``kill -9`` may leave a torn tail (a partly written block, or none of the last
block at all): reading stops at the first chunk that is incomplete or fails its checksum, and what came
before it is what the tracker holds.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HEADER = struct.Struct("<4sHB")  # ident, magic, version
CHUNK = struct.Struct("<IHB")  # crc32, length, type
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_TYPE_CRC = {t: zlib.crc32(bytes([t])) for t in (FULL, FIRST, MIDDLE, LAST)}


def offline_files(run_dir: Path, run_id: str) -> list[Path]:
    """The transaction logs of W&B run ``run_id`` under ``run_dir/wandb`` (one per process that ran it:
    the first run and each resume), oldest first."""
    return sorted(Path(run_dir).glob(f"wandb/*-{run_id}/run-{run_id}.wandb"))


def read_records(path: Path) -> Iterator[bytes]:
    """The serialised records of one transaction log, up to a torn or damaged tail.

    Raises:
        ValueError: the file does not start with W&B's header.
    """
    data = Path(path).read_bytes()
    if len(data) < HEADER.size or HEADER.unpack_from(data)[:2] != (b":W&B", 0xBEE1):
        raise ValueError(f"{path} is not a W&B transaction log")
    pos, parts = HEADER.size, []
    while pos + CHUNK.size <= len(data):
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < CHUNK.size:  # the block's tail is padding
            pos += left_in_block
            continue
        crc, length, kind = CHUNK.unpack_from(data, pos)
        body = data[pos + CHUNK.size:pos + CHUNK.size + length]
        if kind not in _TYPE_CRC or len(body) != length or zlib.crc32(body, _TYPE_CRC[kind]) != crc:
            return  # a torn or zero-filled tail
        pos += CHUNK.size + length
        if kind == FULL:
            yield body
        elif kind == FIRST:
            parts = [body]
        elif kind == MIDDLE and parts:
            parts.append(body)
        elif kind == LAST and parts:
            parts.append(body)
            yield b"".join(parts)
            parts = []


def _parse(raw: bytes) -> Any:
    from wandb.proto import wandb_internal_pb2

    record = wandb_internal_pb2.Record()
    record.ParseFromString(raw)
    return record


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def history(run_dir: Path, run_id: str) -> list[dict[str, Any]]:
    """Every history row W&B holds offline for ``run_id`` (all its files, in order): ``{key: value}``
    with W&B's own ``_step`` (and ``_runtime``, ``_timestamp``)."""
    return [{_key(item): json.loads(item.value_json) for item in record.history.item}
            for kind, record in _records(run_dir, run_id) if kind == "history"]


def config(run_dir: Path, run_id: str) -> dict[str, Any]:
    """The run config W&B holds offline (the updates of all files merged; ``_wandb`` left out)."""
    out: dict[str, Any] = {}
    for kind, record in _records(run_dir, run_id):
        items = record.config.update if kind == "config" else record.run.config.update if kind == "run" else ()
        for item in items:
            if _key(item) != "_wandb":
                out[_key(item)] = json.loads(item.value_json)
    return out


def summary(run_dir: Path, run_id: str) -> dict[str, Any]:
    """The run summary W&B holds offline (later updates win)."""
    out: dict[str, Any] = {}
    for kind, record in _records(run_dir, run_id):
        if kind == "summary":
            out.update({_key(item): json.loads(item.value_json) for item in record.summary.update})
    return out


def _records(run_dir: Path, run_id: str) -> Iterator[tuple[str, Any]]:
    """``(record type, record)`` of every record W&B wrote offline for ``run_id``, file by file, in order."""
    for path in offline_files(run_dir, run_id):
        for raw in read_records(path):
            record = _parse(raw)
            yield record.WhichOneof("record_type"), record
