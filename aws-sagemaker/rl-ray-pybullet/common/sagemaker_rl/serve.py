"""An inference server for a SageMaker endpoint: the policy of a model artifact behind HTTP.

SageMaker runs ``docker run <image> serve`` with the model artifact extracted into
``/opt/ml/model`` and sends ``GET /ping`` and ``POST /invocations`` to port 8080. Here::

    POST /invocations  {"observation": [44 floats]}            -> {"action": [17 floats]}
                       {"observations": [[...], [...]]}        -> {"actions": [[...], [...]]}

Actions are the deterministic policy's, through the same connectors as in training (what
``ddrl.policy.Policy`` applies), in the environment's action space. Each observation is
answered on its own (a fresh episode), which suits the stateless MLP policies trained here.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np


class PolicyServer:
    def __init__(self, model_dir: Path):
        from ddrl import rendering
        from ddrl.envs import toolkits
        from sagemaker_rl.artifacts import find_model

        model_dir = find_model(Path(model_dir))
        self.info = rendering.locate(model_dir, "pybullet-envs", model_dir)
        self.policy = rendering.Policy(self.info.checkpoint)
        spec_env = toolkits.make_env(
            self.info.toolkit or "pybullet-envs", self.info.env, self.info.env_config
        )
        self.observation_space, self.action_space = (
            spec_env.observation_space,
            spec_env.action_space,
        )
        spec_env.close()
        self.lock = threading.Lock()

    def act(self, observation) -> list[float]:
        from ray.rllib.env.single_agent_episode import SingleAgentEpisode

        obs = np.asarray(observation, dtype=self.observation_space.dtype)
        if obs.shape != self.observation_space.shape:
            raise ValueError(
                f"observation has shape {list(obs.shape)}, the policy expects {list(self.observation_space.shape)}"
            )
        episode = SingleAgentEpisode(
            observations=[obs],
            observation_space=self.observation_space,
            action_space=self.action_space,
        )
        with self.lock:
            env_action, _, _ = self.policy.act(episode, explore=False)
        return np.asarray(env_action, dtype=float).tolist()

    def invoke(self, body: dict) -> dict:
        if "observation" in body:
            return {"action": self.act(body["observation"])}
        if "observations" in body:
            return {"actions": [self.act(o) for o in body["observations"]]}
        raise ValueError('send {"observation": [...]} or {"observations": [[...], ...]}')


def make_server(model_dir: Path, host: str = "0.0.0.0", port: int = 8080) -> ThreadingHTTPServer:
    policy = PolicyServer(model_dir)

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/ping":
                self._send(
                    200,
                    {"status": "ok", "env": policy.info.env, "algorithm": policy.info.algorithm},
                )
            else:
                self._send(404, {"error": "GET /ping or POST /invocations"})

        def do_POST(self):
            if self.path != "/invocations":
                self._send(404, {"error": "POST /invocations"})
                return
            try:
                body = json.loads(
                    self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}"
                )
                self._send(200, policy.invoke(body))
            except (ValueError, TypeError, KeyError) as err:
                self._send(400, {"error": str(err)})

        def log_message(self, format, *args):  # one line per request on stderr is SageMaker's log
            sys.stderr.write("serve: " + format % args + "\n")

    server = ThreadingHTTPServer((host, port), Handler)
    server.policy = policy
    return server


def main(argv=None) -> int:
    import argparse

    from sagemaker_rl.contract import Contract

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", type=Path, default=None, help="model artifact (default: /opt/ml/model)"
    )
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    server = make_server(args.model or Contract.from_env().model_dir, port=args.port)
    print(
        f"serving {server.policy.info.algorithm} on {server.policy.info.env} at :{args.port}",
        flush=True,
    )
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
