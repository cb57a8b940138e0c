"""The Slurm jobs on a real Slurm cluster (slurmctld + 2 slurmd on this machine)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import CTE_POWER, TINY_PPO, TINY_SAC, only_trial, results_of
from slurm_cluster import SlurmCluster, why_unavailable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("slurm"),  # one worker runs them: the cluster starts once
    pytest.mark.skipif(why_unavailable() is not None, reason=str(why_unavailable())),
]

# the train-script arguments of TINY_* without --config (each job names its own config)
TINY_PPO_SETS = TINY_PPO[2:]
TINY_SAC_SETS = TINY_SAC[2:]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except Exception as err:
        cluster.stop()
        pytest.skip(f"Slurm could not start here: {err}")
    yield cluster
    cluster.stop()


@pytest.fixture
def job_env(tmp_path):
    """Results, logs, tokens and Ray temp dirs of the jobs go to this test's folder (sbatch
    exports the env)."""
    return {
        "DDRL_RESULTS_DIR": str(tmp_path / "results"),
        "DDRL_TOKEN_DIR": str(tmp_path / "tokens"),
        "DDRL_NODE_IP": "127.0.0.2",  # both "nodes" are this host: pin Ray to a loopback address
        "DDRL_JOB_LOGS": str(tmp_path / "logs"),
    }


def wait_for_iterations(
    slurm, job_env: dict, job: str, count: int, name: str = "ppo-humanoid", restart: int = 0,
    timeout: float = 240,
):  # fmt: skip
    """Until the job's log shows ``count`` iterations of its ``restart``-th start (the job must
    stay pending or running): each start's log begins "ddrl: ... (job N, restart K)"."""
    deadline = time.time() + timeout
    banner = f", restart {restart})"
    while job_log(job_env, name, job).partition(banner)[2].count("\niter ") < count:
        # between two starts the job is requeued (REQUEUED, PENDING), never ended
        ended = slurm.state(job).get("JobState") in SlurmCluster.ENDED
        assert time.time() < deadline and not ended, job_log(job_env, name, job) + job_log(
            job_env, name, job, "err"
        )
        time.sleep(0.5)


def job_log(job_env: dict, name: str, job_id: str, stream: str = "out") -> str:
    path = Path(job_env["DDRL_JOB_LOGS"]) / stream / f"{name}-{job_id}.{stream}"
    return path.read_text() if path.exists() else ""


def test_sac_job_completes_with_log_results_and_checkpoint(slurm, job_env, tmp_path):
    job = slurm.sbatch(
        str(CTE_POWER / "jobs" / "pybullet-envs/sac.sh"),
        *TINY_SAC_SETS,
        "--set",
        "stop.iterations=2",
        cwd=tmp_path,
        env=job_env,
    )
    info = slurm.wait(job, timeout=300)
    out = job_log(job_env, "sac-humanoid", job)
    assert info["JobState"] == "COMPLETED", out + job_log(job_env, "sac-humanoid", job, "err")
    assert f"the Slurm allocation of job {job}" in out and "SLURM_CPUS_PER_TASK=2" in out, (
        "Ray sized to the allocation"
    )
    experiment = Path(job_env["DDRL_RESULTS_DIR"]) / "pybullet-envs" / f"sac-{job}"
    trial = only_trial(experiment)
    assert [r["training_iteration"] for r in results_of(trial)] == [1, 2]
    assert list(trial.glob("checkpoint_*/rllib_checkpoint.json"))


