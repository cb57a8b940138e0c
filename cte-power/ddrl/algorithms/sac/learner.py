"""The SAC update of RLlib's SAC learner, lean: many gradient updates per learner call.

Per update (as RLlib's ``_compute_loss_for_module_continuous``): critic loss (``critic_loss``) against
r + gamma * (1 - terminated) * (min_i Q'_i(s', a') - alpha * log pi(a'|s')), a' ~ pi(s');
actor loss alpha * log pi(a|s) - min_i Q_i(s, a); temperature loss
-log alpha * (log pi(a|s) + target entropy); then a soft update of the target critics.
"""

from __future__ import annotations

import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import DEFAULT_MODULE_ID

from ddrl.algorithms.networks import critic_outputs, min_q, soft_update
from ddrl.algorithms.offpolicy import LeanOffPolicyLearner, td_loss, update_priorities


def target_entropy(config, action_space) -> float:
    """``target_entropy`` of the config, or -|A| when 'auto' (RLlib's and the paper's default)."""
    if config.target_entropy in (None, "auto"):
        return -float(np.prod(action_space.shape))
    return float(config.target_entropy)


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
        # Summed as tensors: no device sync per update.
        totals = {
            k: torch.zeros((), device=self._device)
            for k in ("critic_loss", "actor_loss", "alpha_loss", "q_mean", "logp_mean")
        }
        for _ in range(num_updates):
            batch = self.replay.sample(config.train_batch_size_per_learner, self.generator)
            alpha = module.log_alpha.detach().exp()
            with torch.no_grad():
                next_actions, next_logp = module.sample_actions(batch["next_obs"], self.generator)
                next_q = min_q(
                    module.q_values(module.target_critics, batch["next_obs"], next_actions)
                )
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
            for name, value in (
                ("critic_loss", critic_loss),
                ("actor_loss", actor_loss),
                ("alpha_loss", alpha_loss),
                ("q_mean", q_preds[0].mean()),
                ("logp_mean", logp.mean()),
            ):
                totals[name] += value.detach()
        stats = {name: (total / num_updates).item() for name, total in totals.items()}
        stats.update(
            alpha_value=module.log_alpha.exp().item(),
            target_entropy=entropy_target,
            num_gradient_updates=num_updates,
            replay_size=len(self.replay),
        )
        return stats
