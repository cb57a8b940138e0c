"""Silence what C libraries print straight to the process's standard output and error.

PyBullet prints "pybullet build time: ..." (on standard error) when it is imported and
"argv[0]=" (on standard output) when a physics client connects, from C, past Python's
``sys.stdout``/``sys.stderr``: only the file descriptors can be redirected.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

import gymnasium as gym

_LIBC = ctypes.CDLL(None)
_C_STREAMS = [ctypes.c_void_p.in_dll(_LIBC, name) for name in ("stdout", "stderr")]


@contextlib.contextmanager
def c_output_silenced():
    """File descriptors 1 and 2 go to /dev/null inside the block (Python's own prints too);
    exceptions raised inside it are not printed there, so they reach the caller whole."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        for stream in _C_STREAMS:  # C's buffered output goes to /dev/null, not the restored fds
            _LIBC.fflush(stream)
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)


class QuietFirstReset(gym.Wrapper):
    """An env whose first ``reset`` is silenced: PyBullet connects its physics client there."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._connected = False

    def reset(self, **kwargs):
        if self._connected:
            return self.env.reset(**kwargs)
        self._connected = True
        with c_output_silenced():
            return self.env.reset(**kwargs)
