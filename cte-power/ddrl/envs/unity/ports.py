"""Worker ids and their gRPC ports: each environment its own, so parallel ones never clash."""

from __future__ import annotations

import socket
import threading

from ddrl.envs.unity.settings import UnitySettings
from ddrl.errors import UserError

#: How many blocks of worker ids to try when a port is taken.
PORT_ATTEMPTS = 8


def _port_free(port: int) -> bool:
    """What mlagents-envs checks before it listens: can we bind localhost:port?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("localhost", port))
        except OSError:
            return False
    return True


_claimed_lock = threading.Lock()
_claimed: set[int] = set()  # worker ids of this process's open environments


def claim_worker_id(settings: UnitySettings, env_config) -> int:
    """This environment's worker id: runner index * envs per runner + sub-env index (+ base)."""
    if settings.editor:
        return 0  # mlagents-envs talks to the Editor only as worker 0
    worker_index = int(getattr(env_config, "worker_index", 0) or 0)
    num_workers = int(getattr(env_config, "num_workers", 0) or 0)
    block = (num_workers + 1) * settings.envs_per_runner
    first = settings.base_worker_id + worker_index * settings.envs_per_runner
    with _claimed_lock:
        slot = 0
        while first + slot in _claimed:  # sub-environments of this runner take the next ids
            slot += 1
        for attempt in range(PORT_ATTEMPTS):
            worker_id = first + slot + attempt * block
            if worker_id not in _claimed and _port_free(settings.port(worker_id)):
                _claimed.add(worker_id)
                return worker_id
    raise UserError(
        f"ports {settings.port(first + slot)} and the {PORT_ATTEMPTS - 1} alternatives after it (every {block}) "
        "are in use, so no Unity environment can listen. Stop what holds them, or move the range with "
        "--set environment.env_config.base_worker_id=N (port = 5005 + worker id)."
    )


def release_worker_id(worker_id: int | None) -> None:
    with _claimed_lock:
        _claimed.discard(worker_id)
