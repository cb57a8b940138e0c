"""The agents the repository ships (cte-power/trained-agents/): each comes from the committed
walking run, at an iteration its curve holds, trained with the recipe as committed, and plays
the episodes its numbers claim (seeded, deterministic, with a margin that holds on any CPU)."""

import json

import numpy as np
import pytest
import yaml
from helpers import CTE_POWER

from ddrl import rendering, trained_agents
from ddrl.analysis import walking
from ddrl.envs import toolkits
from ddrl.pipeline import validation

AGENTS = sorted(p for p in trained_agents.AGENTS_DIR.glob("*") if trained_agents.is_agent(p))
RUN = CTE_POWER / "results" / "case-study" / "walking-humanoid"
RECIPE = CTE_POWER / "trainings" / "pybullet-envs" / "walking-humanoid-ppo.yaml"


@pytest.fixture(params=AGENTS or [None], ids=lambda p: p.name if p else "none")
def agent(request):
    if request.param is None:
        pytest.skip("no agent shipped in this checkout")
    return trained_agents.ShippedAgent(request.param)


def test_a_shipped_agent_matches_its_run_and_recipe(agent):
    spec = agent.spec
    curve = walking.read_curve(RUN / "curve.csv")
    row = curve[curve["training_iteration"] == spec["training_iteration"]].iloc[-1]
    assert spec["env_steps"] == int(row["env_steps"])
    assert spec["mean_return_last_100"] == round(float(row["mean_return"]), 1)
    ran = yaml.safe_load((RUN / "experiment.yaml").read_text())
    recipe = validation.load_experiment(RECIPE, "pybullet-envs").to_dict()
    for group in ("env", "algorithm", "training", "rl_module"):
        assert ran[group] == recipe[group], group  # the learning settings as the recipe has them
    assert ran["env_runners"]["observation_filter"] == "MeanStdFilter"


def test_a_shipped_agent_plays_the_episodes_it_claims(agent):
    env = toolkits.make_env("pybullet-envs", agent.spec["env"])
    try:
        claimed = agent.spec["episodes"]
        played = rendering.play(
            env, agent, len(claimed), None, claimed[0]["seed"], False, lambda f: None
        )
    finally:
        env.close()
    distance = np.mean([e["distance"] for e in played])
    claimed_distance = np.mean([e["distance"] for e in claimed])
    # the same seeds on another CPU may round differently; the physics then drifts a little
    assert distance == pytest.approx(claimed_distance, rel=0.25, abs=0.5)
    if agent.spec.get("walks"):
        assert distance >= trained_agents.WALKS, "an agent shipped as walking walks 5 m on average"
    else:
        assert claimed_distance < trained_agents.WALKS, "an agent that walks is said to"
    assert json.dumps(agent.spec)  # plain JSON: nothing of ours needed to read it


def test_render_plays_the_most_trained_agent_first(tmp_path, monkeypatch):
    monkeypatch.setattr(trained_agents, "AGENTS_DIR", tmp_path)
    for name, steps, exported in (("a-3.5m", 3_523_176, "2026-12-06"), ("b-14m", 14_000_000, "2026-12-06"),
                                  ("c-other-toolkit", 99_000_000, "2026-12-07")):  # fmt: skip
        folder = tmp_path / name
        folder.mkdir()
        toolkit = "gym" if name.startswith("c") else "pybullet-envs"
        spec = {"toolkit": toolkit, "env_steps": steps, "exported": exported}
        (folder / trained_agents.SPEC).write_text(json.dumps(spec))
        (folder / trained_agents.WEIGHTS).write_bytes(b"")
    assert [p.name for p in trained_agents.shipped("pybullet-envs")] == ["b-14m", "a-3.5m"]
