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
        return self._gather(index)

    def _gather(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """The rows at ``index``: each field, and ``obs_actions`` (obs and actions side by side)."""
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


class PrioritizedTransitionBuffer(TransitionBuffer):
    """Proportional prioritized replay (Schaul et al. 2016), as RLlib 1.x ran it for the thesis.

    A transition is drawn with probability p_i^alpha / sum_k p_k^alpha, where p_i is its last
    absolute TD error plus ``epsilon`` (new transitions get the largest priority seen so far), and
    weighs ``(N P(i))^-beta`` in the critic loss, divided by the largest such weight. The sums
    live in a sum tree over the buffer's slots: drawing a minibatch and updating its priorities
    cost a few vectorised operations per tree level.
    """

    def __init__(
        self,
        capacity: int,
        device: torch.device | str = "cpu",
        alpha: float = 0.6,
        beta: float = 0.4,
        epsilon: float = 1e-6,
    ):
        super().__init__(capacity, device)
        self.alpha, self.beta, self.epsilon = float(alpha), float(beta), float(epsilon)
        self.leaves = max(2, 1 << (self.capacity - 1).bit_length())  # a power of two >= capacity
        # float64: the root is a sum of up to a million terms, updated in place for the whole run
        self.tree = torch.zeros(2 * self.leaves, dtype=torch.float64, device=self.device)
        self.max_priority = 1.0

    def add(self, batch: dict) -> None:
        start, n = self.next_index, min(len(batch["rewards"]), self.capacity)
        super().add(batch)
        if n:
            slots = (start + torch.arange(n, device=self.device)) % self.capacity
            self._set(slots, torch.full((n,), self.max_priority**self.alpha, device=self.device))

    def _set(self, slots: torch.Tensor, values: torch.Tensor) -> None:
        """Write leaf ``values`` at ``slots`` and recompute their ancestors' sums, level by level."""
        nodes = slots.to(torch.long) + self.leaves
        self.tree[nodes] = values.to(torch.float64)
        while True:
            nodes = torch.unique(nodes // 2)
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]
            if nodes[0] <= 1:
                break

    def sample(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> dict[str, torch.Tensor]:
        """A minibatch drawn by priority, with ``index`` (its slots, for ``update_priorities``)
        and ``weights`` (the importance-sampling correction of each row)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        total = self.tree[1]
        mass = torch.rand(batch_size, generator=generator, device=self.device, dtype=torch.float64)
        mass = mass * total
        nodes = torch.ones(batch_size, dtype=torch.long, device=self.device)
        while nodes[0] < self.leaves:  # descend: left child if the mass falls within its sum
            left = 2 * nodes
            go_right = mass >= self.tree[left]
            mass = torch.where(go_right, mass - self.tree[left], mass)
            nodes = torch.where(go_right, left + 1, left)
        index = (nodes - self.leaves).clamp(max=self.size - 1)  # rounding at the very end
        probabilities = self.tree[index + self.leaves] / total
        smallest = self.tree[self.leaves : self.leaves + self.size].min() / total
        weights = (probabilities / smallest).pow(-self.beta).to(torch.float32)
        batch = self._gather(index)
        batch["index"], batch["weights"] = index, weights
        return batch

    def update_priorities(self, index: torch.Tensor, td_errors: torch.Tensor) -> None:
        """New priorities |TD error| + epsilon for the rows drawn at ``index``."""
        priorities = td_errors.detach().abs().to(torch.float64) + self.epsilon
        self.max_priority = max(self.max_priority, float(priorities.max()))
        # a slot drawn twice keeps one of its errors, as in RLlib's buffer
        self._set(index, priorities.pow(self.alpha))

    def get_state(self) -> dict:
        state = super().get_state()
        state["priorities"] = self.tree[self.leaves : self.leaves + self.size].cpu().numpy()
        state["max_priority"] = self.max_priority
        return state

    def set_state(self, state: dict) -> None:
        self.tree.zero_()
        super().set_state(state)  # adds the transitions at the largest priority...
        if state["size"] and "priorities" in state:  # ...then restores their own
            self._set(
                torch.arange(state["size"], device=self.device),
                torch.as_tensor(state["priorities"], device=self.device),
            )
            self.max_priority = float(state["max_priority"])
