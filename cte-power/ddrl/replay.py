"""A ring buffer of transitions stored as tensors on the learner's device.

Living inside the learner, it receives only the new transitions of each training step and
samples minibatches where the networks are, without RLlib's per-sample episode bookkeeping.
"""

from __future__ import annotations

import torch

FIELDS = ("obs", "actions", "rewards", "next_obs", "terminateds")


class TransitionBuffer:
    def __init__(self, capacity: int, device: torch.device | str = "cpu"):
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.device = torch.device(device)
        self.storage: dict[str, torch.Tensor] = {}
        self.size = 0
        self.next_index = 0  # where the next transition goes

    def __len__(self) -> int:
        return self.size

    def _allocate(self, batch: dict[str, torch.Tensor]) -> None:
        # torch.empty touches no memory until written, so a large capacity costs nothing upfront.
        for name in FIELDS:
            shape = (self.capacity, *batch[name].shape[1:])
            self.storage[name] = torch.empty(shape, dtype=torch.float32, device=self.device)

    def add(self, batch: dict) -> None:
        """Append a batch of transitions (dict of equal-length arrays/tensors), overwriting the oldest."""
        batch = {
            k: torch.as_tensor(batch[k], dtype=torch.float32, device=self.device) for k in FIELDS
        }
        n = len(batch["rewards"])
        if n == 0:
            return
        if not self.storage:
            self._allocate(batch)
        if n > self.capacity:  # keep only the newest
            batch = {k: v[-self.capacity :] for k, v in batch.items()}
            n = self.capacity
        positions = (self.next_index + torch.arange(n, device=self.device)) % self.capacity
        for name in FIELDS:
            self.storage[name][positions] = batch[name]
        self.next_index = (self.next_index + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> dict[str, torch.Tensor]:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = torch.randint(0, self.size, (batch_size,), device=self.device, generator=generator)
        return {name: tensor[index] for name, tensor in self.storage.items()}

    def get_state(self) -> dict:
        return {
            "size": self.size,
            "next_index": self.next_index,
            "storage": {k: v[: self.size].cpu().numpy() for k, v in self.storage.items()},
        }

    def set_state(self, state: dict) -> None:
        self.storage = {}
        self.size = self.next_index = 0
        if state["size"]:
            self.add(state["storage"])
            self.next_index = state["next_index"]
