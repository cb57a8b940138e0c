#!/bin/bash
#SBATCH --job-name=ppo-humanoid-pybulletgym
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --time=24:00:00
#SBATCH --output=slurm-%x-%j.out         # in the submit dir: a pointer to jobs/out/ (see jobs/env.sh)
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@300
#SBATCH --requeue
# PPO on PyBullet Gymperium's HumanoidPyBulletEnv-v0 (needs pybulletgym, see README).
# From cte-power/:  sbatch jobs/pybulletgym/ppo.sh [train-script arguments, e.g. --set stop.env_steps=1000000]
# Without Slurm:    bash jobs/pybulletgym/ppo.sh [...]
job=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/.*Command=\([^ ]*\).*/\1/p' | head -n 1)  # Slurm runs a copy of this file
for env_sh in "$(dirname "${job:-/-/-}")/../env.sh" "${SLURM_SUBMIT_DIR:-}/jobs/env.sh" "${SLURM_SUBMIT_DIR:-}/cte-power/jobs/env.sh" "$(dirname "$0")/../env.sh"; do [ -f "$env_sh" ] && break; done
[ -f "$env_sh" ] || { echo "error: cannot find cte-power/jobs/env.sh from ${SLURM_SUBMIT_DIR:-$PWD}; submit from cte-power/: sbatch jobs/..." >&2; exit 2; }
source "$env_sh"  # the set-up every job shares
ddrl_train scripts/train/train-pybulletgym.py trainings/pybulletgym/ppo-humanoid.yaml "$@"
