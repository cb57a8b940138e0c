"""Evaluate a trained model: load the artifact, run N episodes, report returns, record a video.

As a SageMaker job: give it the training job's model.tar.gz as its 'model' input channel and
hyperparameters episodes, max_steps, seed, stochastic, video_episodes (see
common/sagemaker_rl/evaluate.py). Locally: python src/evaluate-ray.py --model PATH [--episodes 5].
"""

import sys

from sagemaker_rl import evaluate

if __name__ == "__main__":
    sys.exit(evaluate.main())
