"""A ring buffer of transitions stored as tensors on the learner's device.

Living inside the learner, it receives only the new transitions of each training step and
samples minibatches where the networks are, without RLlib's per-sample episode bookkeeping.

One row per transition, its fields side by side (obs, actions, rewards, terminateds, next_obs):
a minibatch is one gather instead of one per field, and ``obs_actions`` (the critics' input) is
a view of the first columns rather than a concatenation.
"""

from __future__ import annotations

import torch

FIELDS = ("obs", "actions", "rewards", "terminateds", "next_obs")


class TransitionBuffer:
    def __init__(self, capacity: int, device: torch.device | str = "cpu"):
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.device = torch.device(device)
        self.rows: torch.Tensor | None = None
        self.columns: dict[str, slice] = {}  # field -> its columns in a row
        self.shapes: dict[str, tuple] = {}  # field -> shape of one transition's value
        self.size = 0
        self.next_index = 0  # where the next transition goes

    def __len__(self) -> int:
        return self.size

    def _allocate(self, batch: dict[str, torch.Tensor]) -> None:
        start = 0
        for name in FIELDS:
            self.shapes[name] = tuple(batch[name].shape[1:])
            width = int(torch.Size(self.shapes[name]).numel())
            self.columns[name] = slice(start, start + width)
            start += width
        # torch.empty touches no memory until written, so a large capacity costs nothing upfront.
        self.rows = torch.empty((self.capacity, start), dtype=torch.float32, device=self.device)

    def _fields(self, rows: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of ``rows``' columns, one per field, in each field's shape."""
        return {
            name: rows[:, columns].reshape(len(rows), *self.shapes[name])
            for name, columns in self.columns.items()
        }

    @property
    def storage(self) -> dict[str, torch.Tensor]:
        """Every slot, field by field (views)."""
        return {} if self.rows is None else self._fields(self.rows)

    def add(self, batch: dict) -> None:
        """Append a batch of transitions (dict of equal-length arrays/tensors), overwriting the oldest."""
        batch = {
            k: torch.as_tensor(batch[k], dtype=torch.float32, device=self.device) for k in FIELDS
        }
        n = len(batch["rewards"])
        if n == 0:
            return
        if self.rows is None:
            self._allocate(batch)
        if n > self.capacity:  # keep only the newest
            batch = {k: v[-self.capacity :] for k, v in batch.items()}
            n = self.capacity
        rows = torch.cat([batch[name].reshape(n, -1) for name in FIELDS], dim=1)
        positions = (self.next_index + torch.arange(n, device=self.device)) % self.capacity
        self.rows[positions] = rows
        self.next_index = (self.next_index + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> dict[str, torch.Tensor]:
        """A uniform minibatch: each field, and ``obs_actions`` (obs and actions side by side)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = torch.randint(0, self.size, (batch_size,), device=self.device, generator=generator)
        rows = self.rows[index]
        batch = self._fields(rows)
        batch["obs_actions"] = rows[:, : self.columns["actions"].stop]
        return batch

    def get_state(self) -> dict:
        return {
            "size": self.size,
            "next_index": self.next_index,
            "storage": {k: v[: self.size].cpu().numpy() for k, v in self.storage.items()},
        }

    def set_state(self, state: dict) -> None:
        self.rows, self.columns, self.shapes = None, {}, {}
        self.size = self.next_index = 0
        if state["size"]:
            self.add(state["storage"])
            self.next_index = state["next_index"]
