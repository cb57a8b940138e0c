"""SageMaker pipeline pieces that train nothing: hyperparameter encoding, contract, metrics, pins, errors."""

import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sagemaker.core.s3.utils import parse_s3_url
from sagemaker_support import (
    PIPELINE,
    REPO,
    SRC,
    TINY,
    container_env,
    run_entry_point,
    run_sdk_job,
    stage_job,
)

from ddrl.errors import UserError
from sagemaker_notebook import account, cleanup, costs, image, monitoring, parameters
from sagemaker_offline import aws_server
from sagemaker_offline.contract_writer import write_contract
from sagemaker_rl import hyperparameters as hp
from sagemaker_rl import metrics
from sagemaker_rl.contract import resolve_host


# ------------------------------------------------------------------------------ hyperparameters
def test_dotted_names_are_encoded_so_that_they_survive_the_sdk_shell_driver(tmp_path):
    encoded = hp.encode(
        {
            "training.lr": 1e-4,
            "rl_module.model_config.fcnet_hiddens": [64, 64],
            "training.lambda_": 0.95,
            "stop.iterations": 3,
            "video_every": 2,
            "ray_num_cpus": 4,
        }
    )
    assert encoded == {
        "training__lr": "0.0001",
        "rl_module__model_config__fcnet_hiddens": "[64, 64]",
        "training__lambda_": "0.95",
        "stop__iterations": "3",
        "video_every": "2",
        "ray_num_cpus": "4",
    }
    # what SDK v3's environment.py writes and sm_train.sh sources: dotted names break it, ours do not
    script = tmp_path / "env.sh"
    script.write_text(
        "set -e\n"
        + "".join(f"export SM_HP_{k.upper()}='{v}'\n" for k, v in encoded.items())
        + 'echo "$SM_HP_TRAINING__LR"\n'
    )
    assert (
        subprocess.run(["bash", str(script)], capture_output=True, text=True).stdout.strip()
        == "0.0001"
    )
    script.write_text("set -e\nexport SM_HP_TRAINING.LR='0.0001'\necho reached\n")
    broken = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert (
        broken.returncode != 0
        and "not a valid identifier" in broken.stderr
        and "reached" not in broken.stdout
    )

    overrides, options = hp.decode(encoded)
    assert sorted(overrides) == sorted(
        [
            "training.lr=0.0001",
            "rl_module.model_config.fcnet_hiddens=[64, 64]",
            "training.lambda_=0.95",
            "stop.iterations=3",
        ]
    )
    assert (
        options["video_every"] == 2
        and options["ray_num_cpus"] == 4
        and options["learner_group"] is None
    )
    # SageMaker's own hyperparameters are ignored; dotted names (other drivers) decode the same way
    assert hp.decode(
        {"sagemaker_program": "x.py", "_tuning_objective_metric": "m", "training.lr": "1e-3"}
    )[0] == ["training.lr=1e-3"]
    assert hp.parse_cli(["--training__lr", "0.001", "--video_every=3"]) == {
        "training__lr": "0.001",
        "video_every": "3",
    }


@pytest.mark.parametrize(
    "hyperparameters,message",
    [
        ({"vide_every": "2"}, "unknown hyperparameter 'vide_every'. Did you mean 'video_every'?"),
        ({"video_every": "often"}, "'video_every' must be an integer"),
        ({"video_every": "-1"}, "'video_every' must be at least 0"),
        ({"role": "primary"}, "unknown hyperparameter 'role'"),
        ({"training____lr": "1"}, "empty part in the config path"),
    ],
)
def test_bad_hyperparameters_say_what_to_do(hyperparameters, message):
    with pytest.raises(UserError, match=re.escape(message)):
        hp.decode(hyperparameters)


def test_encode_rejects_names_no_shell_accepts():
    with pytest.raises(UserError, match="letters, digits and underscores"):
        hp.encode({"training.lr rate": 1})


# ------------------------------------------------------------------------------------ contract
def test_contract_layout_variables_and_host_resolution(tmp_path):
    contract = write_contract(
        tmp_path / "ml",
        {"stop__iterations": 2},
        hosts=["algo-2", "algo-10", "algo-1"],
        current_host="algo-2",
    )
    assert contract.hosts == ["algo-1", "algo-2", "algo-10"] and contract.current_host == "algo-2"
    assert json.loads(contract.hyperparameters_file.read_text()) == {
        "stop__iterations": "2"
    }  # strings, as the API stores them
    for folder in ("model", "checkpoints", "output/intermediate", "output/data", "input/config"):
        assert (tmp_path / "ml" / folder).is_dir(), folder
    env = container_env(contract)
    assert env["SM_CURRENT_HOST"] == "algo-2" and json.loads(env["SM_HOSTS"]) == contract.hosts
    assert env["SM_HP_STOP__ITERATIONS"] == "2" and env["DDRL_SM_BASE_DIR"] == str(contract.base)
    assert (
        resolve_host("algo-2", {"DDRL_SM_HOST_IPS": "algo-1=127.0.0.2,algo-2=127.0.0.3"})
        == "127.0.0.3"
    )
    with pytest.raises(UserError, match="DDRL_SM_HOST_IPS"):
        resolve_host("algo-1", {"DDRL_SM_HOST_IPS": "algo-1"})


def test_entry_point_outside_a_training_container_says_how_to_run_it(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SRC / "train-humanoid-ppo.py")],
        capture_output=True,
        text=True,
        env={**os.environ, "DDRL_SM_BASE_DIR": str(tmp_path / "nothing-here")},
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert (
        "hyperparameters.json does not exist" in proc.stderr and "DDRL_SM_BASE_DIR" in proc.stderr
    )
    assert "Traceback" not in proc.stderr


def test_bad_config_override_fails_before_ray_starts_and_becomes_the_failure_reason(tmp_path):
    contract = stage_job(
        tmp_path / "ml", "train-humanoid-ppo.py", {**TINY["ppo"], "training__lrr": "0.1"}
    )
    proc = run_entry_point("train-humanoid-ppo.py", contract, timeout=180)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "unknown key 'lrr'" in proc.stderr and "Did you mean 'lr'?" in proc.stderr
    assert "unknown key 'lrr'" in contract.failure_file.read_text()  # SageMaker's FailureReason
    assert not list(contract.checkpoints_dir.iterdir()), "nothing started"


# ------------------------------------------------------------------------------------- metrics
def test_output_data_gets_the_summaries_and_the_local_tracking_stores(tmp_path):
    from sagemaker_rl import artifacts

    experiment = tmp_path / "checkpoints" / "humanoid-ppo"
    trial = experiment / "PPO_HumanoidBulletEnv-v0_0"
    run = experiment / "wandb" / "offline-run-1" / "run-1.wandb"
    for path in (trial / "result.json", trial / "checkpoint_000000" / "big", run):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(path.name)
    (experiment / "mlflow.db").write_text("store")
    (experiment / "experiment.yaml").write_text("env: x")
    output = tmp_path / "output"
    artifacts.copy_summaries(experiment, output)
    copied = sorted(str(p.relative_to(output)) for p in output.rglob("*") if p.is_file())
    assert copied == [
        "humanoid-ppo/PPO_HumanoidBulletEnv-v0_0/result.json",
        "humanoid-ppo/experiment.yaml",
        "humanoid-ppo/mlflow.db",
        "humanoid-ppo/wandb/offline-run-1/run-1.wandb",
    ], "summaries and tracking, no checkpoints"


