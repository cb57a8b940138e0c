"""The training-container contract as SageMaker lays it out: ``/opt/ml`` (or any base folder)
and the ``SM_*`` variables of the SDK's driver, for local mode and the tests; the container reads
it with ``sagemaker_rl.contract``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sagemaker_rl.contract import BASE_DIR_VARIABLE, Contract


def write_contract(
    base: str | os.PathLike,
    hyperparameters: dict,
    hosts: list[str] = ("algo-1",),
    current_host: str = "algo-1",
    instance_type: str = "ml.c5.4xlarge",
    channels: dict[str, str | os.PathLike | None] | None = None,
    instance_groups: list[tuple[str, str, list[str]]] | None = None,
) -> Contract:
    """Lay out a training container's folders and config files under ``base``, as SageMaker does.

    ``hyperparameters`` values are stored as strings (JSON for non-strings), as the API stores
    them. ``channels`` maps a channel name to a folder to copy into ``input/data/<name>`` (or None).
    ``instance_groups``: (name, instance type, hosts) of a heterogeneous job; then ``hosts`` and
    ``instance_type`` follow from them.
    """
    import shutil

    contract = Contract(Path(base))
    contract.config_dir.mkdir(parents=True, exist_ok=True)
    as_strings = {
        str(k): v if isinstance(v, str) else json.dumps(v) for k, v in hyperparameters.items()
    }
    contract.hyperparameters_file.write_text(json.dumps(as_strings, indent=2))
    groups = instance_groups or [("homogeneousCluster", instance_type, list(hosts))]
    hosts = [host for _, _, group_hosts in groups for host in group_hosts]
    current = next(g for g in groups if current_host in g[2])
    contract.resource_config_file.write_text(
        json.dumps(
            {
                "current_host": current_host,
                "current_instance_type": current[1],
                "current_group_name": current[0],
                "hosts": hosts,
                "instance_groups": [
                    {"instance_group_name": name, "instance_type": kind, "hosts": list(members)}
                    for name, kind, members in groups
                ],
                "network_interface_name": "eth0",
            },
            indent=2,
        )
    )
    channels = channels or {}
    contract.input_data_config_file.write_text(
        json.dumps(
            {
                name: {
                    "TrainingInputMode": "File",
                    "S3DistributionType": "FullyReplicated",
                    "RecordWrapperType": "None",
                }
                for name in channels
            },
            indent=2,
        )
    )
    for name, source in channels.items():
        target = contract.channel_dir(name)
        target.mkdir(parents=True, exist_ok=True)
        if source is not None:
            source = Path(source)
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target / source.name)
    for folder in (
        contract.model_dir,
        contract.checkpoints_dir,
        contract.intermediate_dir,
        contract.output_data_dir,
    ):
        folder.mkdir(parents=True, exist_ok=True)
    return contract


def container_environment(
    contract: Contract, num_cpus: int | None = None, num_gpus: int | None = None
) -> dict[str, str]:
    """The SM_* variables the SDK's container driver exports, for the contract at ``contract.base``."""
    config = contract.resource_config()
    hosts = contract.hosts
    hps = contract.hyperparameters()
    env = {
        BASE_DIR_VARIABLE: str(contract.base),
        "SM_MODEL_DIR": str(contract.model_dir),
        "SM_INPUT_DIR": str(contract.base / "input"),
        "SM_INPUT_CONFIG_DIR": str(contract.config_dir),
        "SM_OUTPUT_DIR": str(contract.output_dir),
        "SM_OUTPUT_DATA_DIR": str(contract.output_data_dir),
        "SM_OUTPUT_INTERMEDIATE_DIR": str(contract.intermediate_dir),
        "SM_CHECKPOINT_DIR": str(contract.checkpoints_dir),
        "SM_CURRENT_HOST": config["current_host"],
        "SM_CURRENT_INSTANCE_TYPE": config.get("current_instance_type", "local"),
        "SM_HOSTS": json.dumps(hosts),
        "SM_HOST_COUNT": str(len(hosts)),
        "SM_CURRENT_HOST_RANK": str(hosts.index(config["current_host"])),
        "SM_NUM_CPUS": str(num_cpus if num_cpus is not None else len(os.sched_getaffinity(0))),
        "SM_NUM_GPUS": str(num_gpus if num_gpus is not None else 0),
        "SM_HPS": json.dumps(hps),
        "SM_RESOURCE_CONFIG": json.dumps(config),
    }
    for name, value in hps.items():
        env[f"SM_HP_{name.replace('-', '_').upper()}"] = value
    return env
