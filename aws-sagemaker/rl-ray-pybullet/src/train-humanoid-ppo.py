"""Train PPO on HumanoidBulletEnv-v0 in a SageMaker training job:
cte-power/trainings/pybullet-envs/ppo.yaml
(thesis table 5).

Hyperparameters override that config, dots written as double underscores (training__lr=0.0003,
stop__env_steps=2000000, env_runners__num_env_runners=auto), or set launcher options
(video_every, name, ...); see common/sagemaker_rl/hyperparameters.py.
"""

import sys

from sagemaker_rl import ray_launcher

if __name__ == "__main__":
    sys.exit(ray_launcher.main("trainings/pybullet-envs/ppo.yaml", name="humanoid-ppo"))
