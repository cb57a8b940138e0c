"""SAC on RLlib's new API stack with the lean off-policy path (what ``algorithm: SAC`` trains).

- ``algorithm``: ``SACConfig``/``SAC``, subclasses of RLlib's, with separate actor and critic
  layer sizes and the lean training step of ``ddrl.algorithms.offpolicy``;
- ``rl_module``: a tanh-squashed Gaussian actor, one or two critics and their targets, the
  entropy temperature;
- ``learner``: the update of RLlib's SAC (automatic temperature; MSE critic loss by default, as the
  SAC paper and Stable-Baselines3, or RLlib's Huber with ``critic_loss: huber``), many per
  learner call.

RLlib's stock SAC stays available as ``algorithm: RLlibSAC`` (the slow reference).
"""

from ddrl.algorithms.sac.algorithm import SAC, SACConfig

__all__ = ["SAC", "SACConfig"]
