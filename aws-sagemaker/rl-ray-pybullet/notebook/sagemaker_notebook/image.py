"""The training image: its ECR repository, its tag (a hash of what goes into it), its build and push.

Used by ``humanoid-pipeline.ipynb``; each works the same against real AWS and against the
offline moto server of ``MODE = "local"`` (``sagemaker_offline``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ddrl.errors import UserError
from sagemaker_notebook.account import SAGEMAKER_NOTEBOOK_METADATA
from sagemaker_notebook.parameters import PIPELINE_DIR, REPO_DIR


def ensure_repository(ecr, name: str) -> str:
    try:
        return ecr.describe_repositories(repositoryNames=[name])["repositories"][0]["repositoryUri"]
    except ecr.exceptions.RepositoryNotFoundException:
        return ecr.create_repository(repositoryName=name)["repository"]["repositoryUri"]


#: what goes into the image, for its tag (relative to the repository root)
IMAGE_INPUTS = (
    "requirements.txt",
    "pyproject.toml",
    "cte-power/ddrl",
    "cte-power/trainings",
    "aws-sagemaker/rl-ray-pybullet/Dockerfile",
    "aws-sagemaker/rl-ray-pybullet/common",
    "aws-sagemaker/rl-ray-pybullet/src",
)


def image_tag() -> str:
    """A tag that names what the image holds: the first 12 hex digits of a hash of its inputs.
    A job records its image by tag, so a restarted spot job pulls the image it started with, not
    whatever was pushed as ``latest`` since."""
    import hashlib

    digest = hashlib.sha256()
    for name in IMAGE_INPUTS:
        root = REPO_DIR / name
        files = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(REPO_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def image_uri(repository_uri: str, tag: str, instance_type: str) -> str:
    """The image an instance type runs: the CUDA build (``-gpu``) on GPU instances, else the CPU
    build, several GB smaller to pull (an evaluation or an endpoint on a CPU instance after a GPU
    training job gets the CPU one)."""
    from sagemaker_notebook.parameters import is_gpu_instance

    return f"{repository_uri}:{tag}{'-gpu' if is_gpu_instance(instance_type) else ''}"


def docker_network(metadata_file: Path = SAGEMAKER_NOTEBOOK_METADATA) -> str | None:
    """The network ``docker build`` needs here: SageMaker Studio's Docker allows only its
    ``sagemaker`` network (a Studio space's metadata file names its domain); elsewhere Docker's own."""
    import json

    try:
        return "sagemaker" if "DomainId" in json.loads(metadata_file.read_text()) else None
    except (OSError, ValueError):
        return None


def build_commands(image_uri: str, gpu: bool, network: str | None = None) -> list[list[str]]:
    """``docker build`` (from the repository root: the image takes the shared core) and ``docker push``."""
    # SageMaker runs x86-64 (amd64) images: said explicitly, so that a build on an Apple-silicon
    # laptop does not make an arm64 image that fails on AWS
    build = ["docker", "build", "--platform", "linux/amd64", "-f", str(PIPELINE_DIR / "Dockerfile")]
    build += ["-t", image_uri]
    if network:
        build += ["--network", network]
    if not gpu:  # CPU instances: torch's CPU wheel (a smaller image); GPU ones take the CUDA build
        build += ["--build-arg", "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu"]
    return [build + [str(REPO_DIR)], ["docker", "push", image_uri]]


def check_pushed(ecr, image_uri: str) -> None:
    """Refuse, before any instance starts, an image tag that ECR does not hold (``BUILD_IMAGE =
    False`` after an edit: the tag hashes the code, so it names an image never pushed)."""
    repository, _, tag = image_uri.rpartition(":")
    name = repository.split("/", 1)[-1]
    try:
        ecr.describe_images(repositoryName=name, imageIds=[{"imageTag": tag}])
    except (ecr.exceptions.ImageNotFoundException, ecr.exceptions.RepositoryNotFoundException):
        raise UserError(
            f"image {image_uri} is not in ECR: its tag hashes the code that goes into the image, "
            "and this code was never pushed. Set BUILD_IMAGE = True to build and push it, or "
            "IMAGE_TAG to a tag that is in the repository."
        ) from None


def build_and_push(ecr, image_uri: str, gpu: bool, network: str | None = None) -> None:
    import base64

    if shutil.which("docker") is None:
        raise UserError(
            "BUILD_IMAGE = True needs Docker here (no docker command): install Docker, or set "
            "BUILD_IMAGE = False and IMAGE_TAG to an image already pushed to ECR."
        )
    token = ecr.get_authorization_token()["authorizationData"][0]
    user, password = base64.b64decode(token["authorizationToken"]).decode().split(":", 1)
    subprocess.run(
        ["docker", "login", "--username", user, "--password-stdin", token["proxyEndpoint"]],
        input=password.encode(),
        check=True,
    )
    for command in build_commands(image_uri, gpu, network):
        print("$", " ".join(command), flush=True)
        subprocess.run(command, check=True)


def images_for(repository_uri: str, tag: str, instance_types) -> dict[str, bool]:
    """The images the run's instance types need (URI -> GPU build?): a GPU training job with an
    evaluation or endpoint on CPU instances needs both builds."""
    uris = {image_uri(repository_uri, tag, kind) for kind in instance_types}
    return {uri: uri.endswith("-gpu") for uri in sorted(uris)}
