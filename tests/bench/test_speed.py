"""What the speed work relies on, checked without timing anything (speed is measured by
scripts/bench/throughput.py): the FLOP count of an update is what torch counts on the real
update, the learner takes the trial's idle CPUs, the packed replay buffer hands out the critics'
input as a view, and the scaling model fits, predicts and validates."""

import os

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch
from helpers import CTE_POWER, load_script
from torch.utils.flop_counter import FlopCounterMode

from ddrl.algorithms.replay import TransitionBuffer
from ddrl.algorithms.sac import SACConfig
from ddrl.algorithms.td3 import DDPGConfig, TD3Config
from ddrl.algorithms.threads import learner_threads
from ddrl.analysis import scaling, scaling_model
from ddrl.bench import throughput

OBS = gym.spaces.Box(-1, 1, (7,), np.float32)
ACT = gym.spaces.Box(-1, 1, (3,), np.float32)
PLOT_TIME = CTE_POWER / "scripts" / "plot" / "plot-time.py"
THESIS = CTE_POWER / "results" / "humanoid" / "thesis-humanoid-iteration-times.csv"


def transitions(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 7)).astype(np.float32)
    return {
        "obs": obs, "next_obs": rng.normal(size=(n, 7)).astype(np.float32),
        "actions": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        "rewards": rng.normal(size=n).astype(np.float32), "terminateds": np.zeros(n, np.float32),
    }  # fmt: skip


@pytest.mark.parametrize(
    "name, config_class, extra",
    [("SAC", SACConfig, {}), ("TD3", TD3Config, {"policy_delay": 2}), ("DDPG", DDPGConfig, {})],
)
def test_update_flops_are_what_torch_counts_on_the_real_update(name, config_class, extra):
    training = {
        "actor_hiddens": [48, 40],
        "critic_hiddens": [24, 32],
        "train_batch_size_per_learner": 16,
        "num_steps_sampled_before_learning_starts": 0,
        **extra,
    }
    algo_config = (
        config_class()
        .environment(observation_space=OBS, action_space=ACT)
        .training(**training)
        .env_runners(num_env_runners=0)
    )
    learner = algo_config.build_learner()
    learner.lean_update(transitions(32), num_updates=0)
    with FlopCounterMode(display=False) as counter:
        learner.lean_update(None, num_updates=2)  # TD3: one delayed actor update in two
    training["twin_q"] = algo_config.twin_q
    assert counter.get_total_flops() / 2 == throughput.update_flops(name, 7, 3, training)


@pytest.mark.parametrize(
    "settings, threads",
    [
        ({"num_env_runners": 0}, 1),
        ({"num_env_runners": 1}, 2),
        ({"num_env_runners": 1, "num_cpus_per_env_runner": 0.5}, 2),  # its core idles too
        ({"num_env_runners": 64}, "all"),  # never more than this machine's CPUs
    ],
)
def test_learner_takes_the_cpus_its_trial_leaves_idle_while_learning(settings, threads):
    cpus = len(os.sched_getaffinity(0))
    expected = cpus if threads == "all" else min(threads, cpus)
    assert learner_threads(SACConfig().env_runners(**settings)) == expected
    assert learner_threads(SACConfig().learners(num_learners=1)) is None


def test_learner_build_sets_its_threads():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        SACConfig().environment(observation_space=OBS, action_space=ACT).training(
            actor_hiddens=[8], critic_hiddens=[8]
        ).env_runners(num_env_runners=1).build_learner()
        assert torch.get_num_threads() == min(2, len(os.sched_getaffinity(0)))
    finally:
        torch.set_num_threads(before)


