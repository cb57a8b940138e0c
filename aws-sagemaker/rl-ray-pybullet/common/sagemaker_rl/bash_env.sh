# BASH_ENV of the training image: every non-interactive bash reads this first. Only the
# container's PID 1 acts: SageMaker's ContainerEntrypoint (/bin/bash -c "...sm_train.sh")
# becomes sagemaker_rl.pid1, same PID, which forwards SageMaker's stop signal to training.
if [ "$$" = 1 ] && [ -z "${DDRL_INIT:-}" ] && [ -n "${BASH_EXECUTION_STRING:-}" ]; then
    export DDRL_INIT=1
    exec python3 -m sagemaker_rl.pid1 /bin/bash -c "$BASH_EXECUTION_STRING"
fi