def test_metric_lines_and_definitions_agree():
    result = {
        "training_iteration": 3,
        "num_env_steps_sampled_lifetime": 1200,
        "time_this_iter_s": 1.5,
        "time_total_s": 4.0,
        "env_runners": {
            "episode_return_mean": -45.25,
            "episode_return_max": -1e-3,
            "episode_return_min": -90.0,
            "episode_len_mean": float("nan"),
        },
    }
    line = metrics.training_line(result)
    assert "episode_len_mean" not in line  # NaN (no episode yet) is left out, never printed as nan
    (row,) = metrics.parse_lines(["(PPO pid=1) noise", line])
    assert row == {
        "training_iteration": 3,
        "env_steps": 1200,
        "episode_return_mean": -45.25,
        "episode_return_max": -0.001,
        "episode_return_min": -90.0,
        "time_this_iter_s": 1.5,
        "time_total_s": 4.0,
        "env_steps_per_s": 300.0,
    }
    names = [d["Name"] for d in metrics.TRAINING_METRIC_DEFINITIONS]
    assert "episode_return_mean" in names and len(set(names)) == len(names)
    eval_rows = metrics.parse_lines(
        [metrics.eval_episode_line(0, 12.5, 20), metrics.eval_summary_line([12.5, 7.5], [20, 10])],
        metrics.EVALUATE_METRIC_DEFINITIONS,
    )
    assert eval_rows == [
        {"eval_episode_return": 12.5},
        {"eval_mean_return": 10.0, "eval_mean_length": 15.0},
    ]


# ---------------------------------------------------------------------------- image and pins
def _pins(path):
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[re.sub(r"\[.*\]", "", name).strip().lower()] = version.strip()
    return pins


def test_dockerfile_installs_exactly_the_project_pins():
    dockerfile = (PIPELINE / "Dockerfile").read_text()
    project, notebook = _pins(REPO / "requirements.txt"), _pins(PIPELINE / "requirements.txt")
    assert "COPY requirements.txt ./" in dockerfile and "COPY pyproject.toml ./" in dockerfile
    installs = [
        line for line in dockerfile.replace("\\\n", " ").splitlines() if "pip install" in line
    ]
    assert any("-r requirements.txt" in line for line in installs), installs
    # every other package the Dockerfile names is pinned as the project (or the notebook side) pins it
    named = dict(re.findall(r'"?([A-Za-z0-9_.\-\[\]]+)==([0-9][^"\s]*)"?', " ".join(installs)))
    for name, version in named.items():
        name = re.sub(r"\[.*\]", "", name).lower()
        assert project.get(name, notebook.get(name)) == version, (name, version)
    assert (
        "grep -E '^torch==' requirements.txt" in dockerfile
    )  # the CPU wheel at the pinned torch version
    assert "python:3.11" in dockerfile and ">=3.11,<3.12" in (REPO / "pyproject.toml").read_text()
    for needed in (
        "cte-power/ddrl",
        "cte-power/trainings",
        "rl-ray-pybullet/common",
        "rl-ray-pybullet/src",
        "pip install --no-deps --no-build-isolation -e .",
    ):
        assert needed in dockerfile, needed
    ignored = (PIPELINE / "Dockerfile.dockerignore").read_text()
    assert (
        "!cte-power/ddrl/**" in ignored and "**\n" in ignored
    )  # the .venv and results stay out of the context


def test_the_image_installs_no_test_or_lint_tool():
    """The image installs requirements.txt; the tests' and the linter's tools are pinned in
    requirements-dev.txt, which the Makefile installs into .venv and the image never sees."""
    shipped = _pins(REPO / "requirements.txt")
    dev = _pins(REPO / "requirements-dev.txt")
    tools = {"pytest", "pytest-timeout", "pytest-xdist", "hypothesis", "ruff"}
    assert tools <= dev.keys() and not tools & shipped.keys(), shipped.keys() & tools
    assert "-r requirements.txt" in (REPO / "requirements-dev.txt").read_text()
    dockerfile = (PIPELINE / "Dockerfile").read_text()
    assert "requirements-dev" not in dockerfile
    assert "!requirements-dev.txt" not in (PIPELINE / "Dockerfile.dockerignore").read_text()


def test_notebook_parameters_are_checked():
    with pytest.raises(UserError, match="ALGORITHM 'ppo2' is not one of ppo, sac, td3"):
        parameters.Parameters("ppo2", "local", "ml.c5.4xlarge", 1, True, "us-west-2").check()
    with pytest.raises(UserError, match="MODE"):
        parameters.Parameters("ppo", "cloud", "ml.c5.4xlarge", 1, True, "us-west-2").check()
    params = parameters.Parameters("SAC", "aws", "ml.g4dn.4xlarge", 2, True, "us-west-2").check()
    assert params.entry_script == "train-humanoid-sac.py" and params.gpu
    assert "$6.74 on demand" in costs.estimate_cost("ml.g4dn.4xlarge", 2, 2, True)  # 1.686 x 2 x 2


def test_cost_estimates_say_when_their_prices_are_from_and_take_todays(monkeypatch):
    monkeypatch.setattr(costs, "PRICES", {})
    estimate = costs.estimate_cost("ml.c5.4xlarge", 1, 10, False)
    assert "$9.52 on demand" in estimate and "September 2020" in estimate, estimate
    costs.use_prices({"ml.c5.4xlarge": 0.816})
    estimate = costs.estimate_cost("ml.c5.4xlarge", 1, 10, False)
    assert "$8.16 on demand" in estimate and "PRICES given in the notebook" in estimate, estimate
    for bad in ({"c5.4xlarge": 0.8}, {"ml.c5.4xlarge": "cheap"}, {"ml.c5.4xlarge": -1}):
        with pytest.raises(UserError, match="PRICES"):
            costs.use_prices(bad)
    assert (
        "PRICES = {}"
        in notebook_cells()['# Parameters (papermill: this cell is tagged "parameters")']
    )


def test_the_evaluation_and_endpoint_instances_have_prices_and_estimates(monkeypatch):
    """Their cost lines once said "a price not in the table", and the endpoint had none."""
    monkeypatch.setattr(costs, "PRICES", {})
    # a CPU family's price is proportional to its vCPUs: a quarter, an eighth of ml.c5.4xlarge's
    assert costs.hourly_price("ml.c5.xlarge") == pytest.approx(0.952 / 4)
    assert costs.hourly_price("ml.c5.large") == pytest.approx(0.952 / 8)
    estimate = costs.estimate_cost("ml.c5.xlarge", 1, 1, False)
    assert "$0.24 on demand" in estimate and "4/16 of ml.c5.4xlarge's price" in estimate, estimate
    endpoint = costs.estimate_endpoint("ml.c5.large")
    assert "$0.119/h" in endpoint and "$2.86 a day" in endpoint and "section 10" in endpoint
    # GPU sizes are not proportional, and an unknown family has no price: said, never guessed
    assert costs.hourly_price("ml.g4dn.xlarge") is None
    assert costs.hourly_price("ml.m5.xlarge") is None
    assert "no price in the table" in costs.estimate_endpoint("ml.g4dn.xlarge")
    costs.use_prices({"ml.c5.large": 0.1})  # today's price wins over a derived one
    assert "$0.100/h" in costs.estimate_endpoint("ml.c5.large")
    set_up = notebook_cells()["import json"]
    assert "costs.estimate_endpoint(ENDPOINT_INSTANCE_TYPE)" in set_up
    assert "costs.estimate_cost(EVAL_INSTANCE_TYPE" in set_up