def test_packed_replay_rows_give_each_field_and_the_critic_input():
    buffer = TransitionBuffer(capacity=10)
    data = transitions(6, seed=3)
    buffer.add(data)
    batch = buffer.sample(32, torch.Generator().manual_seed(0))
    assert batch["obs"].shape == (32, 7) and batch["rewards"].shape == (32,)
    assert torch.equal(batch["obs_actions"], torch.cat([batch["obs"], batch["actions"]], dim=1))
    for name, values in data.items():  # each sampled row is one stored transition, fields aligned
        stored = torch.as_tensor(values)
        assert torch.equal(buffer.storage[name][:6], stored)
    stored_rows = buffer.rows[:6]
    sampled = buffer.sample(8, torch.Generator().manual_seed(1))
    for obs, reward in zip(sampled["obs"], sampled["rewards"]):  # fields of one row stay together
        (match,) = torch.nonzero((stored_rows[:, :7] == obs).all(dim=1))
        assert stored_rows[match, buffer.columns["rewards"]] == reward


def synthetic(model: scaling_model.IterationModel, runners) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "algorithm": "SAC",
            "series": "CPU only",
            "source": "ours",
            "num_env_runners": runners,
            "iteration_time_s": model.iteration_time(runners),
            "env_steps_per_iter": 1000.0,
        }
    )


@pytest.mark.parametrize(
    "name, truth",
    [
        ("amdahl", scaling_model.IterationModel(2.0, 30.0)),
        ("overhead", scaling_model.IterationModel(2.0, 30.0, per_runner_s=0.25)),
        ("power", scaling_model.IterationModel(0.0, 30.0, exponent=0.8)),
    ],
)
def test_each_model_recovers_its_own_coefficients(name, truth):
    fitted = scaling_model.fit(synthetic(truth, [1, 2, 4, 8, 16]), name)
    assert fitted.learn_s == pytest.approx(truth.learn_s, abs=1e-6)
    assert fitted.sample_s == pytest.approx(truth.sample_s)
    assert fitted.per_runner_s == pytest.approx(truth.per_runner_s, abs=1e-9)
    assert fitted.exponent == pytest.approx(truth.exponent)


def test_measured_breakdown_is_used_and_a_gpu_learner_replaces_it():
    truth = scaling_model.IterationModel(10.0, 8.0, per_runner_s=0.5)
    rows = synthetic(truth, [1, 2, 4])
    rows["sampling_s"] = rows["iteration_time_s"] - 10.0  # the rest: learning, sync, overhead
    # 0 runners (the driver samples, a different setup) is left out of a fit with runners
    driver = rows.iloc[:1].assign(num_env_runners=0, iteration_time_s=50.0, sampling_s=45.0)
    fitted = scaling_model.fit(pd.concat([driver, rows]), "overhead")
    assert fitted.learn_s == pytest.approx(10.0) and fitted.sample_s == pytest.approx(8.0)
    assert fitted.per_runner_s == pytest.approx(0.5)
    predicted = scaling_model.predict(fitted, 64, gpu_learn_s=1.0)
    cpu = predicted[predicted["learner"] == "CPU learner"].set_index("num_env_runners")
    gpu = predicted[predicted["learner"] == "GPU learner"].set_index("num_env_runners")
    assert cpu.loc[1, "iteration_time_s"] == pytest.approx(18.5)
    assert gpu.loc[1, "iteration_time_s"] == pytest.approx(9.5)
    assert cpu.loc[4, "speedup"] == pytest.approx(18.5 / (10 + 2 + 2))
    # 16 runners + the driver need a second 16-vCPU instance: the cost per env step jumps there
    per_hour = cpu["usd_per_million_env_steps"] / cpu["iteration_time_s"]
    assert per_hour.loc[16] == pytest.approx(2 * per_hour.loc[15])


def test_too_few_runner_counts_is_a_clear_error():
    from ddrl.errors import UserError

    with pytest.raises(UserError, match="3 or more different numbers of env runners"):
        scaling_model.fit(synthetic(scaling_model.IterationModel(1, 1), [1, 2]), "overhead")


