"""The benchmarks run end to end: the throughput benchmark writes its table, learner-time prints its
times (figures are not judged here: speed is measured by the benchmarks, not by timed tests)."""

import re
import subprocess
import sys

import pandas as pd
import pytest
from helpers import CTE_POWER, run_ddrl, run_script

from ddrl.paths import TRAININGS_DIR
from ddrl.pipeline import validation

pytestmark = pytest.mark.slow


def test_throughput_benchmark_writes_every_measure(tmp_path):
    output = tmp_path / "bench.csv"
    proc = run_script(
        CTE_POWER / "scripts" / "bench" / "throughput.py",
        "--algorithms",
        "SAC",
        "--rounds",
        "1",
        "--sampling-rounds",
        "2",
        "--seconds",
        "0.5",
        "--sampling-steps",
        "200",
        "--updates",
        "4",
        "--set",
        "training.actor_hiddens=[32]",
        "--set",
        "training.critic_hiddens=[32]",
        "--set",
        "reporting.min_sample_timesteps_per_iteration=64",
        "--output",
        output,
        timeout=900,  # a hang guard: under load (the CI machine busy besides) it took 400 s
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = pd.read_csv(output)
    measures = list(table["measure"])
    shipped = validation.load_experiment(TRAININGS_DIR / "pybullet-envs/ppo.yaml", "pybullet-envs")
    envs = shipped.rllib["env_runners"]["num_envs_per_env_runner"]
    assert measures[0] == "raw env, random actions, 1 process, 1 env"
    assert measures[1].startswith(f"raw env, random actions, 1 process, {envs} envs")
    sampling = table[table["measure"].str.startswith("sampling, 1 env runner (LeanEnvRunner)")]
    assert sampling["ratio"].gt(0).all() and sampling["target"].tolist() == [0.8, 0.95]
    assert sampling["measure"].tolist() == [
        "sampling, 1 env runner (LeanEnvRunner) x 1 env (SAC config), against 1 env",
        f"sampling, 1 env runner (LeanEnvRunner) x {envs} envs (PPO config), against its {envs} envs",
    ]
    assert any(m.startswith("SAC Stable-Baselines3 as installed") for m in measures)
    # SBX (SB3 in JAX), in its own venv's worker process, alternates with SB3 and ours
    assert any(m.startswith("SAC SBX (JAX) (") for m in measures), measures
    for against in ("SB3", "SBX"):
        row = table[table["measure"].str.match(f"SAC end to end .*against {against}$")].iloc[0]
        assert row["ratio"] > 0 and row["target"] == (1.3 if against == "SB3" else 1.0)
        update = table[table["measure"] == f"SAC update, ours, against {against}"].iloc[0]
        assert update["ratio"] > 0
    assert any(m.startswith("SAC peak memory") for m in measures)
    assert not any("reference" in m for m in measures), "the plain-PyTorch loops: --reference only"
    steps = table[table["unit"] == "env steps/s"]
    assert (steps["value"] > 0).all()
    assert "  SAC round (SBX): " in proc.stdout
    updates = table[table["unit"] == "updates/s"].set_index("measure")
    limit = updates.filter(like="at the FLOP limit", axis=0)["value"].iloc[0]
    against_limit = updates.filter(like="ours, against the FLOP limit", axis=0).iloc[0]
    assert 0 < against_limit["ratio"] and against_limit["target"] == 0.7
    # No comparison of the two rates here: under the suite's other worker the matmul round on 2
    # threads ran 15x slow once (CI, 2.9 updates/s "limit" against 42.6 measured); the
    # benchmark's ratios are for a quiet machine.
    assert limit > 0 and against_limit["value"] > 0
    assert (
        updates.filter(like="Stable-Baselines3, against the FLOP limit", axis=0)["ratio"].iloc[0]
        > 0
    )
    # SBX's update also as it trains, one update per train call, and ours against that
    per_call = updates.loc[
        "SAC update, SBX one update per train call (as it trains), against the FLOP limit"
    ]
    assert per_call["value"] > 0 and per_call["ratio"] > 0
    assert updates.loc["SAC update, ours, against SBX one update per train call", "ratio"] > 0
    memory = table[table["unit"] == "MiB"].iloc[0]
    assert 100 < memory["value"] < 8192
    assert "targets met:" in proc.stdout
    # every ratio comes with the machine it holds for: the CPU model and its matmul rate
    from ddrl.bench import machine

    assert (table["cpu_model"] == machine.cpu_model()).all() and (table["matmul_gflops"] > 0).all()
    assert (
        proc.stdout.startswith("machine: ") and f"machine: {machine.cpu_model()}, " in proc.stdout
    )


def test_throughput_without_sbx_installed_is_one_line_before_anything_runs(tmp_path):
    output = tmp_path / "bench.csv"
    proc = run_script(
        CTE_POWER / "scripts" / "bench" / "throughput.py", "--output", output,
        env={"DDRL_SBX_PYTHON": str(tmp_path / "no-venv" / "bin" / "python")}, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "make install-sbx" in proc.stderr
    assert "--peers sb3" in proc.stderr and "machine:" not in proc.stdout
    assert not output.exists()


def test_interleave_brackets_each_round_with_its_limit():
    from ddrl.bench import throughput

    # limit, measure, limit, measure, ..., closing limit: the machine slows, then speeds up
    speeds = iter([100, 90, 60, 45, 40, 190, 200])
    order = []

    def workload(name):
        def run():
            order.append(name)
            return next(speeds), 1.0

        return run

    rounds = throughput.interleave({"limit": workload("limit"), "measure": workload("measure")}, 3)
    assert order == ["limit", "measure"] * 3 + ["limit"]
    assert rounds.rates == {"limit": [100, 60, 40, 200], "measure": [90, 45, 190]}
    assert rounds.rate("limit") == pytest.approx(400 / 4) and rounds.rate(
        "measure"
    ) == pytest.approx(325 / 3)
    # each measure round against the mean of the limit rounds around it
    assert rounds.ratios("measure", "limit") == pytest.approx([90 / 80, 45 / 50, 190 / 120])
    assert rounds.ratio("measure", "limit") == pytest.approx(90 / 80)  # the median
    low, high = rounds.spread("measure", "limit")
    assert low <= 90 / 80 <= high


LEARNER_TIME = CTE_POWER / "scripts" / "bench" / "learner-time.py"


def test_learner_time_reports_seconds_per_update_and_per_iteration():
    """The shipped TD3 learner on the real humanoid's spaces: rounds of timed updates, and the
    learning time of an iteration (updates per env step x its env steps) for plot-time.py."""
    proc = run_script(
        LEARNER_TIME, "--config", "trainings/pybullet-envs/td3.yaml", "--device", "cpu",
        "--updates", 4, "--rounds", 2, "--transitions", 600, "--env-steps-per-iteration", 512,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "TD3 learner of trainings/pybullet-envs/td3.yaml on cpu" in out
    assert re.search(r"torch threads: \d+, [\d.]+ GFLOP/s float32 matmul", out), "the machine"
    assert "obs 44, actions 17, batch 256" in out, "the humanoid's spaces, the config's batch"
    assert out.count("ms per update") == 2
    per_update_ms = float(re.search(r"seconds per update: ([\d.]+) ms", out)[1])
    learn_s, updates = re.search(
        r"learning per iteration: ([\d.]+) s \((\d+) updates for 512", out
    ).groups()
    assert per_update_ms > 0 and int(updates) == 512
    assert float(learn_s) == pytest.approx(per_update_ms / 1000 * 512, rel=0.02, abs=0.01)


def test_learner_time_times_an_iteration_of_ppo_learning():
    """PPO: each round one iteration's learning (epochs of minibatches over a train batch of
    random episodes, through RLlib's learner connector), on a trial's learner threads (ppo.yaml:
    the driver's CPU and its runner's); --set reaches the learner (the autograd update here; the
    one by hand is held to it in tests/algorithms/test_ppo.py)."""
    fast_update = "false"
    import os

    proc = run_script(
        LEARNER_TIME, "--config", "trainings/pybullet-envs/ppo.yaml", "--device", "cpu",
        "--rounds", 2, "--episode-length", 100, "--set", "training.train_batch_size_per_learner=512",
        "--set", "training.num_epochs=2", "--set", f"training.fast_update={fast_update}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    threads = min(2, len(os.sched_getaffinity(0)))
    assert "PPO learner of trainings/pybullet-envs/ppo.yaml on cpu" in out
    assert f"torch threads: {threads}," in out, "a trial's learner threads"
    assert "obs 44, actions 17, batch 512" in out
    assert out.count("s of learning") == 2
    seconds = float(re.search(r"learning per iteration: ([\d.]+) s", out)[1])
    assert seconds > 0
    assert "2 epochs of minibatches of 256, about 4 updates, for 512 env steps" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--config", "trainings/pybullet-envs/ppo.yaml", "--updates", "3"],
            "--updates does not apply to PPO",
        ),
        (["--episode-length", "100"], "--episode-length does not apply to SAC"),
        (["--set", "training.nope=1"], "unknown key 'nope' at 'training' (from --set)"),
        (["--config", "trainings/pybullet-envs/nope.yaml"], "does not exist"),
        (["--config", "README.md"], "pass --toolkit"),
        (["--config", "README.md", "--toolkit", "gym"], "README.md is not valid YAML"),
        (["--obs-dim", "44"], "give both --obs-dim and --act-dim"),
        (["--updates", "0"], "--updates"),
        (["--transitions", "100", "--obs-dim", "4", "--act-dim", "2"], "below the batch of 256"),
    ],
)
def test_learner_time_bad_input_is_one_line(args, message):
    proc = run_script(LEARNER_TIME, *args)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr and not proc.stdout


def test_learner_time_runs_without_the_envs_toolkit_given_its_shapes():
    """On a GPU node without PyBullet: the file is read without its toolkit and the humanoid's
    shapes come from --obs-dim/--act-dim; without them, the missing toolkit is one line."""
    code = (
        "import runpy, sys\n"
        "sys.modules['pybullet_envs_gymnasium'] = sys.modules['pybullet'] = None  # not installed\n"
        "sys.argv = ['learner-time.py', *sys.argv[1:]]\n"
        f"runpy.run_path({str(LEARNER_TIME)!r}, run_name='__main__')\n"
    )
    args = ["--config", "trainings/pybullet-envs/sac.yaml", "--device", "cpu", "--updates", "2"]
    args += ["--rounds", "1", "--transitions", "300"]

    def run(*extra):
        return subprocess.run(
            [sys.executable, "-c", code, *args, *extra],
            cwd=CTE_POWER, capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    shaped = run("--obs-dim", "44", "--act-dim", "17")
    assert shaped.returncode == 0, shaped.stderr[-2000:]
    assert "SAC learner of trainings/pybullet-envs/sac.yaml on cpu" in shaped.stdout
    assert "obs 44, actions 17, batch 256" in shaped.stdout
    unshaped = run()
    assert unshaped.returncode == 2 and unshaped.stderr.count("\n") == 1, unshaped.stderr
    assert "needs the Python package 'pybullet_envs_gymnasium'" in unshaped.stderr


def test_raw_stepping_reports_each_process_and_their_sum(tmp_path):
    proc = run_script(
        CTE_POWER / "scripts" / "bench" / "raw-stepping.py", "--processes", "2", "--seconds", "0.5",
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    found = re.match(
        r"HumanoidBulletEnv-v0: ([\d,]+) env steps/s in 2 process\(es\) \(([\d,]+), ([\d,]+)\)",
        line,
    )
    assert found, line
    total, *each = (int(g.replace(",", "")) for g in found.groups())
    assert all(rate > 0 for rate in each) and abs(total - sum(each)) <= 2
    # through the command too (the script is then loaded by path; its processes still start)
    proc = run_ddrl("bench", "raw", "--processes", "2", "--seconds", "0.5", timeout=120)
    assert proc.returncode == 0 and "in 2 process(es)" in proc.stdout, proc.stderr[-3000:]
    bad = run_script(CTE_POWER / "scripts" / "bench" / "raw-stepping.py", "--env", "Nope-v0")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Nope-v0" in bad.stderr
