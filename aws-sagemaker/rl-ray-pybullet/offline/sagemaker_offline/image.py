"""Build the pipeline's real training image on a machine that cannot reach image registries.

The Dockerfile starts from ``python:3.11-slim`` and installs the pinned requirements from the
package index; neither is reachable from this project's CI. So, with the same Dockerfile:

1. the base is Debian bookworm made with ``debootstrap`` (Python 3.11, as the slim image) and
   ``docker import``-ed as ``ddrl-base:bookworm``, once per machine (about 3 minutes);
2. the wheels of ``requirements.txt`` (and any pin the Dockerfile adds) are downloaded on the host
   (``pip download``, which reaches the registries through the host's configuration) into a
   wheelhouse, served to the build over HTTP on 127.0.0.1 (``WHEELHOUSE_URL``);
3. ``docker build --platform linux/amd64 --network host`` builds the image. Docker's layer cache
   makes a rebuild with unchanged requirements take seconds.

Run from anywhere: ``python -m sagemaker_offline.image`` (``--help``). Needs a running Docker
daemon (Debian: ``apt-get install docker.io debootstrap``, then ``dockerd &``) and root for
debootstrap.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ddrl.errors import UserError
from ddrl.paths import REPO_DIR

PIPELINE_DIR = REPO_DIR / "aws-sagemaker" / "rl-ray-pybullet"
DOCKERFILE = PIPELINE_DIR / "Dockerfile"
BUILD_LOG = Path(tempfile.gettempdir()) / "ddrl-image-build.log"
BASE_TAG = "ddrl-base:bookworm"
IMAGE_TAG = "ddrl-rl-ray-pybullet:local"
#: what the base adds to debootstrap's minimal Debian: what python:3.11-slim has, and the image's
#: own system packages (so that the build needs no apt mirror)
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "libosmesa6", "procps")
#: The setting that names the Debian mirror debootstrap fetches the base from, where the
#: machine's apt sources name none.
MIRROR_VARIABLE = "DDRL_DEBIAN_MIRROR"
WHEELHOUSE_PORT = 47601


def docker(*args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], check=check, text=True, **kwargs)


def why_docker_unavailable() -> str | None:
    """None when a Docker daemon answers; else why not, in one line."""
    if shutil.which("docker") is None:
        return "no docker command (Debian: apt-get install docker.io)"
    probe = docker("info", "--format", "{{.ServerVersion}}", check=False, capture_output=True)
    if probe.returncode != 0:
        return "the Docker daemon does not answer (start it: dockerd &)"
    return None


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False, capture_output=True).returncode == 0


def apt_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror for debootstrap: ``DDRL_DEBIAN_MIRROR``, else the one this machine's
    apt sources name; neither is one line saying so (no mirror host is assumed)."""
    named = os.environ.get(MIRROR_VARIABLE, "").strip()
    if named:
        return named
    for source in sorted(apt_dir.glob("sources.list.d/*.sources")):
        found = re.search(r"^URIs:\s*(\S+/debian)\s*$", source.read_text(), re.M)
        if found:
            return found.group(1)
    listing = apt_dir / "sources.list"
    if listing.is_file():
        found = re.search(r"^deb\s+(\S+/debian)\s+bookworm", listing.read_text(), re.M)
        if found:
            return found.group(1)
    raise UserError(
        f"no Debian mirror to make the image's base from: this machine's apt sources ({apt_dir}) "
        f"name none; set {MIRROR_VARIABLE} to a Debian mirror's URL (ending in /debian)."
    )


def ensure_base(tag: str = BASE_TAG, progress=print) -> str:
    """The debootstrap-made bookworm base, made and imported unless Docker already has it."""
    if image_exists(tag):
        return tag
    if shutil.which("debootstrap") is None:
        raise UserError(
            f"no base image {tag} and no debootstrap to make it: apt-get install debootstrap"
        )
    mirror = apt_mirror()
    progress(f"image: making the base {tag} with debootstrap from {mirror} (a few minutes) ...")
    with tempfile.TemporaryDirectory(prefix="ddrl-rootfs-") as rootfs:
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                "bookworm",
                rootfs,
                mirror,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        docker("import", "-", tag, stdin=tar.stdout, stdout=subprocess.DEVNULL)
        tar.wait()
    return tag


