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
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.torch_utils import explained_variance


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
