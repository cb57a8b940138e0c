"""A Unity environment's ``env_config``, checked (the keys are listed in ``ddrl.envs.unity``)."""

from __future__ import annotations

from typing import Annotated

from mlagents_envs.environment import UnityEnvironment
from pydantic import Field, field_validator

from ddrl.schema import Section, validated

ENV_ID = "Unity-v0"
MULTI_AGENT_ENV_ID = "UnityMultiAgent-v0"


class UnitySettings(Section, frozen=True):
    """The ``env_config`` of a Unity environment: unknown keys and wrong types are one-line errors."""

    file_name: str | None = None
    no_graphics: bool = False
    time_scale: float | None = 20.0
    connect_timeout: Annotated[float, Field(gt=0)] = 60.0
    base_worker_id: Annotated[int, Field(ge=0)] = 0
    base_port: int | None = None
    envs_per_runner: Annotated[int, Field(ge=1)] = 1
    seed: int = 0
    additional_args: list = []
    log_folder: str | None = None

    @field_validator("additional_args")
    @classmethod
    def _as_text(cls, value: list) -> list[str]:
        return [str(v) for v in value]

    @classmethod
    def from_env_config(cls, env_config: dict | None) -> UnitySettings:
        values = validated(
            cls, dict(env_config or {}), "environment.env_config", " of a Unity environment"
        )
        return cls(**values)

    @property
    def editor(self) -> bool:
        return not self.file_name

    def port(self, worker_id: int) -> int:
        if self.base_port is not None:
            base = self.base_port
        elif self.editor:
            base = UnityEnvironment.DEFAULT_EDITOR_PORT
        else:
            base = UnityEnvironment.BASE_ENVIRONMENT_PORT
        return base + worker_id

    @property
    def build(self) -> str:
        return self.file_name or "the Unity Editor"