def test_evaluation_and_serving_on_cpu_instances_get_the_cpu_image():
    """A GPU training job's -gpu image (several GB of CUDA) was reused on ml.c5 instances."""
    from sagemaker_notebook import image

    repo = "123.dkr.ecr.us-west-2.amazonaws.com/ddrl"
    assert image.image_uri(repo, "abc", "ml.g4dn.4xlarge") == f"{repo}:abc-gpu"
    assert image.image_uri(repo, "abc", "ml.c5.xlarge") == f"{repo}:abc"
    needed = image.images_for(repo, "abc", ["ml.g4dn.4xlarge", "ml.c5.xlarge", "ml.c5.large"])
    assert needed == {f"{repo}:abc": False, f"{repo}:abc-gpu": True}
    assert image.images_for(repo, "abc", ["ml.c5.4xlarge", "ml.c5.xlarge"]) == {
        f"{repo}:abc": False
    }
    cells = notebook_cells()
    assert "image_uri=EVAL_IMAGE_URI" in cells["if EVALUATE:"]
    assert '"Image": ENDPOINT_IMAGE_URI' in cells["ENDPOINT = None"]


def test_docker_builds_on_sagemaker_studios_network_there_only(tmp_path):
    """Studio's Docker allows only --network sagemaker (sagemaker-python-sdk#5147)."""
    from sagemaker_notebook import image

    studio, notebook_instance = tmp_path / "studio.json", tmp_path / "instance.json"
    studio.write_text(json.dumps({"DomainId": "d-abc", "SpaceName": "s", "AppType": "JupyterLab"}))
    notebook_instance.write_text(json.dumps({"ResourceName": "nb", "ResourceArn": "arn:x"}))
    assert image.docker_network(studio) == "sagemaker"
    assert image.docker_network(notebook_instance) is None
    assert image.docker_network(tmp_path / "none.json") is None
    build, _ = image.build_commands("x/y:1", gpu=False, network="sagemaker")
    assert build[build.index("--network") + 1] == "sagemaker"
    assert "--network" not in image.build_commands("x/y:1", gpu=False)[0]


def notebook_cells() -> dict[str, str]:
    """The notebook's code cells by their first line."""
    import json as _json

    notebook = _json.loads((PIPELINE / "humanoid-pipeline.ipynb").read_text())
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    return {cell.splitlines()[0]: cell for cell in cells if cell.strip()}


def test_each_algorithm_has_its_own_budget_and_the_evaluation_a_small_short_job():
    """SAC and TD3 once inherited PPO's 5M env steps, and ran into the 24-hour cap."""
    parameters: dict = {}
    exec(notebook_cells()['# Parameters (papermill: this cell is tagged "parameters")'], parameters)
    assert "stop.env_steps" not in parameters["HYPERPARAMETERS"]
    budgets = parameters["STOP_ENV_STEPS"]
    assert budgets["sac"] == budgets["td3"] == 1_000_000 and budgets["ppo"] == 5_000_000
    assert (
        parameters["EVAL_INSTANCE_TYPE"] == "ml.c5.xlarge" and parameters["EVAL_MAX_RUN_S"] <= 3600
    )
    assert parameters["REGION"] is None and parameters["IMAGE_TAG"] is None


def test_a_failing_endpoint_test_call_deletes_the_endpoint():
    """The deploy cell's test call is inside the try whose except deletes the endpoint."""
    import ast

    cell = next(c for c in notebook_cells().values() if c.startswith("ENDPOINT = None"))
    (guarded,) = [node for node in ast.walk(ast.parse(cell)) if isinstance(node, ast.Try)]
    inside = ast.unparse(ast.Module(body=guarded.body, type_ignores=[]))
    assert "invoke_endpoint" in inside and "urlopen" in inside
    assert "delete_endpoint" in ast.unparse(guarded.handlers[0])


def test_switching_from_offline_to_aws_restores_the_users_credentials(monkeypatch):
    from sagemaker_offline import aws_server

    monkeypatch.setenv("AWS_PROFILE", "mine")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    aws_server.use_offline_credentials("http://127.0.0.1:1", "us-west-2")
    assert os.environ["AWS_ACCESS_KEY_ID"] == "testing" and "AWS_PROFILE" not in os.environ
    assert aws_server.restore_credentials()
    assert os.environ["AWS_PROFILE"] == "mine" and os.environ["AWS_REGION"] == "eu-west-1"
    assert "AWS_ENDPOINT_URL" not in os.environ and "AWS_ACCESS_KEY_ID" not in os.environ
    assert not aws_server.restore_credentials()


