"""The off-policy updates' gradients computed by hand: autograd's numbers, in fewer kernels.

On a CPU the SAC and TD3 updates spend more time between their matmuls than in them: autograd
records a node for every op, replays the graph backwards with its own bookkeeping (views,
transposes, gradient accumulation, ``zero_grad``) and ``Optimizer.step`` regroups its tensors at
every call. Our networks are plain MLPs (``networks.mlp``), so their backward pass is three lines
per layer; this module runs them forward keeping the activations, backward by hand, and steps
the fused Adam kernel directly on the optimizer's own state. The learners' autograd updates stay
the source of truth: ``tests/algorithms/test_manual_gradients.py`` checks that both give the same
weights, optimizer states and losses (within float rounding) for every supported setting.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

#: hidden activation -> (grad w.r.t. its output, pre-activation z, output h) -> grad w.r.t. z:
#: the kernels autograd runs for each (relu and tanh read the output, elu and silu the input)
ACTIVATION_GRADIENTS = {
    "relu": lambda grad, z, h: torch.ops.aten.threshold_backward(grad, h, 0),
    "tanh": lambda grad, z, h: torch.ops.aten.tanh_backward(grad, h),
    "elu": lambda grad, z, h: torch.ops.aten.elu_backward(grad, 1.0, 1.0, 1.0, False, z),
    "silu": lambda grad, z, h: torch.ops.aten.silu_backward(grad, z),
}
#: activations applied in place on the layer's output (their gradient needs no pre-activation)
IN_PLACE = {"relu": torch.relu_, "tanh": torch.tanh_}
OUT_OF_PLACE = {"elu": nn.functional.elu, "silu": nn.functional.silu}


class Saved(NamedTuple):
    """What a backward pass needs of a forward one."""

    inputs: list  # each layer's input
    pre_activations: list  # each hidden activation's input (elu, silu), else None
    output: torch.Tensor


class ManualMLP:
    """An ``networks.mlp`` Sequential (Linear layers, one activation between them, an optional
    Tanh after the last) run forward and backward by hand on its own parameters."""

    def __init__(self, net: nn.Sequential, activation: str):
        self.layers = [m for m in net if isinstance(m, nn.Linear)]
        self.output_tanh = isinstance(net[-1], nn.Tanh)
        self.activation = activation

    @classmethod
    def of_layers(cls, layers: list[nn.Linear], activation: str) -> ManualMLP:
        """Linear ``layers`` with ``activation`` between them and none after the last (an
        encoder and its head, as RLlib's PPO module splits them)."""
        mlp = cls.__new__(cls)
        mlp.layers, mlp.output_tanh, mlp.activation = list(layers), False, activation
        return mlp

    def parameters(self) -> list[torch.Tensor]:
        """In the order ``backward`` gives their gradients."""
        return [p for layer in self.layers for p in (layer.weight, layer.bias)]

    def forward(self, x: torch.Tensor) -> Saved:
        inputs, pre_activations, h = [], [], x
        for layer in self.layers[:-1]:
            inputs.append(h)
            z = torch.addmm(layer.bias, h, layer.weight.t())  # = nn.functional.linear
            if self.activation in IN_PLACE:
                h, z = IN_PLACE[self.activation](z), None
            else:
                h = OUT_OF_PLACE[self.activation](z)
            pre_activations.append(z)
        inputs.append(h)
        last = self.layers[-1]
        out = torch.addmm(last.bias, h, last.weight.t())
        return Saved(inputs, pre_activations, torch.tanh(out) if self.output_tanh else out)

    def output(self, x: torch.Tensor) -> torch.Tensor:
        """``forward(x).output`` without keeping what ``backward`` needs (acting, not learning)."""
        *hidden, last = self.layers
        activate = IN_PLACE.get(self.activation) or OUT_OF_PLACE[self.activation]
        for layer in hidden:
            x = activate(torch.addmm(layer.bias, x, layer.weight.t()))
        out = torch.addmm(last.bias, x, last.weight.t())
        return torch.tanh(out) if self.output_tanh else out

    def backward(
        self,
        saved: Saved,
        grad_out: torch.Tensor,
        weights: bool = True,
        inputs: bool = False,
        out: list[torch.Tensor] | None = None,
    ) -> tuple[list, torch.Tensor | None]:
        """Gradients of the parameters (in ``parameters()`` order; empty unless ``weights``) and of
        the input (None unless ``inputs``), given the gradient of the output. With ``out`` (a
        tensor per parameter, in the same order) the parameters' gradients are written there."""
        grad = (
            torch.ops.aten.tanh_backward(grad_out, saved.output) if self.output_tanh else grad_out
        )
        grads = []
        for index in range(len(self.layers) - 1, -1, -1):
            layer, layer_input = self.layers[index], saved.inputs[index]
            if weights:
                into = out[2 * index : 2 * index + 2] if out is not None else (None, None)
                grads = [
                    torch.mm(grad.t(), layer_input, out=into[0]),
                    torch.sum(grad, 0, out=into[1]),
                    *grads,
                ]
            if index == 0 and not inputs:
                break
            grad = grad.mm(layer.weight)
            if index > 0:
                z = saved.pre_activations[index - 1]
                grad = ACTIVATION_GRADIENTS[self.activation](grad, z, layer_input)
        return grads, (grad if inputs else None)


def mlps(modules, activation: str) -> list[ManualMLP]:
    return [ManualMLP(net, activation) for net in modules]


def q_forward(critics: list[ManualMLP], inputs: torch.Tensor) -> tuple[list, list]:
    """Each critic's saved activations and its Q values, shape (batch,)."""
    saved = [critic.forward(inputs) for critic in critics]
    return saved, [s.output.squeeze(-1) for s in saved]


def min_q_gradients(q: list[torch.Tensor], grad: torch.Tensor) -> list[torch.Tensor]:
    """The gradient of ``min(q[0], q[1])`` reaching each critic: torch.minimum's (a tie splits it)."""
    if len(q) == 1:
        return [grad]
    split = torch.where(q[0] == q[1], grad / 2, grad)
    return [split.masked_fill(q[0] > q[1], 0.0), split.masked_fill(q[0] < q[1], 0.0)]


def critic_loss_gradient(loss: str, q: torch.Tensor, targets: torch.Tensor, batch: dict):
    """d(mean over rows of [weight *] loss(q, targets))/dq, as ``offpolicy.td_loss`` sums it."""
    diff = q - targets
    grad = 2.0 * diff if loss == "mse" else diff.clamp(-1.0, 1.0)  # huber, delta 1
    weights = batch.get("weights")
    if weights is not None:
        grad = grad * weights
    return grad / len(q)


def critic_step(
    critics: list[ManualMLP], optimizer, batch: dict, targets: torch.Tensor, loss: str
) -> list[torch.Tensor]:
    """One critic update on ``loss`` (``offpolicy.td_loss``'s); returns each critic's Q values."""
    saved, q_preds = q_forward(critics, batch["obs_actions"])
    grads = []
    for critic, s, q in zip(critics, saved, q_preds):
        grad_q = critic_loss_gradient(loss, q, targets, batch)
        grads += critic.backward(s, grad_q.unsqueeze(-1))[0]
    adam_step(optimizer, grads)
    return q_preds


def action_gradient(
    critics: list[ManualMLP], obs: torch.Tensor, actions: torch.Tensor, grad_q: torch.Tensor
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Q values of each critic at (obs, actions), and the gradient of their minimum, weighted by
    ``grad_q`` per row, with respect to the actions (the critics' weights get none)."""
    saved, q = q_forward(critics, torch.cat([obs, actions], dim=-1))
    grad_actions = None
    for critic, s, grad in zip(critics, saved, min_q_gradients(q, grad_q)):
        grad_inputs = critic.backward(s, grad.unsqueeze(-1), weights=False, inputs=True)[1]
        part = grad_inputs[:, obs.shape[-1] :]
        grad_actions = part if grad_actions is None else grad_actions + part
    return q, grad_actions


#: the Adam settings under which ``adam_step`` calls the fused kernel as ``Optimizer.step`` does
FUSED_ADAM = {"fused": True, "amsgrad": False, "maximize": False, "differentiable": False}


def adam_step(optimizer: torch.optim.Adam, grads: list[torch.Tensor]) -> None:
    """``optimizer.step()`` with ``grads`` as its parameters' gradients (one group, in order).

    Calls torch's fused Adam kernel on the optimizer's own state, as ``torch.optim.Adam``'s fused
    path does, without its per-call regrouping; its first step (which creates the state), or any
    other kind of Adam, goes through ``optimizer.step()`` itself."""
    (group,) = optimizer.param_groups
    params = group["params"]
    fused = all(group.get(key) == value for key, value in FUSED_ADAM.items())
    if not fused or group.get("decoupled_weight_decay") or params[0] not in optimizer.state:
        for param, grad in zip(params, grads):
            param.grad = grad
        optimizer.step()
        for param in params:
            param.grad = None
        return
    states = [optimizer.state[p] for p in params]
    steps = [s["step"] for s in states]
    torch._foreach_add_(steps, 1)
    beta1, beta2 = group["betas"]
    torch._fused_adam_(
        params,
        grads,
        [s["exp_avg"] for s in states],
        [s["exp_avg_sq"] for s in states],
        [],
        steps,
        amsgrad=False,
        lr=group["lr"],
        beta1=beta1,
        beta2=beta2,
        weight_decay=group["weight_decay"],
        eps=group["eps"],
        maximize=False,
        grad_scale=None,
        found_inf=None,
    )
