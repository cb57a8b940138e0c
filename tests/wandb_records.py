"""Read a W&B run file (``run-<id>.wandb``): what an offline run recorded, as W&B's own
protobuf records. W&B 0.31 writes it from its Go core and ships no Python reader; the format is
a 7-byte header, then 32 KiB blocks of chunks (``<IHB``: checksum, length, type; 1 whole,
2 first, 3 middle, 4 last), as LevelDB's log."""

import json
import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK, HEADER, CHUNK = 32 * 1024, 7, struct.Struct("<IHB")


def _payloads(data: bytes):
    position, pending = HEADER, b""
    while position + CHUNK.size <= len(data):
        left_in_block = BLOCK - position % BLOCK
        if left_in_block < CHUNK.size:  # the block's zero padding
            position += left_in_block
            continue
        _, length, kind = CHUNK.unpack_from(data, position)
        position += CHUNK.size
        chunk = data[position : position + length]
        position += length
        if kind == 1:
            yield chunk
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            yield pending + chunk


def read_run(path: Path) -> tuple[dict, list[dict]]:
    """(config, history rows) of a run file."""
    config, history = {}, []
    for payload in _payloads(Path(path).read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        updates = {"config": record.config, "run": record.run.config}.get(kind)
        if updates is not None:
            for item in updates.update:
                config[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
        elif kind == "history":
            history.append(
                {
                    (item.key or "/".join(item.nested_key)): json.loads(item.value_json)
                    for item in record.history.item
                }
            )
    return config, history
