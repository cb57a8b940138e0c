# The multi-node Ray launcher of Slurm jobs, sourced by jobs/distributed/*.sh and
# jobs/search/search.sh after jobs/env.sh. The work is done by ddrl.ray_nodes (also what
# SageMaker's multi-host start uses): one `srun` task per node runs its Ray node, and the
# driver waits for them all.
#
#   ddrl_ray_cluster_up      Ray head on the job's first node, a worker on every other node (srun,
#                            one task per node), per-job ports and auth token; waits until every
#                            node has joined (or fails saying which did not) and exports RAY_ADDRESS
#                            so that the training driver attaches to this cluster.
#   ddrl_ray_cluster_watch PID  (ddrl_train runs it beside the driver PID) if a node's Ray ends
#                            (the node died, or its srun step was killed), asks the driver to
#                            checkpoint and stop, as at the time limit: the job then requeues and
#                            resumes on a whole allocation instead of waiting for CPUs that are gone.
#   ddrl_ray_cluster_down    stops the head and workers started here (also run on EXIT).
#
# Ports come from the job id (the next free slot where another job's Ray holds its port), so two
# jobs sharing a node do not collide; a token that only this job's user can read
# (RAY_AUTH_MODE=token) keeps other users of the cluster from attaching.
# Set DDRL_NODE_IP to pin every node's address (one host pretending to be several, as in tests).

ddrl_ray_cluster_up() {
    local timeout=${DDRL_RAY_JOIN_TIMEOUT:-180}
    local -a nodes
    mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
    local cpus=${SLURM_CPUS_PER_TASK:-1} gpus=${SLURM_GPUS_ON_NODE:-0}
    local head_ip=${DDRL_NODE_IP:-$(srun --nodes=1 --ntasks=1 -w "${nodes[0]}" hostname -I | awk '{print $1}')}
    # The batch step runs on the head's node: the next slot if another job's Ray has this one.
    local slot
    slot=$(python -m ddrl.ray_nodes slot --host="$head_ip" --preferred=$((SLURM_JOB_ID % 1000))) || return 1
    local port=$((20000 + slot))
    export RAY_ADDRESS="$head_ip:$port"

    local token_dir=${DDRL_TOKEN_DIR:-$HOME/.ray}
    (umask 077 && mkdir -p "$token_dir")
    DDRL_RAY_TOKEN_FILE="$token_dir/ddrl-job-$SLURM_JOB_ID.token"
    (umask 077 && python -c 'import secrets; print(secrets.token_hex(32))' > "$DDRL_RAY_TOKEN_FILE")
    export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$DDRL_RAY_TOKEN_FILE"
    trap ddrl_ray_cluster_down EXIT

    DDRL_RAY_STEP_PIDS=()
    local index node ip_args=()
    [ -n "${DDRL_NODE_IP:-}" ] && ip_args=(--node-ip="$DDRL_NODE_IP")
    for index in "${!nodes[@]}"; do
        node=${nodes[$index]}
        local log="$DDRL_JOB_LOGS/out/${SLURM_JOB_NAME}-${SLURM_JOB_ID}.ray-$node.log"
        # --overlap: the batch step (our driver) shares the first node with the head.
        # ddrl.ray_nodes: the head on rank 0; a worker elsewhere once the head answers
        srun --nodes=1 --ntasks=1 --overlap -w "$node" \
            python -m ddrl.ray_nodes node --rank="$index" --address="$RAY_ADDRESS" "${ip_args[@]}" \
            --num-cpus="$cpus" --num-gpus="$gpus" --timeout="$timeout" --log="$log" \
            --agent-port=$((22000 + slot * 8 + index % 8)) --temp-dir="$RAY_TMPDIR/node$index" \
            >> "$log" 2>&1 &
        DDRL_RAY_STEP_PIDS+=($!)
    done

    echo "ddrl: waiting up to ${timeout}s for ${#nodes[@]} Ray node(s) at $RAY_ADDRESS"
    if ! python -m ddrl.ray_nodes wait --nodes="${#nodes[@]}" --timeout="$timeout" \
            --report="$DDRL_JOB_LOGS/out/${SLURM_JOB_NAME}-${SLURM_JOB_ID}.cluster.json"; then
        echo "error: the Ray cluster did not form; see $DDRL_JOB_LOGS/out/${SLURM_JOB_NAME}-${SLURM_JOB_ID}.ray-*.log" >&2
        return 1
    fi
}

ddrl_ray_cluster_watch() {
    local driver=$1 index
    local -a nodes
    mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
    while kill -0 "$driver" 2>/dev/null; do
        for index in "${!DDRL_RAY_STEP_PIDS[@]}"; do
            if ! kill -0 "${DDRL_RAY_STEP_PIDS[$index]}" 2>/dev/null; then
                echo "ddrl: $(date '+%F %T') lost the Ray node on ${nodes[$index]} (its srun step ended): asking the run to checkpoint and stop"
                kill -USR2 "$driver"
                return
            fi
        done
        sleep "${DDRL_WATCH_EVERY_S:-5}"
    done
}

ddrl_ray_cluster_down() {
    local pid
    for pid in "${DDRL_RAY_STEP_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null   # srun forwards it; ddrl.ray_nodes then stops its node
    done
    for pid in "${DDRL_RAY_STEP_PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    DDRL_RAY_STEP_PIDS=()
    rm -f "${DDRL_RAY_TOKEN_FILE:-}"
    echo "ddrl: Ray cluster stopped"
}
