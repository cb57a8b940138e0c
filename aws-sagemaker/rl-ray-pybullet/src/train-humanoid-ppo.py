"""Train PPO on HumanoidBulletEnv-v0 in a SageMaker training job:
cte-power/trainings/pybullet-envs/ppo.yaml
(thesis table 5).

Hyperparameters override that config, dots written as double underscores (training__lr=0.0003,
stop__env_steps=2000000, env_runners__num_env_runners=auto), or set launcher options
(video_every, name, ...); see common/sagemaker_rl/hyperparameters.py.
"""

import sys
from pathlib import Path

_COMMON = Path(__file__).resolve().parents[1] / "common"
if _COMMON.is_dir():  # run from the repository; in a job, sagemaker_rl sits beside this file
    sys.path.insert(1, str(_COMMON))

from sagemaker_rl import ray_launcher  # noqa: E402

if __name__ == "__main__":
    sys.exit(ray_launcher.main("trainings/pybullet-envs/ppo.yaml", name="humanoid-ppo"))