def test_the_region_comes_from_the_aws_session(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    assert parameters.resolve_region("ap-south-1", "aws") == "ap-south-1"
    assert parameters.resolve_region(None, "local") == "us-west-2"
    with pytest.raises(UserError, match="no AWS region: set REGION"):
        parameters.resolve_region(None, "aws")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    assert parameters.resolve_region(None, "aws") == "eu-central-1"


def test_the_image_tag_names_what_the_image_holds(monkeypatch, tmp_path):
    tag = image.image_tag()
    assert re.fullmatch(r"[0-9a-f]{12}", tag) and image.image_tag() == tag
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    monkeypatch.setattr(image, "REPO_DIR", tmp_path)
    monkeypatch.setattr(image, "IMAGE_INPUTS", ("Dockerfile",))
    first = image.image_tag()
    (tmp_path / "Dockerfile").write_text("FROM scratch\nRUN true\n")
    assert image.image_tag() != first


# --------------------------------------------------------------------------- moto-backed pieces
def test_local_mode_runs_the_sdk_driver_which_rejects_dotted_hyperparameters(offline_aws, tmp_path):
    """Why hyperparameters are encoded: SDK v3's own container driver fails on a dotted name."""
    job, lines = run_sdk_job(offline_aws, tmp_path, "dotted", {"training.lr": 0.001})
    assert job.exit_code != 0
    assert any(
        "SM_HP_TRAINING.LR" in line and "not a valid identifier" in line for line in lines
    ), lines[-20:]
    assert "Training Execution failed" in job.failure_reason
    assert not any(line.startswith("ddrl-sagemaker:") for line in lines), "our code never ran"


def test_a_gpu_instance_whose_gpus_torch_cannot_use_fails_unless_the_job_asks_for_cpu():
    """It once warned and trained on CPU at GPU prices."""
    from sagemaker_rl.contract import num_gpus

    warnings = []
    # SageMaker says 1 GPU (it counts them with nvidia-smi); this torch sees none: the job fails,
    # saying why and what to do, with the stack it found
    for env in (
        {"SM_NUM_GPUS": "1", "SM_CURRENT_INSTANCE_TYPE": "ml.g4dn.4xlarge"},
        {"SM_CURRENT_INSTANCE_TYPE": "ml.g5.xlarge"},  # no SM_NUM_GPUS, a GPU type
        # SM_NUM_GPUS=0 on a GPU type: the container got no GPU (no NVIDIA runtime), not trusted
        {"SM_NUM_GPUS": "0", "SM_CURRENT_INSTANCE_TYPE": "ml.g5.xlarge"},
    ):
        with pytest.raises(UserError) as error:
            num_gpus(env, warnings.append)
        message = str(error.value)
        assert env["SM_CURRENT_INSTANCE_TYPE"] in message and "torch can use 0" in message
        assert "learners__num_gpus_per_learner=0" in message and "torch 2.13" in message
    # the instance type from the job's resource config where the variable is missing
    with pytest.raises(UserError, match="ml.g6.xlarge"):
        num_gpus({}, warnings.append, instance_type="ml.g6.xlarge")
    # the job asked for a CPU learner: a warning, and it goes on
    env = {"SM_NUM_GPUS": "1", "SM_CURRENT_INSTANCE_TYPE": "ml.g4dn.4xlarge"}
    assert num_gpus(env, warnings.append, cpu_learner=True) == 0
    assert len(warnings) == 1 and "training runs on CPU" in warnings[0]
    # a CPU instance: nothing to say
    assert num_gpus({"SM_NUM_GPUS": "0", "SM_CURRENT_INSTANCE_TYPE": "ml.c5.4xlarge"}) == 0
    assert len(warnings) == 1


def test_the_job_reports_its_gpu_stack_and_the_host_driver(tmp_path):
    import torch

    from sagemaker_rl import contract

    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 06:54:38 UTC 2025\n"
    )
    assert contract.nvidia_driver(version) == "580.65.06"
    assert contract.nvidia_driver(tmp_path / "none") is None
    report = contract.gpu_report()
    assert report.startswith(f"torch {torch.__version__} (")
    cuda = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "no CUDA build"
    assert cuda in report and "NVIDIA driver " in report
    assert ("GPU 0: " in report) == torch.cuda.is_available()


def test_gpu_instances_too_old_for_the_images_torch_are_refused_before_anything_starts():
    from sagemaker_notebook.parameters import Parameters

    for kind in ("ml.p3.2xlarge", "ml.p3.16xlarge", "ml.p2.xlarge"):
        with pytest.raises(UserError, match=f"INSTANCE_TYPE {kind}: .*compute capability 7.5"):
            Parameters("ppo", "aws", kind, 1, False, "us-west-2", None).check()
    with pytest.raises(UserError, match="SAMPLER_INSTANCE_TYPE ml.p3.2xlarge"):
        Parameters(
            "ppo", "aws", "ml.g5.xlarge", 1, False, "us-west-2", None, "ml.p3.2xlarge", 1
        ).check()
    for kind in ("ml.g4dn.4xlarge", "ml.g5.xlarge", "ml.p4d.24xlarge", "ml.c5.4xlarge"):
        Parameters("ppo", "aws", kind, 1, False, "us-west-2", None).check()


@pytest.mark.parametrize(
    ("hyperparameters", "gpus_per_learner"),
    [
        ({"ray_num_gpus": 1}, 1),  # a GPU instance: the learner takes its GPU
        ({"ray_num_gpus": 1, "learners__num_gpus_per_learner": 0}, 0),  # unless the job says so
        ({"ray_num_gpus": 0}, 0),  # a CPU instance: the config's own (0)
    ],
)
def test_on_a_gpu_instance_the_learner_uses_the_gpu_unless_the_job_says_otherwise(
    tmp_path, hyperparameters, gpus_per_learner
):
    from sagemaker_rl.ray_launcher import Launcher

    contract = stage_job(
        tmp_path / "ml", "train-humanoid-sac.py", {**TINY["sac"], **hyperparameters}
    )
    launcher = Launcher(
        contract, "trainings/pybullet-envs/sac.yaml", "humanoid-sac", "pybullet-envs", []
    )
    learners = launcher.load_experiment().rllib["learners"]
    assert learners["num_gpus_per_learner"] == gpus_per_learner


def test_the_image_is_built_for_amd64_with_the_cuda_torch_only_for_gpu_instances():
    from sagemaker_notebook.image import build_commands

    (cpu_build, push), (gpu_build, _) = (
        build_commands("x/y:1", gpu=False),
        build_commands("x/y:1", gpu=True),
    )
    for build in (cpu_build, gpu_build):
        assert build[:4] == ["docker", "build", "--platform", "linux/amd64"]
    assert "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in cpu_build
    assert not any("TORCH_INDEX_URL" in arg for arg in gpu_build) and push == [
        "docker",
        "push",
        "x/y:1",
    ]


def _identity_with(iam, name: str, statements: list[dict]):
    """A session of a new IAM user whose one inline policy holds ``statements``."""
    import boto3

    iam.create_user(UserName=name)
    document = {"Version": "2012-10-17", "Statement": statements}
    iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(document))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return boto3.Session(
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
        region_name="us-west-2",
    )


def test_missing_rights_are_named_by_use_before_anything_is_built(offline_aws):
    iam = offline_aws.client("iam")
    allowed = ["s3:*", "sagemaker:*", "iam:*", "cloudwatch:*", "logs:Get*", "logs:Describe*"]
    user = _identity_with(
        iam,
        "rights-partial",
        [
            {"Effect": "Allow", "Action": [*allowed, "ecr:*"], "Resource": "*"},
            {"Effect": "Deny", "Action": "ecr:PutImage", "Resource": "*"},  # an explicit deny wins
        ],
    )
    user_iam, user_sts = user.client("iam"), user.client("sts")
    # what this user may do passes, and says how much was checked
    said = account.check_rights(user_iam, user_sts, ["run", "endpoint"])
    assert said.startswith("rights: the ") and "allowed to you" in said
    with pytest.raises(UserError) as error:
        account.check_rights(user_iam, user_sts, ["run", "image", "clean-up"])
    message = str(error.value)
    assert "\n" not in message
    assert "the image's push (section 2, BUILD_IMAGE): ecr:PutImage" in message
    assert "the data's clean-up (section 10, CLEAN_UP_DATA): logs:DeleteLogStream" in message
    assert "ecr:DeleteRepository" not in message and "bucket, source and jobs" not in message


