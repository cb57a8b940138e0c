"""Evaluation rounds that measure the policy, not which episodes happen to end first.

RLlib 2.60's evaluation has two biases (``SingleAgentEnvRunner.sample``):

- with several envs per evaluation runner, ``sample(num_episodes=N)`` keeps the first N episodes
  to *finish*: on a task where failing ends an episode, the short, failed ones;
- every round re-seeds the envs with the same seed, so every round starts from the same states.

``unbiased_evaluation(config)`` runs each evaluation runner's episodes one after another (one
env per evaluation runner, as Stable-Baselines3's ``evaluate_policy`` counts episodes per env)
and moves the seed on at every round (``EvaluationEnvRunner``).
"""

from __future__ import annotations

from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from ddrl.errors import UserError

#: How far the evaluation seed moves per round: beyond the per-runner offsets RLlib adds.
SEED_STRIDE = 10_007


class EvaluationEnvRunner(SingleAgentEnvRunner):
    """RLlib's env runner, whose episode-count rounds start from new seeded states each time."""

    def sample(self, *, num_episodes=None, **kwargs):
        episodes = super().sample(num_episodes=num_episodes, **kwargs)
        if num_episodes is not None and self._seed is not None:
            self._seed += SEED_STRIDE  # RLlib re-seeds the envs at the next round's reset
        return episodes


def unbiased_evaluation(config):
    """Switch an ``AlgorithmConfig``'s evaluation (if any) to ``EvaluationEnvRunner`` and one env
    per evaluation runner; refuse an evaluation that asks for several envs per runner."""
    if config.evaluation_interval is None or config.is_multi_agent or config.env_runner_cls:
        return config  # no evaluation, or not RLlib's single-agent env runner
    overrides = dict(config.evaluation_config or {})
    if config.evaluation_duration_unit == "episodes":
        envs = overrides.get("num_envs_per_env_runner", 1)
        if envs != 1:
            raise UserError(
                f"evaluation.evaluation_config.num_envs_per_env_runner is {envs}: an evaluation in "
                "episodes runs one env per evaluation runner (with several, the first episodes to "
                "end, the short ones, would be kept). Remove it, or add evaluation_num_env_runners."
            )
        overrides["num_envs_per_env_runner"] = 1
    overrides.setdefault("env_runner_cls", EvaluationEnvRunner)
    return config.evaluation(evaluation_config=overrides)
