"""Algorithm name (as written in configs) -> RLlib Algorithm class, imported on demand.

Importing one algorithm by module path avoids Tune's by-name lookup, which imports every
RLlib algorithm (DreamerV3 and its extra dependencies included).
"""

from __future__ import annotations

import importlib

from ddrl.errors import UserError, closest

#: name -> "module:ClassName"
ALGORITHMS: dict[str, str] = {
    "PPO": "ddrl.algorithms.ppo:PPO",  # ours: RLlib's PPO with one finiteness check per gradient step
    "RLlibPPO": "ray.rllib.algorithms.ppo:PPO",  # RLlib's stock PPO
    "SAC": "ddrl.algorithms.sac:SAC",  # ours: RLlib's SAC with the lean update path (fast)
    "RLlibSAC": "ray.rllib.algorithms.sac:SAC",  # RLlib's stock SAC, the slow reference
    "TD3": "ddrl.algorithms.td3:TD3",  # ours: removed from RLlib in 2.11
    "DDPG": "ddrl.algorithms.td3:DDPG",
    "IMPALA": "ray.rllib.algorithms.impala:IMPALA",  # RLlib's: asynchronous sampling, V-trace
    "APPO": "ray.rllib.algorithms.appo:APPO",  # RLlib's: IMPALA with PPO's clipped surrogate
}


def canonical_name(name: str) -> str:
    for known in ALGORITHMS:
        if known.lower() == str(name).lower():
            return known
    close = closest(str(name).upper(), ALGORITHMS)
    hint = f" Did you mean '{close}'?" if close else ""
    raise UserError(f"unknown algorithm '{name}'.{hint} Known algorithms: {', '.join(ALGORITHMS)}.")


def get_algorithm_class(name: str):
    module_name, class_name = ALGORITHMS[canonical_name(name)].split(":")
    return getattr(importlib.import_module(module_name), class_name)
