#!/bin/bash
#SBATCH --job-name=ppo-unity
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --time=24:00:00
#SBATCH --output=slurm-%x-%j.out         # in the submit dir: a pointer to jobs/out/ (see jobs/env.sh)
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@300
#SBATCH --requeue
# PPO on a Unity ML-Agents build (one behaviour, one agent; trainings/unity/ppo-multi-agent.yaml via
# --config for more), headless. Each env runner starts its own copy of the build, on its own port.
# More runners: --cpus-per-task=N+1 --set env_runners.num_env_runners=N.
# From cte-power/:  sbatch jobs/unity/ppo.sh --env-file builds/3DBall/3DBall.x86_64 [train-script arguments]
# Without Slurm:    bash jobs/unity/ppo.sh --env-file builds/3DBall/3DBall.x86_64 [...]
job=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/.*Command=\([^ ]*\).*/\1/p' | head -n 1)  # Slurm runs a copy of this file
for env_sh in "$(dirname "${job:-/-/-}")/../env.sh" "${SLURM_SUBMIT_DIR:-}/jobs/env.sh" "${SLURM_SUBMIT_DIR:-}/cte-power/jobs/env.sh" "$(dirname "$0")/../env.sh"; do [ -f "$env_sh" ] && break; done
[ -f "$env_sh" ] || { echo "error: cannot find cte-power/jobs/env.sh from ${SLURM_SUBMIT_DIR:-$PWD}; submit from cte-power/: sbatch jobs/..." >&2; exit 2; }
source "$env_sh"  # the set-up every job shares
case " $* " in
    *" --env-file "*|*" --env-file="*) ;;
    *) echo "error: a batch job has no Unity Editor to connect to: give the build, e.g. sbatch jobs/unity/ppo.sh --env-file builds/3DBall/3DBall.x86_64" >&2; exit 2 ;;
esac
# Jobs sharing a node get their own 100 worker ids (ports 5005 + id stay below Ray's 10002+);
# a port that is taken anyway makes the environment move to a free block.
ddrl_train scripts/train/train-unity.py trainings/unity/ppo.yaml --no-graphics \
    --set "environment.env_config.base_worker_id=$(( (${SLURM_JOB_ID:-$$} % 48) * 100 ))" "$@"