def test_rights_granted_on_this_runs_resources_only_are_not_false_alarms(offline_aws):
    """S3 on the run's bucket only, ECR push on its repository only: denied on '*' by the
    simulation, allowed where the calls go."""
    iam = offline_aws.client("iam")
    account_id = offline_aws.client("sts").get_caller_identity()["Account"]
    repository = f"arn:aws:ecr:us-west-2:{account_id}:repository/ddrl-rl-ray-pybullet"
    user = _identity_with(
        iam,
        "rights-scoped",
        [
            {"Effect": "Allow", "Action": ["sagemaker:*", "iam:*", "cloudwatch:*", "logs:*",
                                           "ecr:CreateRepository", "ecr:DescribeRepositories",
                                           "ecr:GetAuthorizationToken"], "Resource": "*"},
            {"Effect": "Allow", "Action": "s3:*",
             "Resource": ["arn:aws:s3:::ddrl-scoped", "arn:aws:s3:::ddrl-scoped/*"]},
            {"Effect": "Allow", "Action": "ecr:*", "Resource": repository},
        ],
    )  # fmt: skip
    user_iam, user_sts = user.client("iam"), user.client("sts")
    targets = account.run_targets(
        account_id, "us-west-2", "ddrl-scoped", "ddrl-rl-ray-pybullet", None
    )
    said = account.check_rights(user_iam, user_sts, ["run", "image"], targets)
    assert "allowed to you" in said
    # another bucket is not this user's: still named as missing
    other = account.run_targets(
        account_id, "us-west-2", "someone-elses", "ddrl-rl-ray-pybullet", None
    )
    with pytest.raises(UserError, match="s3:PutObject.*CHECK_RIGHTS = False"):
        account.check_rights(user_iam, user_sts, ["run", "image"], other)


def test_an_assumed_role_is_checked_as_its_role_and_an_unknown_identity_is_not_checked(
    offline_aws,
):
    iam = offline_aws.client("iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    arn = iam.create_role(
        RoleName="rights-sso", Path="/team/", AssumeRolePolicyDocument=json.dumps(trust)
    )["Role"]["Arn"]
    iam.put_role_policy(
        RoleName="rights-sso",
        PolicyName="p",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
            }
        ),
    )
    credentials = offline_aws.client("sts").assume_role(RoleArn=arn, RoleSessionName="me")[
        "Credentials"
    ]
    import boto3

    session = boto3.Session(
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        region_name="us-west-2",
    )
    caller = session.client("sts").get_caller_identity()["Arn"]
    assert ":assumed-role/rights-sso/me" in caller
    assert account.principal_arn(iam, caller) == arn  # the role, with its path
    assert account.missing_rights(iam, session.client("sts"), ["s3:PutObject", "ecr:PutImage"]) == [
        "ecr:PutImage"
    ]
    # an identity IAM cannot simulate (here: its role is gone; on AWS also the account's root)
    iam.delete_role_policy(RoleName="rights-sso", PolicyName="p")
    iam.delete_role(RoleName="rights-sso")
    said = account.check_rights(iam, session.client("sts"), ["run"])
    assert said.startswith("rights: not checked"), said
    aws_server.allow_offline_caller(iam)
    assert "allowed to you" in account.check_rights(iam, offline_aws.client("sts"), ["run"])


def test_the_execution_role_is_checked_or_made_with_s3_on_the_runs_bucket_only(
    offline_aws, monkeypatch
):
    iam = offline_aws.client("iam")
    monkeypatch.setattr(account, "SAGEMAKER_NOTEBOOK_METADATA", Path("/nonexistent/metadata.json"))
    monkeypatch.setattr(account, "ROLE_NAME", "ddrl-role-test")
    arn = account.resolve_role(iam, None, "ddrl-test")  # outside SageMaker, no ROLE_ARN: made here
    assert arn.endswith(":role/ddrl-role-test")
    trust = iam.get_role(RoleName="ddrl-role-test")["Role"]["AssumeRolePolicyDocument"]
    assert "sagemaker.amazonaws.com" in json.dumps(trust)
    s3_policy = iam.get_role_policy(RoleName="ddrl-role-test", PolicyName="ddrl-s3-ddrl-test")
    resources = {r for s in s3_policy["PolicyDocument"]["Statement"] for r in [s["Resource"]]}
    assert resources == {"arn:aws:s3:::ddrl-test", "arn:aws:s3:::ddrl-test/*"}
    for name in iam.list_role_policies(RoleName="ddrl-role-test")["PolicyNames"]:  # no s3:* on "*"
        document = iam.get_role_policy(RoleName="ddrl-role-test", PolicyName=name)["PolicyDocument"]
        for statement in document["Statement"]:
            assert statement["Resource"] != "*" or not any(
                a.startswith("s3") for a in statement["Action"]
            )
    # a given role is checked, not trusted blindly
    assert account.resolve_role(iam, arn, "ddrl-test") == arn
    with pytest.raises(UserError, match="no such role"):
        account.resolve_role(iam, "arn:aws:iam::123456789012:role/missing", "ddrl-test")
    with pytest.raises(UserError, match="not a role ARN"):
        account.resolve_role(
            iam, "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Dev/me", "ddrl-test"
        )
    lambda_trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                    "Principal": {"Service": "lambda.amazonaws.com"}}]}  # fmt: skip
    other = iam.create_role(
        RoleName="not-for-sagemaker", AssumeRolePolicyDocument=json.dumps(lambda_trust)
    )
    with pytest.raises(UserError, match="does not let SageMaker assume it"):
        account.resolve_role(iam, other["Role"]["Arn"], "ddrl-test")


def test_sigterm_once_the_launcher_registered_with_pid_1_asks_for_a_stop_and_kills_nothing(
    tmp_path,
):
    """From the moment PID 1 forwards SageMaker's SIGTERM to the launcher (it registered its
    PID), the signal must mean 'checkpoint, then stop', also while Ray is still starting."""
    code = (
        "import os, signal\n"
        "from sagemaker_rl import ray_launcher\n"
        "from ddrl.pipeline.training import StopRequest\n"
        "ray_launcher.register_for_stop_signal()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "print('stop requested:', StopRequest.requested)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
           "DDRL_TRAINING_PIDFILE": str(tmp_path / "training.pid")}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "stop requested: True" in proc.stdout
    assert not (tmp_path / "training.pid").exists(), "unregistered when the launcher ends"


TRAINER = """
import os, signal, sys, time
pidfile = os.environ.get("DDRL_TRAINING_PIDFILE")
if pidfile:
    open(pidfile, "w").write(str(os.getpid()))
signal.signal(signal.SIGTERM, lambda s, f: (print("trainer: SIGTERM", flush=True), sys.exit(0)))
print("trainer: up", flush=True)
time.sleep(20)
print("trainer: never stopped", flush=True)
"""


