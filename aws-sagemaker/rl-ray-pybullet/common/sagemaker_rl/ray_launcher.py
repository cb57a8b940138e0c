"""Train an experiment inside a SageMaker training job, with the cluster's training core.

What an entry point (``src/train-humanoid-*.py``) calls. On every host of the job it:

1. reads the training-container contract (:mod:`sagemaker_rl.contract`): hyperparameters,
   hosts, the instance's CPUs/GPUs; hyperparameters become the ``--set`` overrides and options
   of :mod:`sagemaker_rl.hyperparameters` and the experiment is validated by ``ddrl.pipeline.validation``
   exactly as on the cluster (bad input: one ``error:`` line, exit 2, written to
   ``/opt/ml/output/failure`` so that it is the job's FailureReason);
2. starts Ray sized to the instance: one host, a local Ray with its CPUs/GPUs; several hosts, a
   Ray head that the others join (:mod:`sagemaker_rl.cluster`, token auth on), on ``algo-1`` or,
   in a heterogeneous job (SageMaker instance groups: a GPU group learns, CPU groups sample), on
   the learner group's first host; ``env_runners.num_env_runners=auto`` counts the CPUs of the
   whole cluster once every host has joined;
3. on the head, runs ``ddrl.pipeline.training.run`` with Tune's results in ``/opt/ml/checkpoints/<name>``
   (SageMaker syncs that folder with the job's checkpoint S3 URI and puts it back when a spot job
   restarts, so a restarted job resumes from its newest checkpoint), printing ``#metrics`` lines
   for the metric definitions and recording a video at checkpoints into
   ``/opt/ml/checkpoints/videos/``; the other hosts wait and exit 0 when it ends (SageMaker's
   SIGTERM included: they stay up until the head has checkpointed and says training ended);
4. exports the policy and the experiment config to ``/opt/ml/model`` (:mod:`sagemaker_rl.artifacts`)
   and each trial's results to ``/opt/ml/output/data``.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import sys
from pathlib import Path

from ddrl import output
from ddrl.errors import UserError
from sagemaker_rl import hyperparameters as hp
from sagemaker_rl.contract import Contract, gpu_report, num_cpus, num_gpus, resolve_host

TOOLKIT = "pybullet-envs"


say = functools.partial(output.say, source="ddrl-sagemaker")


def main(
    default_config: str, name: str, toolkit: str = TOOLKIT, argv: list[str] | None = None
) -> int:
    """Entry point body: returns the process exit code (2 for bad input)."""
    from ddrl.pipeline.rllib_config import quiet_rllib_notices

    quiet_rllib_notices()
    register_for_stop_signal()
    contract = Contract.from_env()
    try:
        return Launcher(
            contract, default_config, name, toolkit, sys.argv[1:] if argv is None else argv
        ).run()
    except UserError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        contract.write_failure(f"error: {err}")
        return err.exit_code


def register_for_stop_signal() -> None:
    """Tell the container's PID 1 (``sagemaker_rl.pid1``) to send SageMaker's SIGTERM to this
    process: the SDK's driver, our parent, must live on to carry our last lines to the log."""
    import atexit

    from ddrl.pipeline.training import StopRequest
    from sagemaker_rl.pid1 import PIDFILE_VARIABLE

    pidfile = os.environ.get(PIDFILE_VARIABLE)
    if not pidfile:
        return  # not under sagemaker_rl.pid1 (run by hand, tests of the entry point alone)
    # from the moment PID 1 forwards SIGTERM here, it must stop training, not kill the process
    # (a job stopped while Ray starts still checkpoints its first iteration and exports a model)
    StopRequest.install(signal.SIGTERM)
    Path(pidfile).write_text(str(os.getpid()))
    atexit.register(lambda: Path(pidfile).unlink(missing_ok=True))


GPU_LEARNER = "learners.num_gpus_per_learner"
#: the setting ``auto`` leaves open until a multi-host cluster is up
AUTO_RUNNERS = ("env_runners.num_env_runners",)


