"""The TD3/DDPG update, lean: many gradient updates per learner call, metrics once per call.

RLlib's stock off-policy path runs a connector pipeline, a metrics reduction and an episode
replay sample for every single gradient update (about 90-150 ms each on 2 cores). Here the
algorithm hands the learner the new transitions and a number of updates; the learner keeps the
replay buffer and loops in plain PyTorch.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from ray.rllib.core.rl_module.rl_module import DEFAULT_MODULE_ID

from ddrl.algorithms import manual_gradients
from ddrl.algorithms.networks import SoftUpdate, critic_outputs, min_q, soft_update
from ddrl.algorithms.offpolicy import LeanOffPolicyLearner, td_loss, update_priorities


# ------------------------------------------------------------------- the TD3 mechanisms
def smoothed_target_actions(
    actions: torch.Tensor,
    noise_std: float,
    noise_clip: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Target policy smoothing: add clipped Gaussian noise, keep the result within [-1, 1]."""
    if noise_std <= 0:
        return actions
    noise = torch.randn(actions.shape, generator=generator, device=actions.device) * noise_std
    return (actions + noise.clamp(-noise_clip, noise_clip)).clamp(-1.0, 1.0)


def td_targets(
    module, batch: dict, gamma: float, noise_std: float, noise_clip: float, generator=None
) -> torch.Tensor:
    """r + gamma * (1 - terminated) * min_i Q'_i(s', smoothed mu'(s')) (one critic: DDPG)."""
    with torch.no_grad():
        next_actions = smoothed_target_actions(
            module.target_actor(batch["next_obs"]), noise_std, noise_clip, generator
        )
        next_q = min_q(module.q_values(module.target_critics, batch["next_obs"], next_actions))
        return batch["rewards"] + gamma * (1.0 - batch["terminateds"]) * next_q


class ManualTD3Networks(NamedTuple):
    actor: manual_gradients.ManualMLP
    critics: list[manual_gradients.ManualMLP]
    soft_update: SoftUpdate  # both target networks


class TD3TorchLearner(LeanOffPolicyLearner):
    def optimizer_groups(self, module, config):
        return [
            ("critic", list(module.critics.parameters()), config.critic_lr),
            ("actor", list(module.actor.parameters()), config.actor_lr),
        ]

    @property
    def td3_module(self):
        return self._module[DEFAULT_MODULE_ID].unwrapped()

    def build_manual_networks(self, module) -> ManualTD3Networks:
        activation = self.config.hidden_activation
        return ManualTD3Networks(
            actor=manual_gradients.ManualMLP(module.actor, activation),
            critics=manual_gradients.mlps(module.critics, activation),
            soft_update=SoftUpdate(
                (module.target_actor, module.actor), (module.target_critics, module.critics)
            ),
        )

    def lean_update(self, transitions: dict | None, num_updates: int) -> dict:
        """Store new transitions, then run ``num_updates`` critic updates (and the delayed actor ones)."""
        if not self.store_and_check_ready(transitions, num_updates):
            return {}
        config = self.config
        batch_size = config.train_batch_size_per_learner
        module = self.td3_module
        module.uniform_exploration.fill_(0.0)  # learning has started: explore around the actor
        critic_opt = self.get_optimizer(DEFAULT_MODULE_ID, "critic")
        actor_opt = self.get_optimizer(DEFAULT_MODULE_ID, "actor")
        critic_losses, actor_losses, q_means = [], [], []
        critic_updates = int(module.num_critic_updates)  # a Python int: no tensor sync per update
        step = self._manual_step if config.fast_update else self._autograd_step
        for _ in range(num_updates):
            batch = self.replay.sample(batch_size, self.generator)
            critic_updates += 1
            losses = step(
                module, batch, critic_opt, actor_opt, critic_updates % config.policy_delay == 0
            )
            critic_losses.append(losses["critic_loss"].detach())
            q_means.append(losses["q_mean"].detach())
            if "actor_loss" in losses:
                actor_losses.append(losses["actor_loss"].detach())
        module.num_critic_updates.fill_(critic_updates)
        module.num_actor_updates += len(actor_losses)
        stats = {
            "critic_loss": torch.stack(critic_losses).mean().item(),
            "q_mean": torch.stack(q_means).mean().item(),
            "num_gradient_updates": num_updates,
            "num_critic_updates_lifetime": int(module.num_critic_updates),
            "num_actor_updates_lifetime": int(module.num_actor_updates),
            "replay_size": len(self.replay),
        }
        if actor_losses:
            stats["actor_loss"] = torch.stack(actor_losses).mean().item()
        return stats

    def _targets(self, module, batch: dict) -> torch.Tensor:
        config = self.config
        return td_targets(
            module,
            batch,
            config.gamma,
            config.target_noise,
            config.target_noise_clip,
            self.generator,
        )

    def _autograd_step(self, module, batch, critic_opt, actor_opt, update_actor: bool) -> dict:
        """One critic update, and the delayed actor and target updates, by autograd (the source)."""
        config = self.config
        targets = self._targets(module, batch)
        q_preds = critic_outputs(module.critics, batch["obs_actions"])
        critic_loss = td_loss(config.critic_loss, q_preds, targets, batch)
        critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        critic_opt.step()
        update_priorities(self.replay, batch, q_preds, targets)
        losses = {"critic_loss": critic_loss, "q_mean": q_preds[0].mean()}
        if update_actor:
            module.critics.requires_grad_(False)  # the actor loss needs no critic gradients
            actor_loss = -module.q_values(
                module.critics[:1], batch["obs"], module.actor(batch["obs"])
            )[0].mean()
            actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            actor_opt.step()
            module.critics.requires_grad_(True)
            soft_update(module.target_actor, module.actor, config.tau)
            soft_update(module.target_critics, module.critics, config.tau)
            losses["actor_loss"] = actor_loss
        return losses

    @torch.no_grad()
    def _manual_step(self, module, batch, critic_opt, actor_opt, update_actor: bool) -> dict:
        """``_autograd_step`` with the gradients by hand (``manual_gradients``)."""
        config = self.config
        nets = self.manual_networks(module)
        targets = self._targets(module, batch)
        q_preds = manual_gradients.critic_step(
            nets.critics, critic_opt, batch, targets, config.critic_loss
        )
        update_priorities(self.replay, batch, q_preds, targets)
        losses = {
            "critic_loss": td_loss(config.critic_loss, q_preds, targets, batch),
            "q_mean": q_preds[0].mean(),
        }
        if update_actor:
            # The actor loss -Q_1(s, mu(s)), differentiated through the first critic.
            obs, size = batch["obs"], len(batch["obs"])
            saved = nets.actor.forward(obs)
            q, grad_actions = manual_gradients.action_gradient(
                nets.critics[:1],
                obs,
                saved.output,
                torch.full((size,), -1.0 / size, device=obs.device),
            )
            manual_gradients.adam_step(actor_opt, nets.actor.backward(saved, grad_actions)[0])
            nets.soft_update(config.tau)
            losses["actor_loss"] = -q[0].mean()
        return losses