def test_validation_on_the_thesis_tables_reports_every_predicted_run():
    timings = scaling.add_speedup(scaling.timings_from_thesis(pd.read_csv(THESIS)))
    errors = {name: scaling_model.validate(timings, 8, name) for name in scaling_model.MODELS}
    power = errors["power"]
    assert set(power["algorithm"]) == {"PPO", "SAC", "TD3"}
    assert (power["num_env_runners"] > 8).all() and len(power) == len(
        timings.query("num_env_runners > 8")
    )
    mean_error = {name: table["error"].abs().mean() for name, table in errors.items()}
    assert mean_error["power"] == min(mean_error.values()), "the default is the best-validated"


def test_plot_time_predicts_and_validates(tmp_path, capsys):
    script = load_script(PLOT_TIME)
    assert (
        script.main(
            ["--thesis", "--algorithms", "TD3", "--predict", "32", "--validate", "8"]
            + ["--output-dir", str(tmp_path)]
        )
        == 0
    )
    predictions = pd.read_csv(tmp_path / "prediction-td3.csv")
    assert set(predictions["series"]) == {"CPU only", "with GPU"}
    assert predictions["num_env_runners"].max() == 32
    assert (tmp_path / "prediction-td3.png").is_file()
    validation = pd.read_csv(tmp_path / "scaling-validation-8.csv")
    assert set(validation["model"]) == set(scaling_model.MODELS)
    assert "mean / median absolute error per model" in capsys.readouterr().out


def test_a_measured_gpu_learner_is_drawn_for_our_runs_only(tmp_path):
    """--gpu-learn-s is our learner's time on a GPU: it adds a GPU-learner line to our series,
    never to the thesis's (its GPU runs are a series of their own)."""
    ours = CTE_POWER / "results" / "humanoid" / "scaling-sac-2cores.csv"
    args = [str(ours), "--thesis", "--algorithms", "SAC", "--predict", "16"]
    assert (
        load_script(PLOT_TIME).main(
            args + ["--gpu-learn-s", "SAC=2.0", "--output-dir", str(tmp_path)]
        )
        == 0
    )
    predictions = pd.read_csv(tmp_path / "prediction-sac.csv")
    lines = predictions.groupby(["source", "series"])["learner"].unique().map(sorted).to_dict()
    assert lines == {
        ("ours", "CPU only"): ["CPU learner", "GPU learner"],
        ("thesis", "CPU only"): ["CPU learner"],
        ("thesis", "with GPU"): ["CPU learner"],
    }
    ours_rows = predictions[predictions["source"] == "ours"].set_index(
        ["learner", "num_env_runners"]
    )
    cpu, gpu = ours_rows.loc[("CPU learner", 1)], ours_rows.loc[("GPU learner", 1)]
    assert gpu["iteration_time_s"] < cpu["iteration_time_s"], "2 s of learning replaces ~20 s"


def test_plot_time_bad_gpu_time_is_one_line(tmp_path, capsys):
    assert (
        load_script(PLOT_TIME).main(["--thesis", "--predict", "8", "--gpu-learn-s", "SAC=fast"])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gpu-learn-s 'SAC=fast': expected NAME=NUMBER" in err[0]


def test_summaries_keep_per_iteration_timers_and_scale_per_call_ones():
    from ddrl.analysis.summaries import per_iteration_timers

    # RLlib's per-call moving averages: 16 calls of 1.2 s make a 20 s iteration
    per_call = {"sampling_s": 0.15, "learning_s": 1.05, "sync_s": 0.002, "time_this_iter_s": 20.0}
    # our lean step's sums over the same iteration
    summed = {"sampling_s": 2.4, "learning_s": 17.0, "sync_s": 0.03, "time_this_iter_s": 20.0}
    assert not per_iteration_timers(per_call, calls=16)
    assert per_iteration_timers(summed, calls=16)
    assert not per_iteration_timers(summed, calls=1)  # one call: either reading is the same