class Launcher:
    def __init__(
        self, contract: Contract, default_config: str, name: str, toolkit: str, argv: list[str]
    ):
        self.contract = contract
        self.toolkit = toolkit
        contract.check()
        hyperparameters = contract.hyperparameters()
        # SDK v3's script driver passes them as --name value too
        hyperparameters.update(hp.parse_cli(argv))
        self.overrides, self.options = hp.decode(hyperparameters)
        self.config_path = self._config_path(self.options["config"] or default_config)
        self.name = self.options["name"] or name
        self.hosts = contract.hosts
        self.host = contract.current_host
        # the head (and driver, learner) on the learner group's first host: algo-1 in a
        # homogeneous job; in a heterogeneous one, the GPU group's unless learner_group says
        self.learner_group = contract.learner_group(self.options["learner_group"])
        self.head = self.learner_group.hosts[0]
        self.rank = ([self.head] + [h for h in self.hosts if h != self.head]).index(self.host)
        self.cpus = self.options["ray_num_cpus"] or num_cpus()
        say(f"devices: {gpu_report()}")
        cpu_learner = f"{GPU_LEARNER}=0" in [o.replace(" ", "") for o in self.overrides]
        self.gpus = (
            self.options["ray_num_gpus"]
            if self.options["ray_num_gpus"] is not None
            else num_gpus(cpu_learner=cpu_learner, instance_type=contract.instance_type)
        )
        self.multi_node = len(self.hosts) > 1

    # ------------------------------------------------------------------------------ config
    def _config_path(self, config: str) -> Path:
        from ddrl import paths

        given = Path(config)
        for candidate in (given, self.contract.channel_dir("code") / given, Path.cwd() / given):
            if candidate.is_file():
                return candidate
        return paths.resolve_config_path(config)

    def load_experiment(self):
        from ddrl.pipeline import validation

        overrides = list(self.overrides)
        if self.multi_node:
            from sagemaker_rl.cluster import HEAD_RESOURCE

            overrides.append(
                f"resources.custom_resources_for_main_process={{{HEAD_RESOURCE}: 0.01}}"
            )
        if self.gpus and not any(o.startswith(f"{GPU_LEARNER}=") for o in overrides):
            # a GPU instance: its GPU learns unless the job's hyperparameters say otherwise
            overrides.append(f"{GPU_LEARNER}=1")
            say(
                f"{self.gpus} GPU(s) here: the learner uses one ({GPU_LEARNER}=1; set "
                f"{GPU_LEARNER.replace('.', '__')}=0 to keep it on the CPU)"
            )
        auto = [o for o in overrides if o.replace(" ", "") == "env_runners.num_env_runners=auto"]
        self.auto_runners = bool(auto)
        if auto:  # counted from the CPUs granted: this host's, or the whole cluster's once it is up
            overrides = [o for o in overrides if o not in auto] + ["env_runners.num_env_runners=0"]
        self.resolved_overrides = overrides
        experiment = validation.load_experiment(self.config_path, self.toolkit, overrides)
        if not auto or self.multi_node:
            return experiment
        return self.with_auto_runners(experiment, self.cpus)

    def with_auto_runners(self, probe, cpus: float):
        """The experiment with env_runners.num_env_runners=auto resolved for ``cpus`` CPUs in all:
        every CPU but the driver's and learners', one env runner per num_cpus_per_env_runner.
        ``probe``: the experiment validated with no env runners (``load_experiment``)."""
        from ddrl.pipeline import resources, validation

        driver = resources.required_per_trial(probe)
        per_runner = float(
            (probe.rllib.get("env_runners") or {}).get("num_cpus_per_env_runner", 1) or 1
        )
        runners = max(0, int((cpus - driver.cpus) // per_runner))
        say(
            f"env_runners.num_env_runners=auto: {runners} ({cpus:g} CPU(s) on {len(self.hosts)} "
            f"host(s), {driver.cpus:g} for the driver and learners)"
        )
        return validation.load_experiment(
            self.config_path,
            self.toolkit,
            self.resolved_overrides + [f"env_runners.num_env_runners={runners}"],
        )

    # --------------------------------------------------------------------------------- run
    def run(self) -> int:
        # every host validates: bad input fails everywhere at once
        experiment = self.load_experiment()
        if self.host != self.head:
            return self.run_worker()
        return self.run_driver(experiment)

    def run_worker(self) -> int:
        from ddrl import ray_nodes
        from sagemaker_rl import cluster

        token, source = cluster.auth_token(self.contract.job_name)
        ray_nodes.enable_token_auth(token)
        timeout = self.options["join_timeout_s"]
        head_host, head_port = resolve_host(self.head), cluster.gcs_port()
        what = f"the Ray head on {self.head}"
        say(
            f"{self.host} is a Ray worker node; waiting for {what} at {head_host}:{head_port} (token {source})"
        )
        ray_nodes.wait_for_port(head_host, head_port, timeout, what)
        node = cluster.sagemaker_node(
            host=self.host,
            ip=resolve_host(self.host),
            rank=self.rank,
            cpus=self.cpus,
            gpus=self.gpus,
            log_file=self.contract.output_data_dir / f"ray-{self.host}.log",
            head_address=f"{head_host}:{head_port}",
            status_file=self.contract.scratch_dir / "cluster-status.json",
        )
        # SageMaker's stop reaches every host at once; the head's stop checkpoint needs this
        # host's env runners for one more iteration, so stay up until the head says it is done
        signal.signal(signal.SIGTERM, _stay_up_for_the_head)
        return cluster.serve_as_worker(node, head_host, head_port)

    def _model_extra(self) -> dict:
        """What model.json says of the job, besides the policy."""
        return {
            "job": self.contract.job_name,
            "instance_type": self.contract.instance_type,
            "instance_count": len(self.hosts),
            "instance_groups": {
                g.name: {"instance_type": g.instance_type, "hosts": g.hosts}
                for g in self.contract.instance_groups
            },
            "learner_group": self.learner_group.name,
        }

    def run_driver(self, experiment) -> int:
        from ddrl.pipeline import launch, ray_session, resources, results, training
        from sagemaker_rl import artifacts, tune_callbacks

        path = self.contract.checkpoints_dir / self.name
        resume = results.has_tune_state(path)
        if path.exists() and not resume:
            say(
                f"{path} holds no Tune state (a run stopped before its first trial started): starting afresh"
            )
            shutil.rmtree(path)
        # auto env runners on several hosts are counted once they have joined: compared then
        later = AUTO_RUNNERS if self.auto_runners and self.multi_node else ()
        self._check(launch, experiment, path, resume, later)
        tune_callbacks.configure(self._video_settings())
        node = None
        status = "failed"
        code, stopped = 1, False
        try:
            if self.multi_node:
                node, cluster_cpus = self._start_head()
                if self.auto_runners:
                    experiment = self.with_auto_runners(experiment, cluster_cpus)
                    self._check(launch, experiment, path, resume)
                granted = None  # the cluster this head joined
            else:
                os.environ.pop("RAY_ADDRESS", None)
                granted = resources.Resources(
                    self.cpus,
                    self.gpus,
                    f"this {self.contract.instance_type} instance ({self.cpus} CPU(s), {self.gpus} GPU(s))",
                )
            say(
                ("resuming " if resume else "starting ")
                + f"experiment {path} ({experiment.algorithm} on {experiment.env})"
            )
            code = launch.train(
                experiment,
                path,
                resume=resume,
                granted=granted,
                callbacks=[
                    tune_callbacks.MetricsPrinter(),
                    tune_callbacks.ExportModel(self.contract.model_dir, self._model_extra()),
                    tune_callbacks.CheckpointVideos(),
                    tune_callbacks.TensorBoardFiles(path, self.contract.tensorboard_dir),
                ],
                # spot interruption, max runtime: checkpoint every trial, then stop
                stop_signals=(signal.SIGTERM,),
            )
            # the same code after trials failed with a lost host: resumable, but not done
            stopped = code == training.EXIT_CHECKPOINTED and training.StopRequest.requested
            status = "done" if code == 0 or stopped else "failed"
        finally:
            if node is not None:
                self._stop_head(node, status)
            else:
                ray_session.stop_ray()
        if stopped:
            say(
                "stopped on SIGTERM after checkpointing; a restarted job resumes from /opt/ml/checkpoints"
            )
            code = 0
        # the model and the summaries first: a stopped job has 120 s before the kill
        try:
            exported = artifacts.export_model(path, self.contract.model_dir, self._model_extra())
            say(
                f"model: {self.contract.model_dir} (policy {exported.relative_to(self.contract.model_dir)})"
            )
        except UserError as err:
            say(f"no model exported: {err}")
            if code == 0:
                raise
        artifacts.copy_summaries(path, self.contract.output_data_dir)
        videos = tune_callbacks.finish(stopping=stopped)
        # /opt/ml/checkpoints is not uploaded when a job ends; /opt/ml/output/data is
        kept = self.contract.output_data_dir / "videos"
        for video in videos:
            kept.mkdir(parents=True, exist_ok=True)
            shutil.copy2(video, kept / video.name)
        say(f"videos: {len(videos)} in {self.contract.videos_dir} (copied to {kept})")
        if code == training.EXIT_CHECKPOINTED:
            self.contract.write_failure(
                "a host of the job was lost during training; its trials' checkpoints are in the "
                "job's checkpoint S3 URI: continue them with a new job (CONTINUE_FROM)"
            )
        elif code != 0:
            self.contract.write_failure(
                f"training failed (exit code {code}); see the trial's error.txt in the checkpoints"
            )
        return code

    def _check(self, launch, experiment, path: Path, resume: bool, later: tuple = ()) -> None:
        from ddrl.pipeline.results import CannotStartHere

        try:
            launch.check(experiment, path, resume, resolved_later=later)
        except CannotStartHere as err:
            raise UserError(
                f"{err} On SageMaker: the job's checkpoint S3 URI already holds experiment "
                f"'{self.name}' with other settings; give the job a new checkpoint S3 URI, or the "
                "same hyperparameters to resume it."
            ) from None

    def _video_settings(self):
        from sagemaker_rl.tune_callbacks import VideoSettings

        o = self.options
        return VideoSettings(
            videos_dir=self.contract.videos_dir,
            scratch_dir=self.contract.scratch_dir,
            every=o["video_every"],
            max_steps=o["video_max_steps"],
            episodes=o["video_episodes"],
            width=o["video_width"],
            height=o["video_height"],
            fps=o["video_fps"],
        )

    # ---------------------------------------------------------------------------- cluster
    def _start_head(self):
        """This host's Ray head, once every host of the job has joined: (node, cluster CPUs)."""
        from ddrl import ray_nodes
        from ddrl.pipeline import ray_session, resources
        from sagemaker_rl import cluster

        token, source = cluster.auth_token(self.contract.job_name)
        ray_nodes.enable_token_auth(token)
        ip, port = resolve_host(self.host), cluster.gcs_port()
        expected = len(self.hosts)
        node = cluster.sagemaker_node(
            host=self.host,
            ip=ip,
            rank=0,
            cpus=self.cpus,
            gpus=self.gpus,
            log_file=self.contract.output_data_dir / f"ray-{self.host}.log",
            port=port,
        )
        groups = self.contract.instance_groups
        say(
            f"{self.host} ({self.learner_group.name}) runs the Ray head at {ip}:{port} (token {source}); "
            f"waiting for {expected} node(s)"
            + (f" in {len(groups)} instance groups" if len(groups) > 1 else "")
        )
        node.start()
        try:
            ray_nodes.wait_for_port(ip, port, 120, "our own Ray head")
            os.environ["RAY_ADDRESS"] = f"{ip}:{port}"
            os.environ["DDRL_NODE_IP"] = ip
            say(ray_session.start_ray())
            describe = "; ".join(f"{g.name}: {', '.join(g.hosts)}" for g in groups)
            alive = ray_nodes.wait_for_nodes(expected, self.options["join_timeout_s"], describe)
            total = resources.ray_cluster()
            say(f"Ray cluster up: {len(alive)} node(s), {total}")
        except BaseException:
            self._stop_head(node, "failed")
            raise
        return node, total.cpus

    def _stop_head(self, node, status: str) -> None:
        from ddrl.pipeline import ray_session
        from sagemaker_rl import cluster

        try:
            import ray

            if ray.is_initialized():
                heard = cluster.release_workers(status)
                say(f"told {heard} worker node(s) that training ended ({status})")
        finally:
            ray_session.stop_ray()
            node.stop()
            os.environ.pop("RAY_ADDRESS", None)


def _stay_up_for_the_head(signum, frame):
    say(
        f"received {signal.Signals(signum).name}: this worker stays up until the head has "
        "checkpointed and says training ended"
    )
