"""Old module names (the flat ``ddrl`` layout before it was grouped into folders) -> new ones.

Tune's experiment state and RLlib's checkpoints pickle classes and functions by module path, so
an experiment started before the regrouping names, say, ``ddrl.sac.SAC`` or
``ddrl.config.result_value``. This finder lets such names import as the module they moved to, so
old experiments still resume and old checkpoints still render. New code imports the new names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: old name -> new name, both under ``ddrl.``
MOVED = {
    "networks": "algorithms.networks",
    "replay": "algorithms.replay",
    "offpolicy": "algorithms.offpolicy",
    "ppo": "algorithms.ppo",
    "sac": "algorithms.sac",
    "td3": "algorithms.td3",
    "environments": "envs.toolkits",
    "old_gym": "envs.old_gym",
    "vector_actions": "envs.vector_actions",
    "unity": "envs.unity",
    "mlagents_protobuf": "envs.mlagents_protobuf",
    "experiment": "pipeline.experiment",
    "value_ranges": "pipeline.value_ranges",
    "resources": "pipeline.resources",
    "config": "pipeline.results",  # stoppers pickled as ddrl.config.result_value
    "callbacks": "pipeline.callbacks",
    "training": "pipeline.training",
    "results": "pipeline.results",
    "ray_runtime": "pipeline.ray_runtime",
    "summaries": "analysis.summaries",
    "search_results": "analysis.search_results",
    "scaling": "analysis.scaling",
    "scaling_model": "analysis.scaling_model",
    "plotting": "analysis.plotting",
    "prices": "analysis.prices",
    "benchmarks": "bench.throughput",
    "learning_bench": "bench.learning",
}


def new_name(fullname: str) -> str | None:
    """``ddrl.sac.learner`` -> ``ddrl.algorithms.sac.learner``; None for a name that did not move."""
    parts = fullname.split(".")
    if len(parts) < 2 or parts[0] != "ddrl" or parts[1] not in MOVED:
        return None
    return ".".join(["ddrl", MOVED[parts[1]], *parts[2:]])


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass  # already executed under its new name


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        target_name = new_name(fullname)
        if target_name is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(target_name))


def install() -> None:
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        # first: else the path finder would load ddrl.sac.learner from ddrl.sac's folder a second time
        sys.meta_path.insert(0, MovedModuleFinder())
