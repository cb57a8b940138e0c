"""Where two SageMaker jobs meet: the primary publishes its Ray head, the secondary finds it.

Heterogeneous scaling (seed 002): a *primary* job on GPU instances runs the Ray head, the driver
and the learner; a *secondary* job on CPU instances only contributes env runners. Both jobs run
in the same VPC (give both the same subnets and a security group that lets them talk), so the
secondary's hosts can reach the primary's head, once they know its address. The jobs share
nothing else but S3, so the address goes there::

    <rendezvous uri>/head.json     {"address": "10.0.1.23:6379", "job": ..., "time": ...}
    <rendezvous uri>/status.json   {"status": "done" | "failed", "time": ...} when training ends

The URI is ``s3://bucket/prefix`` (one prefix per run: the notebook makes a fresh one), or
``file:///path`` for tests on one machine.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import urlparse

from ddrl.errors import UserError

HEAD_KEY = "head.json"
STATUS_KEY = "status.json"


class Rendezvous:
    def __init__(self, uri: str, client=None):
        parsed = urlparse(uri)
        if parsed.scheme not in ("s3", "file") or (parsed.scheme == "s3" and not parsed.netloc):
            raise UserError(
                f"rendezvous_s3_uri {uri!r}: expected s3://bucket/prefix (or file:///path in tests)."
            )
        self.uri = uri.rstrip("/")
        self.scheme = parsed.scheme
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self._client = client

    # --------------------------------------------------------------------------- storage
    @property
    def client(self):
        if self._client is None:
            import boto3

            self._client = boto3.client("s3")
        return self._client

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _put(self, name: str, data: dict) -> None:
        body = json.dumps(data).encode()
        if self.scheme == "file":
            path = Path("/" + self.prefix) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.with_suffix(".partial").write_bytes(body)
            path.with_suffix(".partial").replace(path)
        else:
            self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=body)

    def _get(self, name: str) -> dict | None:
        if self.scheme == "file":
            path = Path("/" + self.prefix) / name
            return json.loads(path.read_text()) if path.is_file() else None
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(name))["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None
        return json.loads(body)

    def _delete(self, name: str) -> None:
        if self.scheme == "file":
            (Path("/" + self.prefix) / name).unlink(missing_ok=True)
        else:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(name))

    # ------------------------------------------------------------------------------ API
    def publish_head(self, address: str, job: str) -> None:
        """Primary: announce the head (and forget any status of an earlier attempt)."""
        self._delete(STATUS_KEY)
        self._put(HEAD_KEY, {"address": address, "job": job, "time": time.time()})

    def wait_for_head(self, timeout: float, poll_s: float = 5.0, newer_than: float = 0.0) -> dict:
        """Secondary: the head's record, once published (and newer than ``newer_than``)."""
        deadline = time.time() + timeout
        while True:
            record = self._get(HEAD_KEY)
            if record and record.get("time", 0) > newer_than:
                return record
            if time.time() >= deadline:
                raise UserError(
                    f"no Ray head published at {self.uri}/{HEAD_KEY} within {timeout:.0f} s. Start the "
                    "primary job with the same rendezvous_s3_uri, or raise join_timeout_s."
                )
            time.sleep(poll_s)

    def mark_finished(self, status: str) -> None:
        self._put(STATUS_KEY, {"status": status, "time": time.time()})

    def finished(self) -> str | None:
        record = self._get(STATUS_KEY)
        return record.get("status") if record else None
