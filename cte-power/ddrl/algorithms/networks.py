"""Plain PyTorch building blocks of our off-policy modules (TD3/DDPG, SAC)."""

from __future__ import annotations

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "silu": nn.SiLU}


def mlp(
    in_dim: int, hiddens: list[int], out_dim: int, activation: str, output: nn.Module | None = None
) -> nn.Sequential:
    layers, last = [], in_dim
    for width in hiddens:
        layers += [nn.Linear(last, width), ACTIVATIONS[activation]()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    if output is not None:
        layers.append(output)
    return nn.Sequential(*layers)


def make_critics(
    obs_dim: int, act_dim: int, hiddens: list[int], activation: str, twin_q: bool
) -> nn.ModuleList:
    """One Q network, or two (twin Q), each on observations and actions side by side."""
    return nn.ModuleList(
        mlp(obs_dim + act_dim, hiddens, 1, activation) for _ in range(2 if twin_q else 1)
    )


def q_values(
    critics: nn.ModuleList, obs: torch.Tensor, actions: torch.Tensor
) -> list[torch.Tensor]:
    """Q(s, a) of each critic, shape (batch,)."""
    return critic_outputs(critics, torch.cat([obs, actions], dim=-1))


def critic_outputs(critics: nn.ModuleList, obs_actions: torch.Tensor) -> list[torch.Tensor]:
    """Q of each critic on inputs that already hold obs and actions side by side, shape (batch,)."""
    return [critic(obs_actions).squeeze(-1) for critic in critics]


def min_q(q: list[torch.Tensor]) -> torch.Tensor:
    """The smallest of one or two critics' Q values (clipped double Q)."""
    return q[0] if len(q) == 1 else torch.minimum(q[0], q[1])


def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """target <- tau * source + (1 - tau) * target, all tensors in one foreach call."""
    SoftUpdate((target, source))(tau)


class SoftUpdate:
    """``soft_update`` of fixed (target, source) module pairs, their parameter lists gathered once
    (the fast updates keep one: walking the modules at every update costs more than the lerp)."""

    def __init__(self, *pairs: tuple[nn.Module, nn.Module]):
        self.targets = [p for target, _ in pairs for p in target.parameters()]
        self.sources = [p for _, source in pairs for p in source.parameters()]

    @torch.no_grad()
    def __call__(self, tau: float) -> None:
        torch._foreach_lerp_(self.targets, self.sources, tau)
