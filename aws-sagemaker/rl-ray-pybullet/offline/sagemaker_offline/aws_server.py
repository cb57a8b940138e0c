"""An offline AWS for the notebook's ``local`` mode and the tests: a moto server on a free local
port, every AWS client of this process pointed at it, its own log kept out of the cells."""

from __future__ import annotations

import json
import os
from pathlib import Path


def start_offline_aws(region: str):
    """Start a moto server on a free local port and point every AWS client of this process at it.

    Returns the server (``.stop()`` it at the end), or None if ``AWS_ENDPOINT_URL`` already names one.
    """
    if os.environ.get("AWS_ENDPOINT_URL"):
        return None
    quiet_offline_server()
    add_policy_simulation()
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    use_offline_credentials(f"http://{host}:{port}", region)
    return server


#: where the offline server's own log goes (its HTTP access lines, and the tracebacks of calls it
#: does not implement), instead of the notebook's cells
OFFLINE_SERVER_LOG = Path(os.environ.get("TMPDIR", "/tmp")) / "ddrl-offline-aws.log"


def quiet_offline_server() -> None:
    """Send the stand-in server's log (werkzeug, moto) to OFFLINE_SERVER_LOG only."""
    import logging

    handler = logging.FileHandler(OFFLINE_SERVER_LOG)
    for name in ("werkzeug", "moto"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.propagate = False


#: what ``use_offline_credentials`` sets or clears, with the values it found (None: unset)
_SAVED: dict[str, str | None] | None = None


def use_offline_credentials(endpoint: str, region: str) -> None:
    """Point this process's AWS clients at the offline server, with fake credentials; the values
    they replace are kept for ``restore_credentials``."""
    global _SAVED
    offline = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        # the SDK validates the role with iam:SimulatePrincipalPolicy, which moto lacks
        "SAGEMAKER_VALIDATE_ROLE": "false",
    }
    cleared = ("AWS_SESSION_TOKEN", "AWS_PROFILE")
    if _SAVED is None:
        _SAVED = {name: os.environ.get(name) for name in (*offline, *cleared)}
    os.environ.update(offline)
    for name in cleared:
        os.environ.pop(name, None)


def restore_credentials() -> bool:
    """Undo ``use_offline_credentials`` in this process, so that a notebook kernel that ran
    ``MODE = "local"`` reaches AWS with the user's own credentials, profile and region when it
    switches to ``MODE = "aws"``. False if there was nothing to undo."""
    global _SAVED
    if _SAVED is None:
        return False
    for name, value in _SAVED.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _SAVED = None
    return True


#: The identity moto answers for credentials it did not issue (``testing``): unrestricted, as moto
#: enforces no policy. ``allow_offline_caller`` gives it an IAM user that says so.
OFFLINE_CALLER = "moto"


def add_policy_simulation() -> None:
    """Give the offline server IAM's ``SimulatePrincipalPolicy``, which moto lacks: each action is
    judged against the principal's own policies (inline, attached and, for a user, its groups')
    with moto's policy evaluator: an explicit deny wins, then an allow, else ``implicitDeny``, as
    IAM decides for one account without boundaries or organization policies. An unknown user or
    role is ``NoSuchEntity``, as on AWS."""
    from moto.iam.responses import IamResponse

    IamResponse.simulate_principal_policy = _simulate_principal_policy


def _simulate_principal_policy(self):
    from moto.core.responses import ActionResult
    from moto.iam.access_control import IAMPolicy, PermissionResult

    source = self._get_param("PolicySourceArn")
    kind, _, path = source.split(":", 5)[-1].partition("/")
    name = path.rsplit("/", 1)[-1]
    if kind == "user":
        principal = self.backend.get_user(name)
        holders = [principal, *self.backend.get_groups_for_user(name)]
    else:
        holders = [self.backend.get_role(name)]
    policies = [IAMPolicy(doc) for holder in holders for doc in holder.policies.values()]
    policies += [IAMPolicy(p) for holder in holders for p in holder.managed_policies.values()]
    results = []
    for action in self._get_param("ActionNames", []):
        for resource in self._get_param("ResourceArns") or ["*"]:
            outcomes = {policy.is_action_permitted(action, resource) for policy in policies}
            if PermissionResult.DENIED in outcomes:
                decision = "explicitDeny"
            elif PermissionResult.PERMITTED in outcomes:
                decision = "allowed"
            else:
                decision = "implicitDeny"
            results.append(
                {"EvalActionName": action, "EvalResourceName": resource, "EvalDecision": decision}
            )
    return ActionResult({"EvaluationResults": results, "IsTruncated": False})


def allow_offline_caller(iam) -> None:
    """Make moto's default identity an IAM user with every right (what moto grants it), so that
    the rights check simulates its policy offline as it simulates yours on AWS."""
    try:
        iam.create_user(UserName=OFFLINE_CALLER)
    except iam.exceptions.EntityAlreadyExistsException:
        return
    iam.put_user_policy(
        UserName=OFFLINE_CALLER,
        PolicyName="offline-everything",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
            }
        ),
    )
