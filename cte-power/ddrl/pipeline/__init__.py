"""The run pipeline, in order: ``experiment`` (pure data) -> ``rllib_config`` (validated
against RLlib, built) -> ``resources`` -> ``ray_session`` -> ``training`` -> ``results``."""