def test_job_submitted_from_another_directory_logs_where_the_readme_says(slurm, job_env, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    default_logs = {k: v for k, v in job_env.items() if k != "DDRL_JOB_LOGS"}
    job = slurm.sbatch(
        str(CTE_POWER / "jobs" / "pybullet-envs" / "ppo.sh"),
        *TINY_PPO_SETS,
        "--set",
        "stop.iterations=1",
        cwd=elsewhere,
        env=default_logs,
    )
    info = slurm.wait(job, timeout=300)
    logs = [CTE_POWER / "jobs" / s / f"ppo-humanoid-{job}.{s}" for s in ("out", "err")]
    out, err = (path.read_text() if path.exists() else "" for path in logs)
    for path in logs:  # the one test that writes into the repository's jobs/out/ and jobs/err/
        path.unlink(missing_ok=True)
    assert info["JobState"] == "COMPLETED", out + err + str(info)
    assert "iter    1 |" in out
    pointer = (elsewhere / f"slurm-ppo-humanoid-{job}.out").read_text()
    assert f"logs to {CTE_POWER}/jobs/out/ppo-humanoid-{job}.out" in pointer
    assert (Path(job_env["DDRL_RESULTS_DIR"]) / "pybullet-envs" / f"ppo-{job}").is_dir()


def test_learning_benchmark_array_runs_one_run_per_task(slurm, job_env, tmp_path):
    pytest.importorskip("stable_baselines3")
    bench_args = (
        "--algorithms SAC --envs InvertedPendulumBulletEnv-v0 --seeds 0 --budget SAC=600 "
        "--eval-every 600 --eval-episodes 1"
    )
    job = slurm.sbatch(
        str(CTE_POWER / "jobs" / "bench/learning-benchmark.sh"),
        "--output-dir",
        str(tmp_path / "runs"),
        cwd=tmp_path,
        env={**job_env, "BENCH_ARGS": bench_args},
        options=("--array=0-1",),
    )
    for task in (0, 1):
        info = slurm.wait(f"{job}_{task}", timeout=300)
        assert info["JobState"] == "COMPLETED", job_log(
            job_env, "learning-benchmark", info.get("JobId", job)
        ) + str(info)
    names = sorted(p.name for p in (tmp_path / "runs").glob("*.csv"))
    assert names == [
        "InvertedPendulumBulletEnv-v0-SAC-ours-seed0.csv",
        "InvertedPendulumBulletEnv-v0-SAC-sb3-seed0.csv",
    ]


def ray_step_on(slurm, job: str, node: str) -> str:
    """The id of the job's step that runs a Ray node on `node`. The job starts its nodes' steps
    at once, so under load Slurm may number node2's step 0: kill by node, not by number."""
    listing = slurm.run(["squeue", "--steps", "--jobs", job, "--noheader", "--format", "%i %N"])
    steps = [line.split() for line in listing.stdout.splitlines() if line.strip()]
    (step,) = [s for s, nodes in steps if nodes == node and s.split(".")[1].isdigit()]
    return step


def test_two_node_ppo_job_keeps_others_out_and_resumes_on_a_whole_allocation_after_losing_a_node(
    slurm, job_env, tmp_path
):
    """The 2-node PPO job: its Ray cluster refuses clients without the job's token; a worker node
    dies mid-run (node2's srun step killed); the job checkpoints, requeues itself, and resumes on
    both nodes, with env runners on each, losing at most one iteration."""
    # noticing a lost node takes the run a few seconds (2-3 iterations here), and the token probes
    # some more: a stop well beyond leaves the requeued job work to resume, however fast the
    # iterations (at 6, a faster PPO update ended the first run at its stop)
    job = slurm.sbatch(
        str(CTE_POWER / "jobs" / "distributed/ppo-2nodes.sh"),
        *TINY_PPO_SETS,
        "--set", "stop.iterations=40",
        "--set", "checkpoint.every=2",
        cwd=tmp_path,
        env=job_env,
    )  # fmt: skip

    def logs() -> str:
        return job_log(job_env, "ppo-2nodes", job) + job_log(job_env, "ppo-2nodes", job, "err")

    report = Path(job_env["DDRL_JOB_LOGS"]) / "out" / f"ppo-2nodes-{job}.cluster.json"
    deadline = time.time() + 240
    while (
        not report.exists()
        and time.time() < deadline
        and slurm.state(job).get("JobState") in ("PENDING", "RUNNING")
    ):
        time.sleep(1)
    assert report.exists(), logs()
    cluster = json.loads(report.read_text())
    assert len(cluster["nodes"]) == 2 and cluster["address"].endswith(
        f":{20000 + int(job) % 1000}"
    ), cluster

    # While the job runs, clients without its token are refused, and (the control) one with it connects.
    token = Path(job_env["DDRL_TOKEN_DIR"]) / f"ddrl-job-{job}.token"
    assert token.exists() and token.stat().st_mode & 0o077 == 0, (
        "the token file is readable only by its user"
    )
    attempts = {
        "wrong token": {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64},
        "no token": {"RAY_AUTH_MODE": "disabled"},
        "the job's token": {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)},
    }
    connect = f"import ray; ray.init(address='{cluster['address']}', _node_ip_address='127.0.0.2'); print('CONNECTED', len(ray.nodes()))"
    probes = {
        name: subprocess.Popen(
            [sys.executable, "-c", connect],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | auth,
        )
        for name, auth in attempts.items()
    }
    outcome = {name: probe.communicate(timeout=120)[0] for name, probe in probes.items()}
    assert "CONNECTED 2" in outcome["the job's token"], outcome["the job's token"][-2000:]
    for name in ("wrong token", "no token"):
        assert "CONNECTED" not in outcome[name] and probes[name].returncode != 0, name

    wait_for_iterations(slurm, job_env, job, 3, name="ppo-2nodes", timeout=300)
    slurm.run(["scancel", "--signal=KILL", ray_step_on(slurm, job, "node2")])  # a worker node dies

    info = slurm.wait(job, timeout=900)
    out = job_log(job_env, "ppo-2nodes", job)
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "1", logs()
    # the driver sees its trial fail with the node, or the watch sees node2's srun step end first
    assert "Ray lost 1 node(s)" in out or "lost the Ray node on node2" in out, out
    assert f"requeueing job {job}" in out
    first_run, second_run = out.split("requeueing job")
    before = [int(line.split()[1]) for line in first_run.splitlines() if line.startswith("iter ")]
    after = [int(line.split()[1]) for line in second_run.splitlines() if line.startswith("iter ")]
    assert before[-1] < 40, f"the first run reached its stop before it lost the node: {before}"
    assert after[-1] == 40 and "Ray cluster up: 2 node(s)" in second_run, (before, after)
    assert "attached to the Ray cluster" in second_run and "Ray cluster stopped" in second_run
    # lost: the iterations done again after the resume (those since the stop's checkpoint)
    redone = before[-1] + 1 - after[0]
    assert 0 <= redone <= 1, (before, after)

    # the resumed run's env runners ran on both nodes of its new Ray cluster
    results = results_of(
        only_trial(Path(job_env["DDRL_RESULTS_DIR"]) / "pybullet-envs" / f"ppo-{job}")
    )
    node_ids = {n["node_id"] for n in json.loads(report.read_text())["nodes"]}
    placement = results[-1]["placement"]
    assert set(placement["env_runner_nodes"].split(",")) == node_ids, (placement, node_ids)
    assert placement["driver_node"] in node_ids
    assert not list(Path(job_env["DDRL_TOKEN_DIR"]).glob("*.token")), (
        "the job's token is removed on exit"
    )


