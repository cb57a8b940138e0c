#!/bin/bash
#SBATCH --job-name=scaling-td3
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=65
#SBATCH --time=24:00:00
#SBATCH --output=slurm-%x-%j.out         # in the submit dir: a pointer to jobs/out/ (see jobs/env.sh)
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@300
#SBATCH --requeue
# Scaling sweep, TD3 on HumanoidBulletEnv-v0: one trial per number of env runners that fits
# (1, 2, 4 ... 64; with and without GPU if one is allocated), a fixed number of iterations each.
# From cte-power/:  sbatch jobs/scaling/td3.sh                     (65 CPUs: up to 64 runners)
#                   sbatch --cpus-per-task=17 --gres=gpu:1 jobs/scaling/td3.sh
# Then: python scripts/plot/summarize-data.py && python scripts/plot/plot-time.py results/humanoid/scaling-td3-*.csv
job=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/.*Command=\([^ ]*\).*/\1/p' | head -n 1)  # Slurm runs a copy of this file
for env_sh in "$(dirname "${job:-/-/-}")/../env.sh" "${SLURM_SUBMIT_DIR:-}/jobs/env.sh" "${SLURM_SUBMIT_DIR:-}/cte-power/jobs/env.sh" "$(dirname "$0")/../env.sh"; do [ -f "$env_sh" ] && break; done
[ -f "$env_sh" ] || { echo "error: cannot find cte-power/jobs/env.sh from ${SLURM_SUBMIT_DIR:-$PWD}; submit from cte-power/: sbatch jobs/..." >&2; exit 2; }
source "$env_sh"  # the set-up every job shares
ddrl_scaling_sweep trainings/pybullet-envs/td3.yaml "$@"
