"""A stand-in for a Unity ML-Agents build: plays Unity's side of the ML-Agents protocol.

There is no Unity build offline, so the tests launch this instead, through ``MoveToTarget.x86_64``
(a launcher script named like a Linux Unity build). ``mlagents_envs.UnityEnvironment`` starts it
exactly as it starts a real build (``--mlagents-port N``, ``-nographics -batchmode``,
``-logFile PATH``), and it talks communication API 1.5.0 over real gRPC with the protobuf
messages of ``mlagents_envs.communicator_objects``, as the C# ``RpcCommunicator`` does:

1. connect to Python's gRPC server on ``localhost:<port>``;
2. ``Exchange`` the academy parameters (name, communication and package versions, capabilities),
   answered by Python's initialisation input (seed...); then ``Exchange`` an empty message,
   answered by Python's first command (a reset);
3. loop: act on the command (reset, or step with the actions of every agent that asked for a
   decision), send the agents' observations, rewards and episode ends (plus the behaviours'
   parameters the first time), receive the next command. A status 400 answer, or Python gone,
   ends the process.

The task ("move to target"): each agent is a point on the line [-1, 1] with a target on it. It
observes [position, target] and moves by 0.1 * action per step (one continuous action in [-1, 1],
or with a discrete behaviour one branch of 3: left, stay, right). Reward: the distance gained
towards the target each step, plus 1 on reaching it (within 0.05), which ends the episode; after
``--fake-max-steps`` steps the episode is interrupted (``max_step_reached``). As in Unity, an agent
whose episode ended starts the next one at once: it is reported done and, in the same message,
asking for a decision again.

Options for the tests (a real build ignores unknown arguments; so does this one):
``--fake-behaviours continuous,discrete`` (one behaviour per entry), ``--fake-agents N`` (agents
per behaviour), ``--fake-max-steps N``, ``--fake-api-version V`` (report another communication
version), ``--fake-no-connect`` (never connect: a build that hangs), ``--fake-exit-code N`` (exit at
once: a build that crashes).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import time
import uuid

import numpy as np

from ddrl.envs import mlagents_protobuf

API_VERSION = "1.5.0"
PACKAGE_VERSION = "2.3.0-exp.3"  # the com.unity.ml-agents release that speaks API 1.5.0
ENGINE_CONFIGURATION_CHANNEL = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")
TIME_SCALE = 2  # EngineConfigurationChannel.ConfigurationType.TIME_SCALE
SPEED = 0.1
REACHED = 0.05
BEHAVIOUR_NAMES = {"continuous": "MoveToTarget?team=0", "discrete": "MoveToTargetDiscrete?team=0"}


mlagents_protobuf.install()  # mlagents' messages under the installed protobuf (as ddrl.envs.unity does)

import grpc  # noqa: E402
from mlagents_envs.communicator_objects.agent_info_pb2 import AgentInfoProto  # noqa: E402
from mlagents_envs.communicator_objects.brain_parameters_pb2 import BrainParametersProto  # noqa: E402
from mlagents_envs.communicator_objects.command_pb2 import QUIT, RESET  # noqa: E402
from mlagents_envs.communicator_objects.observation_pb2 import NONE, ObservationProto  # noqa: E402
from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto  # noqa: E402
from mlagents_envs.communicator_objects.unity_to_external_pb2_grpc import UnityToExternalProtoStub  # noqa: E402


class Log:
    """Unity's player log: ``-logFile PATH``, ``-logFile -`` for stdout; without it, none here
    (a real player writes to ~/.config/unity3d/<company>/<product>/Player.log)."""

    def __init__(self, path: str | None):
        if path and path != "-":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.file = (
            None if not path else sys.stdout if path == "-" else open(path, "a", buffering=1)
        )

    def __call__(self, line: str) -> None:
        if self.file is not None:
            print(f"[fake-unity {os.getpid()}] {line}", file=self.file, flush=True)


class Agent:
    def __init__(self, agent_id: int, behaviour: str, discrete: bool, max_steps: int):
        self.id, self.behaviour, self.discrete, self.max_steps = (
            agent_id,
            behaviour,
            discrete,
            max_steps,
        )
        self.episodes = 0

    def begin_episode(self, rng: np.random.Generator) -> None:
        self.episodes += 1
        self.steps = 0
        self.position = float(rng.uniform(-1, 1))
        self.target = float(rng.uniform(-1, 1))
        while abs(self.target - self.position) < 0.4:
            self.target = float(rng.uniform(-1, 1))
        self.reward = 0.0

    def act(self, action) -> None:
        move = (
            (int(action.discrete_actions[0]) - 1)
            if self.discrete
            else float(np.clip(action.continuous_actions[0], -1, 1))
        )
        before = abs(self.target - self.position)
        self.position = float(np.clip(self.position + SPEED * move, -1, 1))
        after = abs(self.target - self.position)
        self.steps += 1
        self.reward = before - after
        self.reached = after < REACHED
        if self.reached:
            self.reward += 1.0

    def info(self, done: bool = False, interrupted: bool = False) -> AgentInfoProto:
        obs = ObservationProto(shape=[2], compression_type=NONE, name="VectorSensor_size2")
        obs.float_data.data.extend([self.position, self.target])
        return AgentInfoProto(
            reward=self.reward,
            done=done,
            max_step_reached=interrupted,
            id=self.id,
            observations=[obs],
        )


class FakeUnity:
    def __init__(self, args: argparse.Namespace, log: Log):
        self.args, self.log = args, log
        self.agents: list[Agent] = []
        kinds = [k.strip() for k in args.fake_behaviours.split(",") if k.strip()]
        for kind in kinds:
            if kind not in BEHAVIOUR_NAMES:
                raise SystemExit(
                    f"unknown behaviour kind {kind!r}; use {', '.join(BEHAVIOUR_NAMES)}"
                )
        self.behaviours = {BEHAVIOUR_NAMES[k]: k == "discrete" for k in kinds}
        for name, discrete in self.behaviours.items():
            for _ in range(args.fake_agents):
                self.agents.append(Agent(len(self.agents), name, discrete, args.fake_max_steps))
        self.rng = np.random.default_rng(0)
        self.sent_brains = False
        self.parent = os.getppid()

    # -- protocol ---------------------------------------------------------------------------
    def exchange(self, stub, message: UnityMessageProto) -> UnityMessageProto | None:
        """One Exchange call; None when Python has gone (closed channel, dead parent). It waits
        for Python's server to listen, as an Editor in Play mode keeps trying to connect."""
        future = stub.Exchange.future(message, wait_for_ready=True)
        while True:
            try:
                return future.result(timeout=1.0)
            except grpc.FutureTimeoutError:
                if os.getppid() != self.parent:  # the Python process that launched us died
                    future.cancel()
                    return None
            except grpc.RpcError as err:
                self.log(f"exchange failed: {err.code()}")
                return None

    def run(self, port: int) -> int:
        channel = grpc.insecure_channel(f"localhost:{port}")
        stub = UnityToExternalProtoStub(channel)
        hello = UnityMessageProto()
        hello.header.status = 200
        init = hello.unity_output.rl_initialization_output
        init.name = "FakeMoveToTarget"
        init.communication_version = self.args.fake_api_version
        init.package_version = PACKAGE_VERSION
        for capability in (
            "baseRLCapabilities",
            "concatenatedPngObservations",
            "compressedChannelMapping",
            "hybridActions",
            "trainingAnalytics",
            "variableLengthObservation",
            "multiAgentGroups",
        ):
            setattr(init.capabilities, capability, True)
        reply = self.exchange(stub, hello)
        if reply is None or reply.header.status != 200:
            self.log("python refused the academy parameters; quitting")
            return 1
        python = reply.unity_input.rl_initialization_input
        self.log(
            f"python: communication {python.communication_version}, package {python.package_version}, seed {python.seed}"
        )
        self.rng = np.random.default_rng(python.seed)
        empty = UnityMessageProto()
        empty.header.status = 200
        reply = self.exchange(stub, empty)
        while reply is not None and reply.header.status == 200:
            rl_input = reply.unity_input.rl_input
            self.read_side_channel(bytes(rl_input.side_channel))
            if rl_input.command == QUIT:
                break
            output = self.reset() if rl_input.command == RESET else self.step(rl_input)
            reply = self.exchange(stub, output)
        self.log("python closed the connection; quitting")
        channel.close()
        return 0

    def read_side_channel(self, data: bytes) -> None:
        offset = 0
        while offset + 20 <= len(data):
            channel = uuid.UUID(bytes_le=data[offset : offset + 16])
            (length,) = struct.unpack_from("<i", data, offset + 16)
            body = data[offset + 20 : offset + 20 + length]
            offset += 20 + length
            if channel == ENGINE_CONFIGURATION_CHANNEL and len(body) >= 8:
                (kind,) = struct.unpack_from("<i", body, 0)
                if kind == TIME_SCALE:
                    self.log(f"time_scale {struct.unpack_from('<f', body, 4)[0]:g}")

    # -- the task ---------------------------------------------------------------------------
    def reset(self) -> UnityMessageProto:
        self.log("reset")
        for agent in self.agents:
            agent.begin_episode(self.rng)
        return self.output({agent.id: [agent.info()] for agent in self.agents})

    def step(self, rl_input) -> UnityMessageProto:
        infos: dict[int, list[AgentInfoProto]] = {}
        for name in self.behaviours:
            members = [a for a in self.agents if a.behaviour == name]
            actions = (
                list(rl_input.agent_actions[name].value) if name in rl_input.agent_actions else []
            )
            if actions and len(actions) != len(members):
                raise SystemExit(f"{name}: {len(actions)} actions for {len(members)} agents")
            for agent, action in zip(members, actions):
                agent.act(action)
                if agent.reached or agent.steps >= agent.max_steps:
                    infos[agent.id] = [agent.info(done=True, interrupted=not agent.reached)]
                    agent.begin_episode(self.rng)
                    infos[agent.id].append(agent.info())
                else:
                    infos[agent.id] = [agent.info()]
        return self.output(infos)

    def output(self, infos: dict[int, list[AgentInfoProto]]) -> UnityMessageProto:
        message = UnityMessageProto()
        message.header.status = 200
        out = message.unity_output
        for agent in self.agents:
            out.rl_output.agentInfos[agent.behaviour].value.extend(infos.get(agent.id, []))
        if (
            not self.sent_brains
        ):  # Unity sends each behaviour's parameters once, with its first agents
            for name, discrete in self.behaviours.items():
                brain = BrainParametersProto(brain_name=name, is_training=True)
                if discrete:
                    brain.action_spec.num_discrete_actions = 1
                    brain.action_spec.discrete_branch_sizes.append(3)
                else:
                    brain.action_spec.num_continuous_actions = 1
                out.rl_initialization_output.brain_parameters.append(brain)
            self.sent_brains = True
        return message


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # what mlagents_envs passes to a Unity player
    parser.add_argument("--mlagents-port", type=int, default=None)
    parser.add_argument("-nographics", action="store_true")
    parser.add_argument("-batchmode", action="store_true")
    parser.add_argument("-logFile", "-logfile", dest="log_file", default=None)
    # test knobs
    parser.add_argument("--fake-behaviours", default="continuous")
    parser.add_argument("--fake-agents", type=int, default=1)
    parser.add_argument("--fake-max-steps", type=int, default=40)
    parser.add_argument("--fake-api-version", default=API_VERSION)
    parser.add_argument("--fake-no-connect", action="store_true")
    parser.add_argument("--fake-exit-code", type=int, default=None)
    args, unknown = parser.parse_known_args(argv)
    args.unknown = unknown
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    log = Log(args.log_file)
    log(
        f"started: port {args.mlagents_port}, nographics {args.nographics}, batchmode {args.batchmode}, "
        f"other arguments {args.unknown}"
    )
    if args.fake_exit_code is not None:
        log(f"crashing with exit code {args.fake_exit_code}")
        return args.fake_exit_code
    if args.fake_no_connect:
        parent = os.getppid()
        while os.getppid() == parent:  # like a build stuck before its Academy starts
            time.sleep(0.5)
        return 0
    port = args.mlagents_port if args.mlagents_port is not None else 5004  # the Editor's port
    return FakeUnity(args, log).run(port)


if __name__ == "__main__":
    sys.exit(main())
