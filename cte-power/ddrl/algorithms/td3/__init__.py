"""TD3 and DDPG on RLlib's new API stack (removed from RLlib in 2.11; ours, modelled on TQC).

- ``algorithm``: ``TD3Config``/``TD3`` (SAC subclasses) and ``DDPGConfig``/``DDPG``; the lean
  training step (sample, then many updates in one learner call);
- ``rl_module``: deterministic tanh actor, one or two critics and their targets;
- ``learner``: the update (target smoothing, min of twin targets, delayed actor/targets).

The lean training step and the replay buffer live in ``ddrl.algorithms.offpolicy`` and ``ddrl.algorithms.replay``, for
any off-policy algorithm whose learner has a ``lean_update``.
"""

from ddrl.algorithms.td3.algorithm import DDPG, TD3, DDPGConfig, TD3Config

__all__ = ["TD3", "TD3Config", "DDPG", "DDPGConfig"]
