"""PPO's minibatch updates without RLlib's per-minibatch bookkeeping (``lean_update``).

RLlib's ``Learner.update`` pays, for every minibatch, a ``SampleBatch`` slice and concatenation,
a ``MultiAgentBatch`` wrapper, ``tree`` maps, a mode switch of the module, off-policyness and
metrics logging: several milliseconds of Python per minibatch of 256, more than the matmuls of
the humanoid's [256, 256] networks take. Here the train batch (after RLlib's learner connector:
GAE, value targets) is one dict of tensors, each minibatch one gather per column, and metrics
are logged once per update. The loss is RLlib's PPO loss, term by term.
"""

from __future__ import annotations

import math

import torch
from ray.rllib.algorithms.ppo.ppo import (
    LEARNER_RESULTS_KL_KEY,
    LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY,
    LEARNER_RESULTS_VF_LOSS_UNCLIPPED_KEY,
)
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchDiagGaussian
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
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


def manual_networks(module) -> tuple[ManualMLP, ManualMLP] | None:
    """The policy (actor encoder, then pi head) and the value function (critic encoder, then vf
    head) of RLlib's default PPO module as ``ManualMLP``s; None for any other module (shared
    layers, layer norm, a free log std, recurrent, discrete actions), which keeps autograd."""
    encoder = getattr(module, "encoder", None)
    if not hasattr(encoder, "actor_encoder") or not hasattr(encoder, "critic_encoder"):
        return None
    if module.is_stateful() or module.get_train_action_dist_cls() is not TorchDiagGaussian:
        return None
    networks = []
    for part, head in ((encoder.actor_encoder, module.pi), (encoder.critic_encoder, module.vf)):
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
        networks.append(ManualMLP.of_layers(linear, kinds.pop() if kinds else "tanh"))
    covered = {id(p) for network in networks for p in network.parameters()}
    if covered != {id(p) for p in module.parameters()}:
        return None  # a parameter outside the two chains (a free log std, say)
    return networks[0], networks[1]


@torch.no_grad()
def ppo_gradients(
    policy: ManualMLP, value: ManualMLP, batch: dict, config, entropy_coeff, kl_coeff
) -> dict:
    """``ppo_loss``'s gradient with respect to every parameter of the two networks, by hand: the
    same terms (clipped surrogate, clamped squared value error, entropy, KL to the sampling
    policy, the loss mask's mean), differentiated link by link. Parameter -> gradient."""
    obs, actions = batch[Columns.OBS], batch[Columns.ACTIONS]
    if Columns.LOSS_MASK in batch:  # each term's mean over the valid rows
        mask = batch[Columns.LOSS_MASK]
        weight = mask.to(obs.dtype) / mask.sum()
    else:
        weight = torch.full((len(obs),), 1.0 / len(obs), dtype=obs.dtype, device=obs.device)

    saved_pi = policy.forward(obs)
    mean, log_std = saved_pi.output.chunk(2, dim=-1)
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

    grads = policy.backward(saved_pi, torch.cat([grad_mean, grad_log_std], dim=-1))[0]
    grads += value.backward(saved_vf, grad_value[:, None])[0]
    return dict(zip(policy.parameters() + value.parameters(), grads))
