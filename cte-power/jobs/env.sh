# Sourced by every job in cte-power/jobs/: find the repository, load the site's modules (only if
# configured), activate the project's virtual environment, give Ray a short per-job temp dir,
# and define ddrl_train. The same job files run under sbatch and with plain bash.
#
# For a new cluster, edit one file: copy jobs/site.sh.example to jobs/site.sh (module loads,
# DDRL_VENV if the venv lives elsewhere). Nothing else names a user, a path or a module.

DDRL_CTE_POWER=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DDRL_REPO=$(dirname "$DDRL_CTE_POWER")
cd "$DDRL_CTE_POWER" || exit 2
# the jobs' logs: jobs/out/ and jobs/err/, unless DDRL_JOB_LOGS names another folder for them
export DDRL_JOB_LOGS=${DDRL_JOB_LOGS:-$DDRL_CTE_POWER/jobs}
mkdir -p "$DDRL_JOB_LOGS/out" "$DDRL_JOB_LOGS/err"

# Slurm opens the job's output file before the job starts, relative to the submit directory
# (#SBATCH --output=slurm-%x-%j.out is the one path that exists wherever sbatch is run). From
# here on the job logs to cte-power/jobs/out/ and jobs/err/, appending across requeues; the
# file in the submit directory says where.
if [ -n "${SLURM_JOB_ID:-}" ] && [ -z "${DDRL_LOG_REDIRECTED:-}" ]; then
    export DDRL_LOG_REDIRECTED=1
    echo "ddrl: job $SLURM_JOB_ID logs to $DDRL_JOB_LOGS/out/${SLURM_JOB_NAME}-${SLURM_JOB_ID}.out (errors: $DDRL_JOB_LOGS/err/)"
    exec >>"$DDRL_JOB_LOGS/out/${SLURM_JOB_NAME}-${SLURM_JOB_ID}.out" 2>>"$DDRL_JOB_LOGS/err/${SLURM_JOB_NAME}-${SLURM_JOB_ID}.err"
fi

if [ -f jobs/site.sh ]; then
    # shellcheck source=/dev/null
    source jobs/site.sh
fi
DDRL_VENV=${DDRL_VENV:-$DDRL_REPO/.venv}
if [ ! -f "$DDRL_VENV/bin/activate" ]; then
    echo "error: no virtual environment at $DDRL_VENV. Run 'make install' in $DDRL_REPO, or set DDRL_VENV in jobs/site.sh." >&2
    exit 2
fi
# shellcheck source=/dev/null
source "$DDRL_VENV/bin/activate"

# Ray's socket paths must stay short; one folder per job so jobs sharing a node never meet.
export RAY_TMPDIR=${RAY_TMPDIR:-/tmp/ray-${SLURM_JOB_ID:-$$}}
mkdir -p "$RAY_TMPDIR"

# ddrl_train TRAIN_SCRIPT CONFIG [train-script arguments...]
# Trains the experiment <config>-<job id>. On Slurm's warning signal (USR1, from --signal=B:USR1@T)
# the run checkpoints and stops (exit 3), and the job requeues itself; the requeued job resumes the
# same experiment from that checkpoint.
ddrl_train() {
    local script=$1 config=$2
    shift 2
    local name=${DDRL_NAME:-$(basename "$config" .yaml)-${SLURM_JOB_ID:-$(date +%Y%m%d-%H%M%S)}}
    echo "ddrl: $(date '+%F %T') $name on $(hostname) (job ${SLURM_JOB_ID:-none}, restart ${SLURM_RESTART_COUNT:-0})"
    python "$script" --config "$config" --name "$name" --resume-if-exists "$@" &
    local pid=$! status=0
    trap 'echo "ddrl: warning signal (time limit or preemption): checkpointing"; kill -USR2 '"$pid" USR1
    if [ "${#DDRL_RAY_STEP_PIDS[@]}" -gt 1 ]; then  # a multi-node Ray cluster (ray-cluster.sh)
        ddrl_ray_cluster_watch "$pid" &
    fi
    while :; do
        status=0
        wait "$pid" || status=$?
        kill -0 "$pid" 2>/dev/null || break   # wait was only interrupted by the trapped signal
    done
    trap - USR1
    if [ "$status" -eq 3 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
        echo "ddrl: checkpointed; requeueing job $SLURM_JOB_ID to resume $name"
        if scontrol requeue "$SLURM_JOB_ID"; then
            # Slurm ends this run as it requeues the job; exiting first would end the job as FAILED.
            sleep 300
        fi
    fi
    return "$status"
}

# ddrl_scaling_sweep CONFIG [train-script arguments...]
# The thesis's timing experiment: one trial per number of env runners (1, 2, 4, ... 64, as many as
# the allocation holds besides the driver; DDRL_SCALING_RUNNERS="0 1 2" to choose), each for
# DDRL_SCALING_ITERATIONS iterations (default 10), one at a time; with a GPU in the allocation,
# every count runs with and without it. Summarise and plot with scripts/plot/.
ddrl_scaling_sweep() {
    local config=$1
    shift
    local cpus=${SLURM_CPUS_PER_TASK:-$(nproc)} gpus=${SLURM_GPUS_ON_NODE:-0} n
    local -a grid=()
    if [ -n "${DDRL_SCALING_RUNNERS:-}" ]; then
        read -r -a grid <<< "$DDRL_SCALING_RUNNERS"
    else
        for n in 1 2 4 8 16 32 64; do
            [ $((n + 1)) -le "$cpus" ] && grid+=("$n")
        done
    fi
    if [ ${#grid[@]} -eq 0 ]; then
        echo "error: a scaling sweep needs at least 2 CPUs (1 env runner + the driver); this allocation has $cpus" >&2
        return 2
    fi
    local gpu_grid=0
    [ "$gpus" -gt 0 ] && gpu_grid="{grid_search: [0, 1]}"
    echo "ddrl: scaling sweep over env runners ${grid[*]} (GPU per learner: $gpu_grid)"
    DDRL_NAME=${DDRL_NAME:-scaling-$(basename "$config" .yaml)-${SLURM_JOB_ID:-$(date +%Y%m%d-%H%M%S)}} \
        ddrl_train scripts/train/train-bullet-envs.py "$config" \
        --set "env_runners.num_env_runners={grid_search: [$(IFS=,; echo "${grid[*]}")]}" \
        --set "learners.num_gpus_per_learner=$gpu_grid" \
        --set tune.max_concurrent_trials=1 \
        --set "stop.iterations=${DDRL_SCALING_ITERATIONS:-10}" "$@"
}
