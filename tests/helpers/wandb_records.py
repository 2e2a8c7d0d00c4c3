"""Read back what an offline W&B run wrote: history rows and config.

An offline run keeps its records in ``run-<id>.wandb``: a 7-byte header
(``:W&B``, magic, version), then LevelDB-log-style chunks (CRC32C, length,
type; full / first / middle / last) in 32 KiB blocks, each record one
``wandb.proto.wandb_internal_pb2.Record``. W&B ships no reader for it any
more, so the tests parse it here (checksums are not verified).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

_BLOCK = 32 * 1024
_CHUNK_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def raw_records(path: Path) -> list[bytes]:
    """The payloads of every record of a ``.wandb`` file, in order."""
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    records, pending, position = [], b"", 7
    while position + _CHUNK_HEADER <= len(data):
        left_in_block = _BLOCK - position % _BLOCK
        if left_in_block < _CHUNK_HEADER:  # block trailer padding
            position += left_in_block
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        position += _CHUNK_HEADER
        chunk = data[position : position + length]
        position += length
        if kind == _FULL:
            records.append(chunk)
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            records.append(pending + chunk)
            pending = b""
    return records


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def read_offline_run(run_file: Path) -> dict[str, Any]:
    """``{"history": [{"_step": ..., key: value}], "config": {...}, "id": ...}``."""
    from wandb.proto import wandb_internal_pb2

    history: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    run_id = None
    for payload in raw_records(run_file):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run_id = record.run.run_id
            for item in record.run.config.update:
                config[_key(item)] = json.loads(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                config[_key(item)] = json.loads(item.value_json)
        elif kind == "history":
            row = {
                _key(item): json.loads(item.value_json) for item in record.history.item
            }
            history.append(row)
    config.pop("_wandb", None)
    return {"id": run_id, "history": history, "config": config}


def offline_run_files(logs_dir: Path) -> list[Path]:
    """The ``run-*.wandb`` files under ``logs_dir/wandb``, oldest first."""
    return sorted(Path(logs_dir).glob("wandb/offline-run-*/run-*.wandb"))
