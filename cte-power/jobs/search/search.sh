#!/bin/bash
#SBATCH --job-name=search
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
#SBATCH --time=24:00:00
#SBATCH --output=slurm-%x-%j.out         # in the submit dir: a pointer to jobs/out/ (see jobs/env.sh)
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@300
#SBATCH --requeue
# A hyperparameter search over a multi-node Ray cluster: Tune runs as many trials at once as the
# nodes hold (tune.max_concurrent_trials caps it), each trial where its resources fit.
# From cte-power/:
#   sbatch --nodes=4 --cpus-per-task=48 --gres=gpu:4 jobs/search/search.sh trainings/pybullet-envs/search/sac-search.yaml
#   sbatch jobs/search/search.sh CONFIG --set tune.scheduler='{type: asha, max_t: 500}'   # stop weak trials early
# Then: python scripts/plot/summarize-data.py results/pybullet-envs/<config>-<job id>
#       (a table of trials, the best as an experiment file) and scripts/plot/plot-search.py.
job=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/.*Command=\([^ ]*\).*/\1/p' | head -n 1)  # Slurm runs a copy of this file
for env_sh in "$(dirname "${job:-/-/-}")/../env.sh" "${SLURM_SUBMIT_DIR:-}/jobs/env.sh" "${SLURM_SUBMIT_DIR:-}/cte-power/jobs/env.sh" "$(dirname "$0")/../env.sh"; do [ -f "$env_sh" ] && break; done
[ -f "$env_sh" ] || { echo "error: cannot find cte-power/jobs/env.sh from ${SLURM_SUBMIT_DIR:-$PWD}; submit from cte-power/: sbatch jobs/..." >&2; exit 2; }
source "$env_sh"  # the set-up every job shares
config=trainings/pybullet-envs/search/sac-search.yaml
case "${1:-}" in *.yaml|*.yml) config=$1; shift ;; esac
[ -f "$config" ] || { echo "error: no experiment file $config; give one, e.g. trainings/pybullet-envs/search/td3-search.yaml" >&2; exit 2; }
source jobs/distributed/ray-cluster.sh

ddrl_ray_cluster_up || exit 1
ddrl_train scripts/train/train-bullet-envs.py "$config" "$@"
