"""The SAC update of RLlib's SAC learner, lean: many gradient updates per learner call.

Per update (as RLlib's ``_compute_loss_for_module_continuous``): critic loss (``critic_loss``) against
r + gamma * (1 - terminated) * (min_i Q'_i(s', a') - alpha * log pi(a'|s')), a' ~ pi(s');
actor loss alpha * log pi(a|s) - min_i Q_i(s, a); temperature loss
-log alpha * (log pi(a|s) + target entropy); then a soft update of the target critics.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import DEFAULT_MODULE_ID

from ddrl.algorithms import manual_gradients
from ddrl.algorithms.networks import SoftUpdate, critic_outputs, min_q, soft_update
from ddrl.algorithms.offpolicy import LeanOffPolicyLearner, td_loss, update_priorities
from ddrl.algorithms.sac.rl_module import LOG_STD_MAX, LOG_STD_MIN, tanh_gaussian


def target_entropy(config, action_space) -> float:
    """``target_entropy`` of the config, or -|A| when 'auto' (RLlib's and the paper's default)."""
    if config.target_entropy in (None, "auto"):
        return -float(np.prod(action_space.shape))
    return float(config.target_entropy)


#: what one update reports (summed over a learner call, then averaged), in ``step_stats``' order
STEP_STATS = ("critic_loss", "actor_loss", "alpha_loss", "q_mean", "logp_mean")


def step_stats(critic_loss, actor_loss, alpha_loss, q_preds: list, logp) -> torch.Tensor:
    """``STEP_STATS`` of one update, in one tensor: one add per update to sum them."""
    stats = (critic_loss, actor_loss, alpha_loss, q_preds[0].mean(), logp.mean())
    return torch.stack([value.detach() for value in stats])


class ManualSACNetworks(NamedTuple):
    actor: manual_gradients.ManualMLP
    critics: list[manual_gradients.ManualMLP]
    target_critics: list[manual_gradients.ManualMLP]
    soft_update: SoftUpdate


class SACTorchLearner(LeanOffPolicyLearner):
    def optimizer_groups(self, module, config):
        return [
            ("critic", list(module.critics.parameters()), config.critic_lr),
            ("actor", list(module.actor.parameters()), config.actor_lr),
            ("alpha", [module.log_alpha], config.alpha_lr),
        ]

    @property
    def sac_module(self):
        return self._module[DEFAULT_MODULE_ID].unwrapped()

    def build_manual_networks(self, module) -> ManualSACNetworks:
        activation = self.config.hidden_activation
        return ManualSACNetworks(
            actor=manual_gradients.ManualMLP(module.actor, activation),
            critics=manual_gradients.mlps(module.critics, activation),
            target_critics=manual_gradients.mlps(module.target_critics, activation),
            soft_update=SoftUpdate((module.target_critics, module.critics)),
        )

    def lean_update(self, transitions: dict | None, num_updates: int) -> dict:
        """Store new transitions, then run ``num_updates`` critic, actor and temperature updates."""
        if not self.store_and_check_ready(transitions, num_updates):
            return {}
        config, module = self.config, self.sac_module
        if hasattr(module, "uniform_exploration"):
            module.uniform_exploration.fill_(0.0)  # learning has started: act with the policy
        entropy_target = target_entropy(config, module.action_space)
        optimizers = {
            name: self.get_optimizer(DEFAULT_MODULE_ID, name)
            for name in ("critic", "actor", "alpha")
        }
        totals = torch.zeros(len(STEP_STATS), device=self._device)  # no device sync per update
        step = self._manual_step if config.fast_update else self._autograd_step
        for _ in range(num_updates):
            batch = self.replay.sample(config.train_batch_size_per_learner, self.generator)
            totals += step(module, batch, optimizers, entropy_target)
        stats = dict(zip(STEP_STATS, (totals / num_updates).tolist()))
        stats.update(
            alpha_value=module.log_alpha.exp().item(),
            target_entropy=entropy_target,
            num_gradient_updates=num_updates,
            replay_size=len(self.replay),
        )
        return stats

    def _autograd_step(self, module, batch: dict, optimizers: dict, entropy_target: float):
        """One critic, actor and temperature update, differentiated by autograd (the source)."""
        config = self.config
        alpha = module.log_alpha.detach().exp()
        with torch.no_grad():
            next_actions, next_logp = module.sample_actions(batch["next_obs"], self.generator)
            next_q = min_q(module.q_values(module.target_critics, batch["next_obs"], next_actions))
            targets = batch["rewards"] + config.gamma * (1.0 - batch["terminateds"]) * (
                next_q - alpha * next_logp
            )
        q_preds = critic_outputs(module.critics, batch["obs_actions"])
        critic_loss = td_loss(config.critic_loss, q_preds, targets, batch)
        optimizers["critic"].zero_grad(set_to_none=True)
        critic_loss.backward()
        optimizers["critic"].step()
        update_priorities(self.replay, batch, q_preds, targets)

        actions, logp = module.sample_actions(batch["obs"], self.generator)
        module.critics.requires_grad_(False)  # the actor loss needs no critic gradients
        q_actor = min_q(module.q_values(module.critics, batch["obs"], actions))
        actor_loss = (alpha * logp - q_actor).mean()
        optimizers["actor"].zero_grad(set_to_none=True)
        actor_loss.backward()
        optimizers["actor"].step()
        module.critics.requires_grad_(True)

        alpha_loss = -(module.log_alpha * (logp.detach() + entropy_target)).mean()
        optimizers["alpha"].zero_grad(set_to_none=True)
        alpha_loss.backward()
        optimizers["alpha"].step()

        soft_update(module.target_critics, module.critics, config.tau)
        return step_stats(critic_loss, actor_loss, alpha_loss, q_preds, logp)

    @torch.no_grad()
    def _manual_step(self, module, batch: dict, optimizers: dict, entropy_target: float):
        """``_autograd_step`` with the gradients by hand (``manual_gradients``): the same draws
        from the generator, the same losses, the same Adam steps."""
        config = self.config
        nets = self.manual_networks(module)
        alpha = module.log_alpha.exp()
        next_policy = tanh_gaussian(nets.actor.forward(batch["next_obs"]).output, self.generator)
        next_q = min_q(
            manual_gradients.q_forward(
                nets.target_critics, torch.cat([batch["next_obs"], next_policy.actions], dim=-1)
            )[1]
        )
        targets = batch["rewards"] + config.gamma * (1.0 - batch["terminateds"]) * (
            next_q - alpha * next_policy.logp
        )
        q_preds = manual_gradients.critic_step(
            nets.critics, optimizers["critic"], batch, targets, config.critic_loss
        )
        critic_loss = td_loss(config.critic_loss, q_preds, targets, batch)
        update_priorities(self.replay, batch, q_preds, targets)

        # The actor loss alpha * log pi(a|s) - min_i Q_i(s, a), then its gradient link by link.
        obs, size = batch["obs"], len(batch["obs"])
        saved = nets.actor.forward(obs)
        policy = tanh_gaussian(saved.output, self.generator)
        actions, logp = policy.actions, policy.logp
        grad_logp = (alpha / size).expand(size)
        q_actor, grad_actions = manual_gradients.action_gradient(
            nets.critics, obs, actions, torch.full_like(grad_logp, -1.0 / size)
        )
        actor_loss = (alpha * logp - min_q(q_actor)).mean()
        grad_actions = grad_actions + grad_logp[:, None] * 2 * actions / policy.squash
        grad_pre_tanh = grad_actions * (1 - actions * actions)
        grad_log_std = grad_pre_tanh * policy.noise * policy.std - grad_logp[:, None]
        in_bounds = (policy.raw_log_std >= LOG_STD_MIN) & (policy.raw_log_std <= LOG_STD_MAX)
        grad_out = torch.cat([grad_pre_tanh, grad_log_std * in_bounds], dim=-1)
        manual_gradients.adam_step(optimizers["actor"], nets.actor.backward(saved, grad_out)[0])

        alpha_loss = -(module.log_alpha * (logp + entropy_target)).mean()
        grad_log_alpha = -(logp + entropy_target).mean()
        manual_gradients.adam_step(optimizers["alpha"], [grad_log_alpha])

        nets.soft_update(config.tau)
        return step_stats(critic_loss, actor_loss, alpha_loss, q_preds, logp)
