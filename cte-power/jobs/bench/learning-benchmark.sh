#!/bin/bash
#SBATCH --job-name=learning-benchmark
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --time=24:00:00
#SBATCH --array=0-59
#SBATCH --output=slurm-%x-%A_%a.out         # in the submit dir: a pointer to jobs/out/ (see jobs/env.sh)
# The learning benchmark (ours vs Stable-Baselines3) at the thesis's budgets: one array task per
# run (system x algorithm x env x seed), each on one CPU. Completed runs are skipped, so the same
# array can be resubmitted after a time limit. Then the table and figures, once all tasks ended:
#   cd cte-power && ARRAY=$(sbatch --parsable jobs/bench/learning-benchmark.sh)
#   sbatch --dependency=afterany:$ARRAY --wrap "cd $PWD && ../.venv/bin/python scripts/bench/learning-benchmark.py --report-only"
# The list of runs (and so --array=0-N) comes from the arguments below:
#   python scripts/bench/learning-benchmark.py $BENCH_ARGS --list
# Needs Stable-Baselines3 in the venv:  pip install -r scripts/bench/requirements-bench.txt
job=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/.*Command=\([^ ]*\).*/\1/p' | head -n 1)  # Slurm runs a copy of this file
for env_sh in "$(dirname "${job:-/-/-}")/../env.sh" "${SLURM_SUBMIT_DIR:-}/jobs/env.sh" "${SLURM_SUBMIT_DIR:-}/cte-power/jobs/env.sh" "$(dirname "$0")/../env.sh"; do [ -f "$env_sh" ] && break; done
[ -f "$env_sh" ] || { echo "error: cannot find cte-power/jobs/env.sh from ${SLURM_SUBMIT_DIR:-$PWD}; submit from cte-power/: sbatch jobs/..." >&2; exit 2; }
source "$env_sh"  # the set-up every job shares
BENCH_ARGS=${BENCH_ARGS:---envs HopperBulletEnv-v0 HalfCheetahBulletEnv-v0 Walker2DBulletEnv-v0 AntBulletEnv-v0 HumanoidBulletEnv-v0 \
    --seeds 0 1 --budget SAC=1000000 TD3=1000000 PPO=10000000}
# shellcheck disable=SC2086
python scripts/bench/learning-benchmark.py $BENCH_ARGS --task "${SLURM_ARRAY_TASK_ID:-0}" "$@"
