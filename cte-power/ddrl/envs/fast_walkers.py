"""PyBullet's walkers (Humanoid, Ant, Hopper, Walker2D, HalfCheetah) stepped with batched queries.

Each step, ``pybullet_envs_gymnasium``'s robot reads its state one body part and one joint at a
time (about 50 PyBullet calls for the humanoid, each through ``BulletClient.__getattr__``) and
sets its 17 motors one call each: a profile of the humanoid's env step puts more time in these
calls than in the physics. Here the same reads are one ``getJointStates`` and one
``getLinkStates`` per body, and the motors one ``setJointMotorControlArray``; everything computed
from them is the upstream code's own arithmetic, in its order, so observations, rewards and
episode ends are the same, bit for bit (``tests/envs/test_fast_walkers.py`` steps both side by
side). ``speed_up(env)`` installs it on one env's robot; robots of other kinds are left alone.
"""

from __future__ import annotations

import types
from collections import defaultdict

import numpy as np


def speed_up(env) -> bool:
    """Give ``env``'s robot the batched state reads and motor writes, if it is one of PyBullet's
    walkers; returns whether it did."""
    from pybullet_envs_gymnasium.robot_locomotors import Humanoid, WalkerBase

    robot = getattr(env.unwrapped, "robot", None)
    if not isinstance(robot, WalkerBase):
        return False
    robot.calc_state = types.MethodType(_calc_state, robot)
    if isinstance(robot, Humanoid) and type(robot).apply_action is Humanoid.apply_action:
        robot.apply_action = types.MethodType(_humanoid_apply_action, robot)
    elif type(robot).apply_action is WalkerBase.apply_action:
        robot.apply_action = types.MethodType(_walker_apply_action, robot)
    return True


def _by_body(items, index_of):
    """(body id, [indices], [positions in ``items``]) for each body the items belong to."""
    groups = defaultdict(lambda: ([], []))
    for position, item in enumerate(items):
        indices, positions = groups[item.bodies[item.bodyIndex]]
        indices.append(index_of(item))
        positions.append(position)
    return [(body, indices, positions) for body, (indices, positions) in groups.items()]


def _joint_states(robot) -> list[tuple[float, float]]:
    """``Joint.current_relative_position()`` of every ordered joint, read in one call per body."""
    client, out = robot._p, [None] * len(robot.ordered_joints)
    for body, indices, positions in _by_body(robot.ordered_joints, lambda j: j.jointIndex):
        for (pos, vel, _, _), at in zip(client.getJointStates(body, indices), positions):
            joint = robot.ordered_joints[at]
            # Joint.current_relative_position's arithmetic, on the same Python floats
            scaled_pos = 2 * (pos - joint.lowerLimit) / (joint.upperLimit - joint.lowerLimit) - 1.0
            out[at] = (scaled_pos, 0.1 * vel)
    return out


def _part_positions(robot) -> list[np.ndarray]:
    """``part.pose().xyz()`` of every body part, links read in one call per body."""
    client, parts = robot._p, list(robot.parts.values())
    out = [None] * len(parts)
    links = [p for p in parts if p.bodyPartIndex != -1]
    for part_at, part in enumerate(parts):
        if part.bodyPartIndex == -1:  # a base: its own call, as BodyPart does
            (x, y, z), _ = client.getBasePositionAndOrientation(part.bodies[part.bodyIndex])
            out[part_at] = np.array([x, y, z])
    at_of = {id(p): i for i, p in enumerate(parts)}
    for body, indices, positions in _by_body(links, lambda p: p.bodyPartIndex):
        for state, at in zip(client.getLinkStates(body, indices), positions):
            (x, y, z) = state[0]
            out[at_of[id(links[at])]] = np.array([x, y, z])
    return out


def _calc_state(self):
    """``WalkerBase.calc_state`` with batched reads (the rest is its code as it is upstream)."""
    j = np.array(_joint_states(self), dtype=np.float32).flatten()
    self.joint_speeds = j[1::2]
    self.joints_at_limit = np.count_nonzero(np.abs(j[0::2]) > 0.99)

    body_pose = self.robot_body.pose()
    parts_xyz = np.array(_part_positions(self)).flatten()
    self.body_xyz = (parts_xyz[0::3].mean(), parts_xyz[1::3].mean(), body_pose.xyz()[2])
    self.body_real_xyz = body_pose.xyz()
    self.body_rpy = body_pose.rpy()
    z = self.body_xyz[2]
    if self.initial_z is None:
        self.initial_z = z
    r, p, yaw = self.body_rpy
    self.walk_target_theta = np.arctan2(
        self.walk_target_y - self.body_xyz[1], self.walk_target_x - self.body_xyz[0]
    )
    self.walk_target_dist = np.linalg.norm(
        [self.walk_target_y - self.body_xyz[1], self.walk_target_x - self.body_xyz[0]]
    )
    angle_to_target = self.walk_target_theta - yaw
    rot_speed = np.array(
        [[np.cos(-yaw), -np.sin(-yaw), 0], [np.sin(-yaw), np.cos(-yaw), 0], [0, 0, 1]]
    )
    vx, vy, vz = np.dot(rot_speed, self.robot_body.speed())
    more = np.array(
        [z - self.initial_z, np.sin(angle_to_target), np.cos(angle_to_target),
         0.3 * vx, 0.3 * vy, 0.3 * vz, r, p],
        dtype=np.float32,
    )  # fmt: skip
    return np.clip(np.concatenate([more, j, self.feet_contact]), -5, +5)


def _set_torques(robot, joints, torques) -> None:
    import pybullet

    for body, indices, positions in _by_body(joints, lambda j: j.jointIndex):
        robot._p.setJointMotorControlArray(
            body, indices, pybullet.TORQUE_CONTROL, forces=[torques[at] for at in positions]
        )


def _humanoid_apply_action(self, a):
    """``Humanoid.apply_action``'s torques, its arithmetic, set in one call."""
    assert np.isfinite(a).all()
    force_gain = 1
    torques = [
        float(force_gain * power * self.power * np.clip(a[i], -1, +1))
        for i, power in zip(range(17), self.motor_power)
    ]
    _set_torques(self, self.motors[: len(torques)], torques)


def _walker_apply_action(self, a):
    """``WalkerBase.apply_action``'s torques, its arithmetic, set in one call."""
    assert np.isfinite(a).all()
    torques = [
        self.power * j.power_coef * float(np.clip(a[n], -1, +1))
        for n, j in enumerate(self.ordered_joints)
    ]
    _set_torques(self, self.ordered_joints, torques)