def image_requirements() -> list[str]:
    """What the Dockerfile installs: requirements.txt and any pin it names itself."""
    extra = re.findall(r'"([A-Za-z0-9_.\-]+==[0-9][^"\s]*)"', DOCKERFILE.read_text())
    return ["-r", str(REPO_DIR / "requirements.txt"), *extra]


def fill_wheelhouse(folder: Path, progress=print) -> Path:
    """Every wheel the image installs, in ``folder`` (source distributions built into wheels)."""
    folder.mkdir(parents=True, exist_ok=True)
    progress(f"image: collecting the pinned wheels in {folder} ...")
    pip = [sys.executable, "-m", "pip"]
    with BUILD_LOG.open("a") as log:
        quiet = {"stdout": log, "stderr": subprocess.STDOUT, "check": True}
        subprocess.run([*pip, "download", "-d", str(folder), *image_requirements()], **quiet)
        for sdist in list(folder.glob("*.tar.gz")) + list(folder.glob("*.zip")):
            subprocess.run([*pip, "wheel", "--no-deps", "-w", str(folder), str(sdist)], **quiet)
            sdist.unlink()
    return folder


def stage_context(folder: Path) -> Path:
    """The build context: what ``Dockerfile.dockerignore`` lets in (its ``!`` lines), copied to
    ``folder`` (the classic builder, the one here, reads only a context's own .dockerignore)."""
    ignore = (DOCKERFILE.parent / "Dockerfile.dockerignore").read_text()
    for line in ignore.splitlines():
        if not line.startswith("!"):
            continue
        relative = line[1:].removesuffix("/**")
        source, target = REPO_DIR / relative, folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, target)
    shutil.copy2(DOCKERFILE, folder / "Dockerfile")
    return folder


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def build(
    tag: str = IMAGE_TAG,
    base: str = BASE_TAG,
    wheelhouse: Path | None = None,
    progress=print,
) -> str:
    """Build the pipeline's image as ``tag`` from the debootstrap base and a local wheelhouse."""
    why = why_docker_unavailable()
    if why:
        raise UserError(f"cannot build the image: {why}.")
    BUILD_LOG.write_text("")
    ensure_base(base, progress)
    wheelhouse = wheelhouse or Path(tempfile.gettempdir()) / "ddrl-wheelhouse"
    fill_wheelhouse(wheelhouse, progress)
    handler = functools.partial(_QuietHandler, directory=str(wheelhouse))
    try:  # the same URL every time: a build argument that changes defeats Docker's layer cache
        server = http.server.ThreadingHTTPServer(("127.0.0.1", WHEELHOUSE_PORT), handler)
    except OSError:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    context = tempfile.TemporaryDirectory(prefix="ddrl-image-context-")
    try:
        stage_context(Path(context.name))
        progress(f"image: docker build -t {tag} (from {base}; its output: {BUILD_LOG}) ...")
        with BUILD_LOG.open("a") as log:
            docker(
                "build",
                "--platform",
                "linux/amd64",
                "--network",
                "host",
                "--build-arg",
                f"BASE_IMAGE={base}",
                "--build-arg",
                f"WHEELHOUSE_URL=http://127.0.0.1:{server.server_address[1]}/",
                "-t",
                tag,
                context.name,
                env={**os.environ, "DOCKER_BUILDKIT": "0"},  # the classic builder: no buildx here
                stdout=log,
                stderr=subprocess.STDOUT,
            )
    finally:
        server.shutdown()
        context.cleanup()
    progress(f"image: {tag} built")
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tag", default=IMAGE_TAG, help=f"image tag (default: {IMAGE_TAG})")
    parser.add_argument("--base", default=BASE_TAG, help=f"base image tag (default: {BASE_TAG})")
    parser.add_argument(
        "--wheelhouse", type=Path, help="folder for the wheels (default: $TMPDIR/ddrl-wheelhouse)"
    )
    args = parser.parse_args(argv)
    try:
        build(args.tag, args.base, args.wheelhouse)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        command = " ".join(map(str, err.cmd[:3]))
        print(
            f"error: {command} ... failed (exit {err.returncode}); see {BUILD_LOG}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