@pytest.mark.parametrize("with_bash_env", [False, True])
def test_sigterm_to_pid_1_reaches_training_only_through_the_images_bash_env(
    with_bash_env, tmp_path
):
    """SageMaker signals PID 1, the ContainerEntrypoint's bash: it drops SIGTERM (the control);
    with the image's BASH_ENV it becomes sagemaker_rl.pid1, which hands it to training, while the
    driver between them (here: a pipe through cat) carries the last lines."""
    from sagemaker_offline import local_mode

    prefix = local_mode.pid_namespace_prefix()
    if not prefix:
        pytest.skip("no PID namespaces on this machine (unshare needs root or user namespaces)")
    (tmp_path / "trainer.py").write_text(TRAINER)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "DDRL_TRAINING_PIDFILE": str(tmp_path / "training.pid")}  # fmt: skip
    env.pop("BASH_ENV", None)
    if with_bash_env:
        env["BASH_ENV"] = str(local_mode.BASH_ENV_FILE)
    container = subprocess.Popen(
        [*prefix, "/bin/bash", "-c", f"{sys.executable} {tmp_path / 'trainer.py'} | cat; echo driver: done"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        assert container.stdout.readline().strip() == "trainer: up"
        (pid1,) = Path(f"/proc/{container.pid}/task/{container.pid}/children").read_text().split()
        os.kill(int(pid1), signal.SIGTERM)  # as SageMaker: PID 1 only
        out, _ = container.communicate(timeout=30 if with_bash_env else 3)
    except subprocess.TimeoutExpired:
        container.kill()
        out, _ = container.communicate()
    if with_bash_env:
        assert "ddrl-init: SIGTERM -> training" in out and "trainer: SIGTERM" in out
        assert "driver: done" in out and container.returncode == 0, out
    else:
        assert "trainer: SIGTERM" not in out, "a plain bash as PID 1 forwards nothing"


@pytest.mark.slow
def test_a_job_stopped_at_its_max_runtime_checkpoints_and_exports_through_pid_1(
    offline_aws, tmp_path, docker_image_or_none
):
    """The whole chain as SageMaker runs it: SDK v3's driver as PID 1 of the container, SIGTERM
    to it at MaxRuntimeInSeconds, sagemaker_rl.pid1 hands it to training, which checkpoints,
    exports the model and ends the job cleanly. In the real image where Docker is (CI: always),
    else as PID 1 of a PID namespace of this machine."""
    import tarfile

    from sagemaker.train.configs import StoppingCondition

    from sagemaker_offline import local_mode

    if docker_image_or_none is None and not local_mode.pid_namespace_prefix():
        pytest.skip("no PID namespaces on this machine (unshare needs root or user namespaces)")
    s3 = offline_aws.client("s3")
    # the stop must come after the launcher registered with PID 1 (a loaded CI machine took 40 s
    # to get there); from then on, at any point, training checkpoints before it ends
    job, lines = run_sdk_job(
        offline_aws, tmp_path, "stopped",
        {**TINY["ppo"], "stop__iterations": 100000, "checkpoint__every": 3},
        image=docker_image_or_none,
        stopping_condition=StoppingCondition(max_runtime_in_seconds=75),
    )  # fmt: skip
    log = "\n".join(lines)
    assert "MaxRuntimeInSeconds (75) reached" in log
    assert "ddrl-init: SIGTERM -> training" in log, log[-3000:]
    assert "stopped on SIGTERM after checkpointing" in log, log[-3000:]
    assert job.exit_code == 0, log[-3000:]
    bucket, key = parse_s3_url(job.model_artifact)
    (tmp_path / "model.tar.gz").write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    with tarfile.open(tmp_path / "model.tar.gz") as tar:
        names = tar.getnames()
    assert "model.json" in names and any(n.endswith("rllib_checkpoint.json") for n in names), names


STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # no print: its driver, a pipe, dies at SIGTERM
print("stubborn: up", flush=True)
time.sleep(600)
"""


def test_a_job_that_ignores_its_stop_is_killed_after_the_grace_period(offline_aws, tmp_path):
    """SageMaker kills the container 120 s after its SIGTERM (here: 5 s), whatever training does
    with the signal: a stop that takes longer than the grace loses what it had not saved."""
    from sagemaker.train.configs import StoppingCondition

    from sagemaker_offline import local_mode

    source = tmp_path / "stubborn"
    source.mkdir()
    (source / "stubborn.py").write_text(STUBBORN)
    started = time.monotonic()
    job, lines = run_sdk_job(
        offline_aws, tmp_path, "stubborn", {}, source_dir=source, entry_script="stubborn.py",
        stopping_condition=StoppingCondition(max_runtime_in_seconds=30),  # it is up by then
        run_options={"stop_grace_s": 5.0},
    )  # fmt: skip
    log = "\n".join(lines)
    assert local_mode.STOP_GRACE_S == 120.0
    up, stop = log.find("stubborn: up"), log.find("MaxRuntimeInSeconds (30) reached")
    assert 0 <= up < stop, log[-2000:]  # it ignored a SIGTERM it had a handler for
    assert "still running 5 s after SIGTERM: killing the job (SIGKILL)" in log, log[-2000:]
    assert not job.succeeded and time.monotonic() - started < 120


def test_the_notebooks_offline_server_logs_to_a_file_not_to_the_cells(monkeypatch, capfd):
    """What the notebook's MODE=local starts: its HTTP access lines and the tracebacks of calls it
    does not implement (here iam:SimulateCustomPolicy) go to a file, not to the cells."""
    import boto3

    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "SAGEMAKER_VALIDATE_ROLE"):  # fmt: skip
        monkeypatch.setenv(name, os.environ.get(name, ""))  # restored after the test
    log_file = aws_server.OFFLINE_SERVER_LOG
    earlier = log_file.stat().st_size if log_file.exists() else 0  # the file is appended to
    server = aws_server.start_offline_aws("us-west-2")
    try:
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(
            Bucket="quiet-test", CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
        )
        s3.list_objects_v2(Bucket="quiet-test")
        iam = boto3.client("iam", region_name="us-west-2")
        with pytest.raises(Exception):  # moto has no SimulateCustomPolicy
            iam.simulate_custom_policy(PolicyInputList=["{}"], ActionNames=["s3:GetObject"])
    finally:
        server.stop()
        os.environ.pop("AWS_ENDPOINT_URL", None)
    printed = capfd.readouterr()
    assert "HTTP/1.1" not in printed.out + printed.err and "Traceback" not in printed.err, printed
    log = log_file.read_bytes()[earlier:].decode(errors="replace")
    assert "PUT /quiet-test HTTP/1.1" in log and "NotImplementedError" in log


def test_the_shipped_package_holds_no_offline_stand_in():
    """sagemaker_rl is what the image ships: every module imports without the offline stand-ins
    (sagemaker_offline) and without moto."""
    import pkgutil

    import sagemaker_rl

    names = [m.name for m in pkgutil.iter_modules(sagemaker_rl.__path__, "sagemaker_rl.")]
    assert "sagemaker_rl.ray_launcher" in names
    assert not {"sagemaker_rl.local_mode", "sagemaker_rl.pipeline"} & set(
        names
    )  # offline, notebook
    code = (
        "import importlib, sys; sys.modules['sagemaker_offline'] = None; sys.modules['moto'] = None; "
        f"[importlib.import_module(n) for n in {names!r}]; print('imported', len({names!r}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == str(len(names))


def record_training_job(offline_aws, name: str, **extra) -> dict:
    sm = offline_aws.client("sagemaker")
    sm.create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1",
                                "TrainingInputMode": "File"},
        RoleArn=account.ensure_role(offline_aws.client("iam"), "ddrl-test"),
        OutputDataConfig={"S3OutputPath": "s3://ddrl-test/jobs"},
        ResourceConfig={"InstanceType": "ml.c5.4xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 600},
        **extra,
    )  # fmt: skip
    return sm.describe_training_job(TrainingJobName=name)


def test_continue_from_an_earlier_job_takes_its_checkpoints_and_refuses_what_cannot_continue(
    offline_aws,
):
    from sagemaker_notebook import jobs

    sm, s3 = offline_aws.client("sagemaker"), offline_aws.client("s3")
    account.ensure_bucket(s3, "ddrl-test", "us-west-2")  # the offline server may hold it
    uri = "s3://ddrl-test/ddrl-humanoid/checkpoints/ppo-20261203-000000"
    for name in ("ddrl-humanoid-ppo-1", "ddrl-humanoid-ppo-2"):
        record_training_job(
            offline_aws,
            name,
            CheckpointConfig={"S3Uri": f"{uri}-{name}", "LocalPath": "/opt/ml/checkpoints"},
        )
        if sm.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] == "InProgress":
            with pytest.raises(UserError, match="still InProgress"):
                jobs.checkpoint_uri_of(sm, s3, name, "ppo")
            sm.stop_training_job(TrainingJobName=name)
    s3.put_object(
        Bucket="ddrl-test",
        Key="ddrl-humanoid/checkpoints/ppo-20261203-000000-ddrl-humanoid-ppo-1/experiment.yaml",
        Body=b"env: x",
    )
    assert (
        jobs.checkpoint_uri_of(sm, s3, "ddrl-humanoid-ppo-1", "ppo") == f"{uri}-ddrl-humanoid-ppo-1"
    )
    with pytest.raises(UserError, match="kept no checkpoints"):  # nothing was uploaded
        jobs.checkpoint_uri_of(sm, s3, "ddrl-humanoid-ppo-2", "ppo")
    with pytest.raises(UserError, match="not a SAC training job"):
        jobs.checkpoint_uri_of(sm, s3, "ddrl-humanoid-ppo-1", "sac")
    with pytest.raises(UserError, match="no training job 'typo-job'"):
        jobs.checkpoint_uri_of(sm, s3, "typo-job", "ppo")


def put_points(cloudwatch, job: str, points: list[tuple]) -> None:
    """(time, metric name, value) points, as SageMaker publishes its metric definitions' matches."""
    data = [
        {"MetricName": name, "Value": value, "Timestamp": when,
         "Dimensions": [{"Name": "TrainingJobName", "Value": job}]}
        for when, name, value in points
    ]  # fmt: skip
    for start in range(0, len(data), 500):
        cloudwatch.put_metric_data(
            Namespace="/aws/sagemaker/TrainingJobs", MetricData=data[start : start + 500]
        )


def test_on_aws_the_metrics_are_sagemakers_own(offline_aws):
    """MODE="aws" reads the job's metrics as SageMaker publishes them (CloudWatch Metrics, one
    point a minute); here the points are put into the offline CloudWatch as SageMaker would."""
    described = record_training_job(offline_aws, "metrics-job")
    values = {"episode_return_mean": 12.5, "env_steps": 4000.0, "training_iteration": 2.0}
    cloudwatch = offline_aws.client("cloudwatch")
    put_points(
        cloudwatch,
        "metrics-job",
        [(described["TrainingStartTime"], n, v) for n, v in values.items()],
    )
    frame = monitoring.job_metrics(
        offline_aws.client("sagemaker"),
        cloudwatch,
        offline_aws.client("logs"),
        "metrics-job",
        "aws",
    )
    assert len(frame) == 1 and {"minutes", *values} <= set(frame.columns), frame
    for name, value in values.items():
        assert frame[name].iloc[0] == value
    monitoring.plot_metrics(frame, "metrics-job")  # the notebook's figure takes either source


def test_metrics_pair_values_of_the_same_iteration(offline_aws):
    """Each metric first appears at its own minute (the return only once an episode ended): a
    row holds the values of one minute, not each metric's n-th point."""
    started = record_training_job(offline_aws, "pairing-job")["TrainingStartTime"]
    minute = datetime.timedelta(minutes=1)
    points = [(started + k * minute, "training_iteration", float(k + 1)) for k in range(5)]
    points += [(started + k * minute, "episode_return_mean", 10.0 * (k + 1)) for k in range(2, 5)]
    cloudwatch = offline_aws.client("cloudwatch")
    put_points(cloudwatch, "pairing-job", points)
    described = {"TrainingJobName": "pairing-job", "TrainingStartTime": started,
                 "TrainingEndTime": started + 6 * minute}  # fmt: skip
    frame = monitoring.sagemaker_metrics(cloudwatch, described)
    assert frame["training_iteration"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    paired = frame.dropna(subset=["episode_return_mean"])
    assert (paired["episode_return_mean"] == 10 * paired["training_iteration"]).all(), frame


def test_metrics_of_a_starting_job_and_of_a_long_one_do_not_raise(offline_aws):
    cloudwatch = offline_aws.client("cloudwatch")
    # while a job starts, AWS's description has no TrainingStartTime: no rows, no KeyError
    starting = {"TrainingJobName": "starting-job", "TrainingJobStatus": "InProgress"}
    assert monitoring.sagemaker_metrics(cloudwatch, starting).empty
    # 30 hours, a point a minute: one request of a minute's period would ask for 1,800 points
    started = record_training_job(offline_aws, "long-job")["TrainingStartTime"]
    minute = datetime.timedelta(minutes=1)
    put_points(
        cloudwatch,
        "long-job",
        [(started + k * minute, "training_iteration", float(k)) for k in range(30 * 60)],
    )
    periods = []
    real = cloudwatch.get_metric_statistics

    def counted(**request):
        periods.append(request["Period"])
        return real(**request)

    cloudwatch.get_metric_statistics = counted
    described = {"TrainingJobName": "long-job", "TrainingStartTime": started,
                 "TrainingEndTime": started + 30 * 60 * minute}  # fmt: skip
    frame = monitoring.sagemaker_metrics(cloudwatch, described)
    asked = (30 * 60 + 1) * 60 / periods[0]
    assert asked <= monitoring.CLOUDWATCH_MAX_POINTS, periods
    assert 0 < len(frame) <= monitoring.CLOUDWATCH_MAX_POINTS
    assert frame["training_iteration"].is_monotonic_increasing


class PagedLogs:
    """CloudWatch Logs as AWS pages a stream: a page may be empty before the stream's end, and
    the end is the token given back unchanged (moto never returns such an empty page)."""

    class exceptions:
        ResourceNotFoundException = KeyError

    def __init__(self, pages: list[list[str]]):
        self.pages = pages

    def get_paginator(self, name):
        assert name == "describe_log_streams"
        return type(
            "Paginator",
            (),
            {"paginate": lambda self, **k: [{"logStreams": [{"logStreamName": "job/algo-1"}]}]},
        )()

    def get_log_events(self, nextToken=None, **kwargs):
        index = int(nextToken or 0)
        if index >= len(self.pages):
            return {"events": [], "nextForwardToken": nextToken}
        events = [
            {"timestamp": 1000 * index + k, "message": m} for k, m in enumerate(self.pages[index])
        ]
        return {"events": events, "nextForwardToken": str(index + 1)}


def test_the_log_reader_reads_past_an_empty_page():
    logs = PagedLogs([["first"], [], ["after an empty page"], []])
    assert [m for _, m in monitoring.log_lines(logs, "job")] == ["first", "after an empty page"]


def test_clean_up_removes_what_a_run_made_and_keeps_what_it_did_not(offline_aws):
    iam, s3, sm, ecr, logs = (
        offline_aws.client(n) for n in ("iam", "s3", "sagemaker", "ecr", "logs")
    )
    bucket = account.ensure_bucket(s3, "ddrl-cleanup-test", "us-west-2")
    for key in ("run/a.txt", "run/sub/b.txt", "other/c.txt"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    assert cleanup.delete_prefix(s3, bucket, "run/") == 2
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["other/c.txt"]

    try:
        logs.create_log_group(logGroupName=monitoring.LOG_GROUP)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    many = [f"cleanup-1/algo-{i}-1" for i in range(1, 61)]  # more than one page (50)
    for stream in (*many, "cleanup-2/algo-1-1"):
        logs.create_log_stream(logGroupName=monitoring.LOG_GROUP, logStreamName=stream)
    assert cleanup.delete_log_streams(logs, ["cleanup-1"]) == 60
    left = logs.describe_log_streams(
        logGroupName=monitoring.LOG_GROUP, logStreamNamePrefix="cleanup-"
    )
    assert [s["logStreamName"] for s in left["logStreams"]] == ["cleanup-2/algo-1-1"]

    image.ensure_repository(ecr, "ddrl-cleanup-test")
    assert cleanup.delete_repository(ecr, "ddrl-cleanup-test")
    assert not cleanup.delete_repository(ecr, "ddrl-cleanup-test")

    # a deployment that failed after its model: the model goes, the rest was never made
    role = account.ensure_role(iam, "ddrl-test", name=account.ROLE_NAME)
    trust = iam.get_role(RoleName=account.ROLE_NAME)["Role"]["AssumeRolePolicyDocument"]
    trust = json.loads(trust) if isinstance(trust, str) else trust
    caller = offline_aws.client("sts").get_caller_identity()["Account"]
    assert trust["Statement"][0]["Condition"] == {"StringEquals": {"aws:SourceAccount": caller}}
    sm.create_model(ModelName="half", ExecutionRoleArn=role,
                    PrimaryContainer={"Image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1"})  # fmt: skip
    assert cleanup.delete_endpoint(sm, "half") == ["model"]
    assert "half" not in [m["ModelName"] for m in sm.list_models()["Models"]]

    other = account.ensure_role(iam, "ddrl-test", name="someone-elses")
    assert "kept the role someone-elses" in cleanup.delete_created_role(iam, other)
    assert cleanup.delete_created_role(iam, role) == f"deleted the role {account.ROLE_NAME}"
    names = [r["RoleName"] for r in iam.list_roles()["Roles"]]
    assert account.ROLE_NAME not in names and "someone-elses" in names


def test_the_image_base_mirror_comes_from_apt_or_the_setting_never_a_built_in_host(
    tmp_path, monkeypatch
):
    from sagemaker_offline import image as offline_image

    monkeypatch.delenv(offline_image.MIRROR_VARIABLE, raising=False)
    with pytest.raises(UserError, match=offline_image.MIRROR_VARIABLE):
        offline_image.apt_mirror(tmp_path)
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n"
    )
    assert offline_image.apt_mirror(tmp_path) == "http://mirror.example/debian"
    monkeypatch.setenv(offline_image.MIRROR_VARIABLE, "http://other.example/debian")
    assert offline_image.apt_mirror(tmp_path) == "http://other.example/debian"


def test_an_image_tag_never_pushed_is_refused_before_any_instance_starts(
    offline_aws, monkeypatch, tmp_path
):
    ecr = offline_aws.client("ecr")
    uri = image.ensure_repository(ecr, "ddrl-pushed-test")
    with pytest.raises(UserError, match="not in ECR.*BUILD_IMAGE = True"):
        image.check_pushed(ecr, f"{uri}:0123456789ab")
    manifest = json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"}
    )
    ecr.put_image(
        repositoryName="ddrl-pushed-test", imageManifest=manifest, imageTag="0123456789ab"
    )
    image.check_pushed(ecr, f"{uri}:0123456789ab")
    # building needs Docker: without it, one line saying what to do instead
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="needs Docker"):
        image.build_and_push(ecr, f"{uri}:0123456789ab", gpu=False)


def test_the_notebook_finds_its_job_by_its_runs_own_base_name(offline_aws):
    from sagemaker_notebook import jobs

    sm = offline_aws.client("sagemaker")
    role = account.ensure_role(offline_aws.client("iam"), "ddrl-test")
    for name in ("ddrl-humanoid-ppo-20260101-000000-2026-01-01-00-00-01-001",
                 "ddrl-humanoid-ppo-20260101-000000-2026-01-01-00-00-02-002",
                 "ddrl-humanoid-ppo-20260202-000000-2026-02-02-00-00-01-001"):  # fmt: skip
        sm.create_training_job(
            TrainingJobName=name, RoleArn=role,
            AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1",
                                    "TrainingInputMode": "File"},
            OutputDataConfig={"S3OutputPath": "s3://ddrl-test/out"},
            ResourceConfig={"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
            StoppingCondition={"MaxRuntimeInSeconds": 60},
        )  # fmt: skip
    assert jobs.newest_job(sm, "ddrl-humanoid-ppo-20260101-000000") == (
        "ddrl-humanoid-ppo-20260101-000000-2026-01-01-00-00-02-002"
    )
    with pytest.raises(UserError, match="no training job named"):
        jobs.newest_job(sm, "ddrl-humanoid-sac-20260101-000000")


def _distribution_closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require, as installed here (extras left out)."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen, todo = set(), [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return seen


def test_the_notebook_driving_aws_imports_nothing_beyond_its_lean_requirements():
    """The notebook side once needed the whole training stack (Ray, CUDA torch) on a notebook
    instance: every import of the notebook's cells must come from requirements-aws.txt (and what
    it requires) or the pipeline's own packages. In a child interpreter, importing anything else
    installed here fails."""
    import ast
    import importlib.metadata as metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lean = {
        Requirement(line.split("#")[0]).name
        for line in (PIPELINE / "requirements-aws.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    }
    allowed = _distribution_closure(lean)
    ours = {"ddrl", "sagemaker_rl", "sagemaker_notebook", "sagemaker_offline"}
    blocked = sorted(
        module
        for module, dists in metadata.packages_distributions().items()
        if not any(canonicalize_name(d) in allowed for d in dists) and module not in ours
    )
    assert {"ray", "torch", "pybullet", "gymnasium"} <= set(blocked)
    assert "sagemaker" not in blocked and "boto3" not in blocked
    imports = "\n".join(  # every import of every code cell (those of DEPLOY's local branch too)
        ast.unparse(node)
        for cell in notebook_cells().values()
        for node in ast.walk(ast.parse(cell))
        if isinstance(node, ast.Import | ast.ImportFrom)
        and getattr(node, "module", None) != "IPython.display"  # Jupyter's own
    )
    child = f"""
import importlib.abc, sys
BLOCKED = set({blocked!r})  # installed here, not by the lean requirements
class Lean(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"not in the lean install: {{name}}")
sys.meta_path.insert(0, Lean())
exec({imports!r})
from sagemaker_notebook import account, cleanup, costs, image, jobs, monitoring, parameters
print(image.image_uri("r", "t", "ml.g5.xlarge"), costs.estimate_endpoint("ml.c5.large")[:30])
print("lean ok")
"""
    proc = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=300, cwd=PIPELINE
    )
    assert proc.returncode == 0 and "lean ok" in proc.stdout, proc.stderr[-3000:]
