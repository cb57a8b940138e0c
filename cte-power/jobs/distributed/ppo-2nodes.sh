#!/bin/bash
#SBATCH --job-name=ppo-2nodes
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
#SBATCH --time=24:00:00
#SBATCH --output=slurm-%x-%j.out         # in the submit dir: a pointer to jobs/out/ (see jobs/env.sh)
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@300
#SBATCH --requeue
# PPO on HumanoidBulletEnv-v0 over a 2-node Ray cluster: 3 env runners spread over both nodes.
# From cte-power/:  sbatch jobs/distributed/ppo-2nodes.sh [train-script arguments]
# More nodes: sbatch --nodes=N jobs/distributed/ppo-2nodes.sh --set env_runners.num_env_runners=M
job=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/.*Command=\([^ ]*\).*/\1/p' | head -n 1)  # Slurm runs a copy of this file
for env_sh in "$(dirname "${job:-/-/-}")/../env.sh" "${SLURM_SUBMIT_DIR:-}/jobs/env.sh" "${SLURM_SUBMIT_DIR:-}/cte-power/jobs/env.sh" "$(dirname "$0")/../env.sh"; do [ -f "$env_sh" ] && break; done
[ -f "$env_sh" ] || { echo "error: cannot find cte-power/jobs/env.sh from ${SLURM_SUBMIT_DIR:-$PWD}; submit from cte-power/: sbatch jobs/..." >&2; exit 2; }
source "$env_sh"  # the set-up every job shares
source jobs/distributed/ray-cluster.sh

ddrl_ray_cluster_up || exit 1
ddrl_train scripts/train/train-bullet-envs.py trainings/pybullet-envs/ppo.yaml \
    --set env_runners.num_env_runners=3 "$@"