def test_search_job_runs_trials_on_every_node_and_summarizes(slurm, job_env, tmp_path):
    job = slurm.sbatch(
        str(CTE_POWER / "jobs" / "search/search.sh"),
        "trainings/pybullet-envs/ppo.yaml",
        *TINY_PPO_SETS,
        "--set", "env_runners.num_env_runners=0",
        "--set", "stop.iterations=2",
        "--set", "checkpoint.every=0",
        "--set", "training.lr={grid_search: [0.0001, 0.0003, 0.001, 0.003]}",
        "--set", "tune.max_concurrent_trials=4",
        "--track", "mlflow", "--track", "wandb",
        cwd=tmp_path,
        env={**job_env, "WANDB_API_KEY": "", "WANDB_SILENT": "true"},  # W&B offline
    )  # fmt: skip
    info = slurm.wait(job, timeout=400)
    out = job_log(job_env, "search", job)
    assert info["JobState"] == "COMPLETED", out + job_log(job_env, "search", job, "err")
    assert "Ray cluster up: 2 node(s)" in out
    cluster = json.loads(
        (Path(job_env["DDRL_JOB_LOGS"]) / "out" / f"search-{job}.cluster.json").read_text()
    )
    experiment = Path(job_env["DDRL_RESULTS_DIR"]) / "pybullet-envs" / f"ppo-{job}"
    trials = sorted(p.parent for p in experiment.glob("*/result.json"))
    assert len(trials) == 4 and all(len(results_of(t)) == 2 for t in trials)
    # 4 one-CPU trials at once on two 2-CPU nodes: Tune packed them onto both
    drivers = {results_of(t)[-1]["placement"]["driver_node"] for t in trials}
    assert drivers == {n["node_id"] for n in cluster["nodes"]}, drivers
    assert_tracked_one_run_per_trial(experiment, trials)

    proc = subprocess.run(
        [sys.executable, "scripts/plot/summarize-data.py", str(experiment), "--output-dir", str(tmp_path)],
        cwd=CTE_POWER, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = (tmp_path / "humanoid" / f"ppo-{job}-trials.csv").read_text().splitlines()
    assert len(table) == 5 and "training.lr" in table[0]


def assert_tracked_one_run_per_trial(experiment: Path, trials: list[Path]) -> None:
    """An MLflow run and an offline W&B run per trial, each with its own learning rate and
    every iteration (Tune's logger callbacks run on the head, whichever node runs a trial)."""
    import mlflow
    from wandb_records import read_run

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{experiment / 'mlflow.db'}")
    (tracked,) = [e for e in client.search_experiments() if e.name == experiment.name]
    runs = client.search_runs([tracked.experiment_id])
    rates = sorted(float(r.data.params["training.lr"]) for r in runs)
    assert rates == [0.0001, 0.0003, 0.001, 0.003], rates
    for run in runs:
        assert len(client.get_metric_history(run.info.run_id, "mean_return")) == 2
    records = sorted((experiment / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(records) == len(trials) == 4
    wandb_rates = sorted(float(read_run(r)[0]["training.lr"]) for r in records)
    assert wandb_rates == rates


def test_a_job_stopped_by_each_warning_signal_checkpoints_requeues_and_resumes_from_there(
    slurm, job_env, tmp_path
):
    """One job, stopped once each way Slurm warns a job before it ends it:
    1. the time-limit signal: ``scancel --signal=USR1 --batch`` sends what Slurm sends at
       ``--signal=B:USR1@300``, and the job requeues itself after its checkpoint;
    2. a real preemption: a job of the 'urgent' partition needs the node the job now runs on, and
       Slurm sends the job its --signal (preempt_send_user_signal) and GraceTime to act, then
       requeues it.
    Periodic checkpoints are off (every 100 iterations), so only the signal's checkpoint explains
    each resume right after the last iteration before its stop."""
    job = slurm.sbatch(
        str(CTE_POWER / "jobs" / "pybullet-envs/ppo.sh"),
        *TINY_PPO_SETS, "--set", "stop.iterations=8", "--set", "checkpoint.every=100",
        cwd=tmp_path, env=job_env,
    )  # fmt: skip
    wait_for_iterations(slurm, job_env, job, 2)
    slurm.run(["scancel", "--signal=USR1", "--batch", job])  # 1. the time limit is near
    # Slurm starts the requeued job after its requeue delay (AuthInfo=cred_expire, 20 s in the test
    # cluster; 120 s by default); forcing an earlier start makes slurmd refuse it while the old run's
    # credential is still revoked.
    wait_for_iterations(slurm, job_env, job, 2, restart=1)
    node = slurm.state(job)["NodeList"]
    urgent = slurm.run(
        ["sbatch", "--parsable", "--partition=urgent", f"--nodelist={node}", "--cpus-per-task=2",
         "--job-name=urgent", f"--output={tmp_path}/urgent-%j.out", "--wrap=sleep 20"],
        cwd=tmp_path,
    ).stdout.strip().split(";")[0]  # 2. preempted  # fmt: skip
    info = slurm.wait(job, timeout=600)
    out = job_log(job_env, "ppo-humanoid", job)
    assert slurm.wait(urgent, timeout=120)["JobState"] == "COMPLETED"
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "2", out + slurm.logs()

    runs = out.split(", restart ")[1:]  # each start's log, after its banner "(job N, restart K)"
    assert [run[0] for run in runs] == ["0", "1", "2"], out
    for stopped in runs[:2]:
        assert "warning signal (time limit or preemption): checkpointing" in stopped, out
    assert f"requeueing job {job}" in runs[0] and "resuming" in runs[1] and "resuming" in runs[2]
    iterations = [
        [int(line.split()[1]) for line in run.splitlines() if line.startswith("iter ")]
        for run in runs
    ]
    for before, after in zip(iterations, iterations[1:]):
        assert after[0] == before[-1] + 1, iterations
    assert iterations[-1][-1] == 8, iterations


def test_scaling_job_sweeps_env_runners_that_fit_the_allocation(slurm, job_env, tmp_path):
    job = slurm.sbatch(
        str(CTE_POWER / "jobs" / "scaling/ppo.sh"),
        *TINY_PPO_SETS,
        cwd=tmp_path,
        env=job_env | {"DDRL_SCALING_ITERATIONS": "2"},
        options=("--cpus-per-task=2",),
    )
    info = slurm.wait(job, timeout=300)
    out = job_log(job_env, "scaling-ppo", job)
    assert info["JobState"] == "COMPLETED", out + job_log(job_env, "scaling-ppo", job, "err")
    assert "scaling sweep over env runners 1 " in out, "2 CPUs hold 1 runner + the driver"
    trial = only_trial(Path(job_env["DDRL_RESULTS_DIR"]) / "pybullet-envs" / f"scaling-ppo-{job}")
    assert json.loads((trial / "params.json").read_text())["num_env_runners"] == 1
    assert [r["training_iteration"] for r in results_of(trial)] == [1, 2]


def test_job_file_runs_with_plain_bash_without_slurm(job_env, tmp_path):
    env = (
        {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RAY_"))}
        | job_env
        | {"DDRL_NAME": "plain"}
    )
    proc = subprocess.run(
        [
            "bash",
            "jobs/gym/td3.sh",
            "--set",
            "stop.env_steps=600",
            "--set",
            "training.num_steps_sampled_before_learning_starts=256",
            "--set",
            "training.actor_hiddens=[32]",
            "--set",
            "training.critic_hiddens=[32]",
            "--set",
            "reporting.min_sample_timesteps_per_iteration=256",
        ],
        cwd=CTE_POWER,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "job none" in proc.stdout and "started a local Ray" in proc.stdout
    results = results_of(only_trial(Path(job_env["DDRL_RESULTS_DIR"]) / "gym" / "plain"))
    assert results[-1]["num_env_steps_sampled_lifetime"] >= 600


def test_a_stopped_cluster_leaves_another_on_this_machine_working(tmp_path, tmp_path_factory):
    """Two test workers each build a cluster: stopping one must not take the other's munged
    (with one machine-wide munged, the other's scontrol lost its answers mid-test)."""
    # short folders, as the fixture's: slurmd's step sockets live there (108 characters at most)
    first = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    second = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        first.start()
        second.start()
        first.stop()
        job = second.run(
            ["sbatch", "--parsable", f"--output={tmp_path}/job-%j.out", "--wrap=true"],
            cwd=tmp_path,
        ).stdout.strip()
        assert second.wait(job, timeout=120)["JobState"] == "COMPLETED", second.logs()
    finally:
        first.stop()
        second.stop()
