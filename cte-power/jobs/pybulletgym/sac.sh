#!/bin/bash
#SBATCH --job-name=sac-humanoid-mujoco-pybulletgym
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --time=48:00:00
#SBATCH --output=jobs/out/%x-%j.out
#SBATCH --error=jobs/err/%x-%j.err
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@300
#SBATCH --requeue
# SAC on PyBullet Gymperium's HumanoidMuJoCoEnv-v0 (needs pybulletgym, see README).
# From cte-power/:  sbatch jobs/pybulletgym/sac.sh [train-script arguments, e.g. --set stop.env_steps=1000000]
# Without Slurm:    bash jobs/pybulletgym/sac.sh [...]
for dir in "${SLURM_SUBMIT_DIR:-}" "${SLURM_SUBMIT_DIR:-}/cte-power" "$(dirname "$0")/../.."; do
    [ -f "$dir/jobs/env.sh" ] && source "$dir/jobs/env.sh" && break
done
command -v ddrl_train >/dev/null || { echo "error: submit from cte-power/ (jobs/env.sh not found)" >&2; exit 2; }
ddrl_train scripts/train/train-pybulletgym.py trainings/pybulletgym/sac-humanoid-mujoco.yaml "$@"
