"""PPO's minibatch updates without RLlib's per-minibatch bookkeeping (``lean_update``).

RLlib's ``Learner.update`` pays, for every minibatch, a ``SampleBatch`` slice and concatenation,
a ``MultiAgentBatch`` wrapper, ``tree`` maps, a mode switch of the module, off-policyness and
metrics logging: several milliseconds of Python per minibatch of 256, more than the matmuls of
the humanoid's [256, 256] networks take. Here the train batch (after RLlib's learner connector:
GAE, value targets) is one dict of tensors, each minibatch one gather per column, and metrics
are logged once per update. The loss is RLlib's PPO loss, term by term.

With its gradients by hand (``ppo_gradients``), a minibatch is also one gather from the loss's
columns packed side by side (``PackedColumns``), and its gradients land in one flat tensor, so
that the total gradient norm (the finiteness check, the clipping) is one kernel, not one per
parameter tensor: per minibatch of the humanoid's [256, 256] networks this work of a few dozen
small kernels cost as much as a tenth of the update.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from ray.rllib.algorithms.ppo.ppo import (
    LEARNER_RESULTS_KL_KEY,
    LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY,
    LEARNER_RESULTS_VF_LOSS_UNCLIPPED_KEY,
)
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchDiagGaussian
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.core.models.torch.heads import TorchFreeLogStdMLPHead
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.torch_utils import explained_variance
from torch import nn

from ddrl.algorithms.manual_gradients import ManualMLP


def minibatch_indices(
    rows: int, size: int, epochs: int, shuffle: bool, generator: torch.Generator | None = None
) -> list[torch.Tensor]:
    """Row indices of each minibatch, as RLlib's cyclic iterator cuts them: ``size`` rows each,
    taken in turn from ``epochs`` passes over the batch laid end to end (a minibatch may span
    two passes), ceil(epochs * rows / size) minibatches in all. With ``shuffle`` every pass is
    a new permutation (RLlib leaves the first pass in sampling order)."""
    passes = [
        torch.randperm(rows, generator=generator) if shuffle else torch.arange(rows)
        for _ in range(epochs)
    ]
    stream = torch.cat(passes)
    count = math.ceil(epochs * rows / size)
    stream = torch.cat([stream, stream[: count * size - len(stream)]])  # the last one wraps
    return list(stream.split(size))


def ppo_loss(
    module, batch: dict, fwd_out: dict, config, entropy_coeff: float, kl_coeff, with_stats=True
):
    """RLlib's PPO loss (``PPOTorchLearner.compute_loss_for_module``) and, ``with_stats``, its
    metrics as tensors (else None: only the last minibatch's are logged)."""
    if Columns.LOSS_MASK in batch:
        mask = batch[Columns.LOSS_MASK]
        valid = mask.sum()

        def mean(values):
            return values[mask].sum() / valid
    else:
        mean = torch.mean
    current = module.get_train_action_dist_cls().from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
    ratio = torch.exp(current.logp(batch[Columns.ACTIONS]) - batch[Columns.ACTION_LOGP])
    advantages = batch[Postprocessing.ADVANTAGES]
    surrogate = torch.min(
        advantages * ratio,
        advantages * torch.clamp(ratio, 1 - config.clip_param, 1 + config.clip_param),
    )
    entropy = current.entropy()
    values = module.compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
    vf_loss = torch.pow(values - batch[Postprocessing.VALUE_TARGETS], 2.0)
    vf_loss_clipped = torch.clamp(vf_loss, 0, config.vf_clip_param)
    total = mean(-surrogate + config.vf_loss_coeff * vf_loss_clipped - entropy_coeff * entropy)
    if config.use_kl_loss:
        previous = module.get_exploration_action_dist_cls().from_logits(
            batch[Columns.ACTION_DIST_INPUTS]
        )
        mean_kl = mean(previous.kl(current))
        total = total + kl_coeff * mean_kl
    else:
        mean_kl = torch.zeros((), device=total.device)
    if not with_stats:
        return total, None
    stats = {
        POLICY_LOSS_KEY: -mean(surrogate),
        VF_LOSS_KEY: mean(vf_loss_clipped),
        LEARNER_RESULTS_VF_LOSS_UNCLIPPED_KEY: mean(vf_loss),
        LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY: explained_variance(
            batch[Postprocessing.VALUE_TARGETS], values
        ),
        ENTROPY_KEY: mean(entropy),
        LEARNER_RESULTS_KL_KEY: mean_kl,
    }
    return total, stats


#: the train batch's columns that ``ppo_gradients`` reads (a minibatch gathers only these)
LOSS_COLUMNS = {
    Columns.OBS, Columns.ACTIONS, Columns.ACTION_LOGP, Columns.ACTION_DIST_INPUTS,
    Columns.LOSS_MASK, Postprocessing.ADVANTAGES, Postprocessing.VALUE_TARGETS,
}  # fmt: skip
#: RLlib's fcnet activations, as ``manual_gradients`` names them
ACTIVATIONS = {nn.Tanh: "tanh", nn.ReLU: "relu", nn.ELU: "elu", nn.SiLU: "silu"}


class PPONetworks(NamedTuple):
    """RLlib's default PPO module as ``ppo_gradients`` runs it."""

    policy: ManualMLP  # the actor encoder, then the pi head: means and log stds, or means only
    value: ManualMLP  # the critic encoder, then the vf head
    log_std: nn.Parameter | None = None  # a free log std (``free_log_std``), else None
    log_std_clip: float | None = None  # the free log std's clamp, +-this, if it is clamped

    def parameters(self) -> list[torch.Tensor]:
        """Every parameter, in the order of ``ppo_gradients``' gradients."""
        free = [self.log_std] if self.log_std is not None else []
        return self.policy.parameters() + self.value.parameters() + free


def _manual_chain(part, head) -> ManualMLP | None:
    """An encoder and its head (RLlib MLPs) as one ``ManualMLP``, or None if they are not plain
    Linear layers with one activation between them."""
    # (a free log std head's MLP gives the means; its log std is a parameter beside it)
    layers = [getattr(getattr(m, "net", None), "mlp", None) for m in (part, head)]
    if not all(isinstance(layer, nn.Sequential) for layer in layers):
        return None
    chain = [*layers[0], *layers[1]]  # Linear, activation, ..., Linear
    linear, between = chain[0::2], chain[1::2]
    kinds = {ACTIVATIONS.get(type(m)) for m in between}
    if (
        len(chain) % 2 == 0
        or not all(type(m) is nn.Linear for m in linear)
        or len(kinds) > 1
        or None in kinds
    ):
        return None
    return ManualMLP.of_layers(linear, kinds.pop() if kinds else "tanh")


def _free_log_std(module) -> tuple[nn.Parameter | None, float | None]:
    """The pi head's free log std and its clamp (+-this), if it has them."""
    if not isinstance(module.pi, TorchFreeLogStdMLPHead):
        return None, None
    clip = float(module.pi.log_std_clip_param_const) if module.pi.clip_log_std else None
    return module.pi.log_std, clip


def _default_gaussian_module(module) -> bool:
    """RLlib's default PPO module, its forward passes its own, with a Gaussian policy."""
    return (
        isinstance(module, DefaultPPOTorchRLModule)
        and type(module)._forward is DefaultPPOTorchRLModule._forward
        and type(module)._forward_exploration is DefaultPPOTorchRLModule._forward_exploration
        and not module.is_stateful()
        and module.get_exploration_action_dist_cls() is TorchDiagGaussian
        and hasattr(getattr(module, "encoder", None), "actor_encoder")
    )


def manual_networks(module) -> PPONetworks | None:
    """The policy (actor encoder, then pi head) and the value function (critic encoder, then vf
    head) of RLlib's default PPO module as ``ManualMLP``s, and its free log std if it has one;
    None for any other module (shared layers, layer norm, recurrent, discrete actions), which
    keeps autograd."""
    encoder = getattr(module, "encoder", None)
    if not hasattr(encoder, "actor_encoder") or not hasattr(encoder, "critic_encoder"):
        return None
    if module.is_stateful() or module.get_train_action_dist_cls() is not TorchDiagGaussian:
        return None
    policy = _manual_chain(encoder.actor_encoder, module.pi)
    value = _manual_chain(encoder.critic_encoder, module.vf)
    if policy is None or value is None:
        return None
    result = PPONetworks(policy, value, *_free_log_std(module))
    if {id(p) for p in result.parameters()} != {id(p) for p in module.parameters()}:
        return None  # a parameter outside the two chains and the free log std
    return result


class ManualPolicy(NamedTuple):
    """The exploring forward pass of RLlib's default PPO module and RLlib's ``GetActions`` on
    its Gaussian, in plain tensor ops: what an env runner does at every vector step, without
    the module's nested calls and the distribution objects (about 200 of an env runner's 300
    microseconds per vector step of 4 humanoids). The same values and the same random draws
    (``tests/envs/test_lean_sampling.py``)."""

    net: ManualMLP  # the actor encoder, then the pi head
    log_std: nn.Parameter | None = None  # a free log std, else the net gives the log stds
    log_std_clip: float | None = None

    def explore(self, obs: torch.Tensor) -> dict | None:
        """Actions drawn from the policy at ``obs``, their log-likelihoods and the distribution
        inputs; None where torch's Normal would refuse the parameters (a NaN mean, a zero
        scale), so that the caller's RLlib path raises torch's own error."""
        out = self.net.output(obs)
        if self.log_std is None:  # TorchDiagGaussian.from_logits
            inputs = out
            mean, log_std = out.chunk(2, dim=-1)
        else:  # TorchFreeLogStdMLPHead: the (clamped) log std beside every row's means
            mean, log_std = out, self.log_std
            if self.log_std_clip is not None:
                log_std = torch.clamp(log_std, -self.log_std_clip, self.log_std_clip)
            inputs = torch.cat([mean, log_std.expand_as(mean)], dim=1)
        # a free log std's scale is one row: computed and checked once, broadcast to every row
        # (elementwise, the same values as on the expanded rows)
        scale = log_std.exp()
        if not bool((mean == mean).all() & (scale > 0).all()):
            return None
        # torch.distributions.Normal's sample() and log_prob(), op for op
        actions = torch.normal(mean, scale.expand_as(mean))
        var = scale**2
        logp = -((actions - mean) ** 2) / (2 * var) - scale.log() - _LOG_SQRT_2PI
        return {
            Columns.ACTIONS: actions,
            Columns.ACTION_LOGP: logp.sum(-1),
            Columns.ACTION_DIST_INPUTS: inputs,
        }


_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


def manual_policy(module) -> ManualPolicy | None:
    """RLlib's default PPO module's policy as a ``ManualPolicy``, or None for any other module
    (then RLlib's forward pass and ``GetActions`` run)."""
    if not _default_gaussian_module(module):
        return None
    net = _manual_chain(module.encoder.actor_encoder, module.pi)
    return None if net is None else ManualPolicy(net, *_free_log_std(module))


class PackedColumns:
    """The loss columns of a train batch side by side in one float matrix, so that a minibatch
    is one row gather (``rows``) rather than one per column. The loss mask becomes a column of
    0.0 and 1.0, which ``ppo_gradients`` reads as it reads the boolean one."""

    def __init__(self, columns: dict[str, torch.Tensor]):
        dtype = next(c.dtype for name, c in columns.items() if name != Columns.LOSS_MASK)
        self.layout: dict[str, tuple[int, int, bool]] = {}  # name -> (start, stop, 1-D)
        parts, start = [], 0
        for name, column in columns.items():
            part = column.to(dtype).reshape(len(column), -1)
            self.layout[name] = (start, start + part.shape[1], column.dim() == 1)
            parts.append(part)
            start += part.shape[1]
        self.matrix = torch.cat(parts, dim=1)

    @staticmethod
    def fits(columns: dict[str, torch.Tensor]) -> bool:
        """Whether packing keeps every value: one float dtype, and the loss mask boolean."""
        dtypes = {c.dtype for name, c in columns.items() if name != Columns.LOSS_MASK}
        mask = columns.get(Columns.LOSS_MASK)
        return (
            len(dtypes) == 1
            and dtypes.pop().is_floating_point
            and (mask is None or mask.dtype == torch.bool)
            and all(c.dim() in (1, 2) for c in columns.values())
        )

    def rows(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """The columns of the rows ``index`` (views of one gathered matrix)."""
        gathered = self.matrix.index_select(0, index)
        return {
            name: gathered[:, start] if flat else gathered[:, start:stop]
            for name, (start, stop, flat) in self.layout.items()
        }


class FlatGradients:
    """One flat tensor holding every parameter's gradient (``views``, in ``parameters``' order)."""

    def __init__(self, parameters: list[torch.Tensor]):
        self.flat = torch.empty(sum(p.numel() for p in parameters), dtype=parameters[0].dtype)
        self.views = [
            view.view_as(p)
            for view, p in zip(self.flat.split([p.numel() for p in parameters]), parameters)
        ]


@torch.no_grad()
def ppo_gradients(
    networks: PPONetworks,
    batch: dict,
    config,
    entropy_coeff,
    kl_coeff,
    out: FlatGradients | None = None,
) -> dict:
    """``ppo_loss``'s gradient with respect to every parameter of the networks, by hand: the
    same terms (clipped surrogate, clamped squared value error, entropy, KL to the sampling
    policy, the loss mask's mean), differentiated link by link. Parameter -> gradient (with
    ``out``, built on ``networks.parameters()``, views of ``out.flat``)."""
    policy, value, free_log_std, clip = networks
    obs, actions = batch[Columns.OBS], batch[Columns.ACTIONS]
    if Columns.LOSS_MASK in batch:  # each term's mean over the valid rows
        mask = batch[Columns.LOSS_MASK]  # boolean, or 0.0/1.0 (``PackedColumns``)
        weight = mask.to(obs.dtype) / mask.sum()
    else:
        weight = torch.full((len(obs),), 1.0 / len(obs), dtype=obs.dtype, device=obs.device)

    saved_pi = policy.forward(obs)
    if free_log_std is None:
        mean, log_std = saved_pi.output.chunk(2, dim=-1)
    else:  # the same log stds for every row (the head's clamp first, as in its forward)
        mean = saved_pi.output
        log_std = free_log_std if clip is None else free_log_std.clamp(-clip, clip)
    scale = log_std.exp()
    var = scale * scale
    diff = actions - mean
    logp = (-(diff * diff) / (2 * var) - scale.log() - math.log(math.sqrt(2 * math.pi))).sum(-1)
    ratio = torch.exp(logp - batch[Columns.ACTION_LOGP])
    advantages = batch[Postprocessing.ADVANTAGES]
    low, high = 1 - config.clip_param, 1 + config.clip_param
    unclipped, clipped = advantages * ratio, advantages * torch.clamp(ratio, low, high)
    # d min(unclipped, clipped)/d ratio, as autograd takes it (torch.minimum splits a tie, the
    # clamp passes its bounds): A where unclipped < clipped; 0 where it is greater (the ratio is
    # then outside the clamp); A at a tie (ratio inside: A/2 + A/2; outside only when A is 0)
    grad_ratio = -weight * advantages * (unclipped <= clipped)
    grad_logp = (grad_ratio * ratio)[:, None]
    grad_mean = grad_logp * diff / var
    grad_log_std = grad_logp * (diff * diff / var - 1)
    if entropy_coeff:  # the entropy's gradient by the log std is 1 per dimension
        grad_log_std = grad_log_std - (entropy_coeff * weight)[:, None]
    if config.use_kl_loss:  # KL(sampling policy || current), torch's normal-normal formula
        old_mean, old_log_std = batch[Columns.ACTION_DIST_INPUTS].chunk(2, dim=-1)
        kl_weight = (kl_coeff * weight)[:, None]
        grad_mean = grad_mean + kl_weight * (mean - old_mean) / var
        old_ratio = old_log_std.exp() / scale
        shift = (old_mean - mean) / scale
        grad_log_std = grad_log_std + kl_weight * (1 - old_ratio * old_ratio - shift * shift)

    saved_vf = value.forward(obs)
    error = saved_vf.output.squeeze(-1) - batch[Postprocessing.VALUE_TARGETS]
    grad_value = config.vf_loss_coeff * weight * 2 * error
    if math.isfinite(config.vf_clip_param):  # the clamp passes no gradient beyond its bound
        grad_value = grad_value * (error * error <= config.vf_clip_param)

    pi_count, vf_count = len(policy.parameters()), len(value.parameters())
    into_pi = out.views[:pi_count] if out else None
    into_vf = out.views[pi_count : pi_count + vf_count] if out else None
    if free_log_std is None:
        grad_pi = torch.cat([grad_mean, grad_log_std], dim=-1)
    else:  # each row's log stds are the one parameter: their gradients add up
        grad_pi = grad_mean
        grad_free = torch.sum(grad_log_std, 0, out=out.views[-1] if out else None)
        if clip is not None:  # the clamp passes gradient only within its bounds
            grad_free.mul_((free_log_std >= -clip) & (free_log_std <= clip))
    grads = policy.backward(saved_pi, grad_pi, out=into_pi)[0]
    grads += value.backward(saved_vf, grad_value[:, None], out=into_vf)[0]
    if free_log_std is not None:
        grads.append(grad_free)
    return dict(zip(networks.parameters(), grads))
