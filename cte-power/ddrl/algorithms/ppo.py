"""PPOConfig/PPO: RLlib's PPO with one finiteness check per gradient step (what ``algorithm: PPO`` trains).

The value loss is the plain squared error, as in the thesis's RLlib 1.1 and in SB3: our default
``vf_clip_param`` is infinite. RLlib 2's default of 10 clamps the *squared* value error, so every
sample whose value error exceeds sqrt(10) gives no value gradient; with returns-to-go in the
tens or hundreds (the humanoid, the inverted pendulum) the value function then barely trains.
RLlib 1.x clipped the change of the prediction instead; a finite ``vf_clip_param`` here is
RLlib 2's clamp, kept for those who want it.

Its learner also takes the trial's idle CPUs (``ddrl.algorithms.threads.learner_threads``) and steps a
fused Adam. RLlib's ``TorchLearner.apply_gradients`` guards every minibatch update against nan/inf gradients
with two ``isfinite(...).all()`` checks per parameter tensor, each a separate small kernel and a
Python bool: about 10% of PPO's learner time on ``ppo.yaml`` here (30 epochs of minibatches of 256).
``PPOTorchLearner`` checks the total gradient norm instead, which is finite exactly when every
gradient is (or overflows, when the per-parameter check decides), and hands anything non-finite to
RLlib's own path, so nan/inf gradients are treated exactly as RLlib treats them. Losses,
hyperparameters and everything else are RLlib's. RLlib's PPO stays available as ``RLlibPPO``.

Three of Stable-Baselines3's PPO details, each off by default (RLlib's behaviour) and all on in
the learning benchmark, so that both systems run the same PPO:

- ``orthogonal_init``: the networks start as in the PPO paper's code, OpenAI Baselines, SB3 and
  CleanRL (orthogonal weights, gain sqrt(2) in hidden layers, 0.01 for the action means, 1 for the
  value; zero biases) instead of torch's default. It closed our gap to SB3 on HalfCheetah
  (results/bench/learning/diagnosis/); it is not the default because the shipped
  inverted-pendulum config no longer reached its return within its budget with it.
- ``adam_epsilon``: SB3's 1e-5; torch's and RLlib's 1e-8.
- ``advantages_per_minibatch``: SB3 standardises the advantages of each minibatch. RLlib's once
  per train batch still happens; it changes nothing after the per-minibatch one.
"""

from __future__ import annotations

import math

import torch
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.algorithms.ppo import ppo as rllib_ppo
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner as RLlibPPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    DIFF_NUM_GRAD_UPDATES_VS_SAMPLER_POLICY,
    MODULE_TRAIN_BATCH_SIZE_MEAN,
    NUM_ENV_STEPS_TRAINED,
    NUM_ENV_STEPS_TRAINED_LIFETIME,
    NUM_MODULE_STEPS_TRAINED,
    NUM_MODULE_STEPS_TRAINED_LIFETIME,
    WEIGHTS_SEQ_NO,
)
from ray.rllib.utils.torch_utils import clip_gradients
from torch import nn

from ddrl.algorithms import lean_ppo, manual_gradients, threads
from ddrl.algorithms.reward_scaling import RewardScaler

#: Where the learner's state keeps the reward scaling's statistics (checkpoints hold it)
REWARD_SCALING_STATE = "ddrl_reward_scaling"


def linear_layers(module: nn.Module) -> list[nn.Linear]:
    return [m for m in module.modules() if isinstance(m, nn.Linear)]


def orthogonal_(layers, gain: float) -> None:
    for layer in layers:
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)


class PPOTorchRLModule(DefaultPPOTorchRLModule):
    """RLlib's default PPO module; with ``orthogonal_init`` in its model config, initialised as
    Stable-Baselines3's ``ortho_init`` (hidden layers sqrt(2), action means 0.01, value 1)."""

    def setup(self):
        super().setup()
        if not self.model_config.get("orthogonal_init"):
            return
        orthogonal_(linear_layers(self.encoder), math.sqrt(2))
        *pi_hidden, pi_out = linear_layers(self.pi)
        orthogonal_(pi_hidden, math.sqrt(2))
        orthogonal_([pi_out], 0.01)
        if hasattr(self, "vf"):  # an inference-only module has no value head
            *vf_hidden, vf_out = linear_layers(self.vf)
            orthogonal_(vf_hidden, math.sqrt(2))
            orthogonal_([vf_out], 1.0)


def standardized(values: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``values`` less their mean, over their standard deviation, both taken over the entries
    ``mask`` marks valid (RLlib's artificial bootstrap timesteps are not); as SB3, std + 1e-8.
    The mask is boolean, or 0.0/1.0 as ``lean_ppo.PackedColumns`` gives it."""
    valid = values if mask is None else values[mask.to(torch.bool)]
    return (values - valid.mean()) / (valid.std() + 1e-8)


class PPOTorchLearner(RLlibPPOTorchLearner):
    @override(RLlibPPOTorchLearner)
    def build(self) -> None:
        super().build()
        threads.use_learner_threads(self.config)
        self._reward_scaler = (
            RewardScaler(self.config.gamma) if self.config.reward_scaling else None
        )

    def _scale_rewards(self, kwargs: dict) -> dict:
        """``reward_scaling``: the update's episodes with their rewards scaled
        (``ddrl.algorithms.reward_scaling``), before the learner connector computes advantages."""
        scaler = getattr(self, "_reward_scaler", None)
        if scaler is None:
            return kwargs
        if kwargs.get("episodes") is not None:
            kwargs = {**kwargs, "episodes": scaler.scale_episodes(kwargs["episodes"])}
        elif kwargs.get("training_data") is not None:
            data = kwargs["training_data"]
            data.solve_refs()
            if data.episodes:
                data.episodes = scaler.scale_episodes(data.episodes)
        self.metrics.log_value(
            (ALL_MODULES, "reward_scaling_return_std"), math.sqrt(scaler.var), window=1
        )
        return kwargs

    @override(Learner)
    def get_state(self, components=None, *, not_components=None, **kwargs):
        state = super().get_state(components, not_components=not_components, **kwargs)
        scaler = getattr(self, "_reward_scaler", None)
        if scaler is not None:
            state[REWARD_SCALING_STATE] = scaler.get_state()
        return state

    @override(Learner)
    def set_state(self, state) -> None:
        super().set_state(state)
        scaler = getattr(self, "_reward_scaler", None)
        if scaler is not None and REWARD_SCALING_STATE in state:
            scaler.set_state(state[REWARD_SCALING_STATE])

    @override(RLlibPPOTorchLearner)
    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        """RLlib's one Adam per module, fused: one kernel per step for all the tensors instead
        of a Python loop over them (that loop was about 10% of PPO's learner time here, profiled)."""
        params = self.get_parameters(self._module[module_id])
        self.register_optimizer(
            module_id=module_id,
            optimizer=torch.optim.Adam(params, eps=config.adam_epsilon, fused=True),
            params=params,
            lr_or_lr_schedule=config.lr,
        )

    #: Learner.update keywords the lean update handles (anything else: RLlib's update)
    LEAN_KEYWORDS = {
        "training_data", "episodes", "timesteps", "num_epochs", "minibatch_size",
        "shuffle_batch_per_epoch", "num_total_minibatches", "_no_metrics_reduce",
    }  # fmt: skip

    @override(Learner)
    def update(self, *args, **kwargs):
        """``lean_update``: RLlib's epochs of minibatches over the train batch, without its
        per-minibatch bookkeeping (``ddrl.algorithms.lean_ppo``). Anything the lean loop does not
        cover (several modules, recurrent modules, data iterators, mixed precision, a per-value
        gradient clip) takes RLlib's own update."""
        kwargs = self._scale_rewards(kwargs)
        if args or not self._can_update_lean(kwargs):
            return super().update(*args, **kwargs)
        return self._lean_update(**kwargs)

    def _can_update_lean(self, kwargs: dict) -> bool:
        config = self.config
        data = kwargs.get("training_data")
        return (
            config.lean_update
            and set(kwargs) <= self.LEAN_KEYWORDS
            and not kwargs.get("num_total_minibatches")
            and (kwargs.get("episodes") is not None or (data is not None and data.episodes))
            and len(self.module) == 1
            and len(self._module_optimizers[next(iter(self.module.keys()))]) == 1
            and not next(iter(self.module.values())).is_stateful()
            and self._grad_scalers is None
            and (config.grad_clip is None or config.grad_clip_by == "global_norm")
        )

    def _lean_update(
        self,
        *,
        training_data=None,
        episodes=None,
        timesteps=None,
        num_epochs: int = 1,
        minibatch_size: int | None = None,
        shuffle_batch_per_epoch: bool = False,
        num_total_minibatches: int = 0,
        _no_metrics_reduce: bool = False,
    ):
        self._check_is_built()
        self.before_gradient_based_update(timesteps=timesteps or {})
        training_data = training_data or TrainingData(episodes=episodes)
        training_data.validate()
        training_data.solve_refs()
        self._weights_seq_no += 1
        batch = self._make_batch_if_necessary(training_data=training_data)  # GAE, value targets
        ((module_id, module_batch),) = batch.policy_batches.items()
        columns = {k: v for k, v in module_batch.items() if isinstance(v, torch.Tensor)}
        config = self.config.get_config_for_module(module_id)
        module = self.module[module_id]
        unwrapped = module.unwrapped()
        module.train()
        rows = len(module_batch)
        size = minibatch_size or rows
        kl_coeff = self.curr_kl_coeffs_per_module[module_id]
        entropy_coeff = self.entropy_coeff_schedulers_per_module[module_id].get_current_value()
        minibatches = lean_ppo.minibatch_indices(
            rows, size, num_epochs, shuffle_batch_per_epoch and num_epochs > 1
        )
        ((optimizer_name, _),) = self.get_optimizers_for_module(module_id)
        gradient_norm_key = f"gradients_{optimizer_name}_global_norm"  # RLlib's metric
        networks = lean_ppo.manual_networks(unwrapped) if config.fast_update else None
        if networks is not None:  # one gather per minibatch, the gradients in one flat tensor
            used = {k: v for k, v in columns.items() if k in lean_ppo.LOSS_COLUMNS}
            packed = lean_ppo.PackedColumns(used) if lean_ppo.PackedColumns.fits(used) else None
            flat = lean_ppo.FlatGradients(networks.parameters())
        for number, index in enumerate(minibatches, start=1):
            last = number == len(minibatches)  # RLlib logs the last minibatch's metrics only
            fast = networks is not None and not last  # the last one's losses are logged: autograd
            if fast:
                minibatch = packed.rows(index) if packed else {k: v[index] for k, v in used.items()}
            else:
                minibatch = {k: v[index] for k, v in columns.items()}
            if config.advantages_per_minibatch:
                minibatch[Postprocessing.ADVANTAGES] = standardized(
                    minibatch[Postprocessing.ADVANTAGES], minibatch.get(Columns.LOSS_MASK)
                )
            if fast:
                by_param = lean_ppo.ppo_gradients(
                    networks, minibatch, config, entropy_coeff, kl_coeff, out=flat
                )
                gradients = {pid: by_param[p] for pid, p in self._params.items()}
                self._apply_flat_gradients(flat.flat, gradients, config.grad_clip)
                continue
            fwd_out = module.forward_train(minibatch)
            loss, stats = lean_ppo.ppo_loss(
                unwrapped, minibatch, fwd_out, config, entropy_coeff, kl_coeff, last
            )
            for optimizer in self._optimizer_parameters:
                optimizer.zero_grad(set_to_none=True)
            loss.backward()
            gradients = {pid: p.grad for pid, p in self._params.items() if p.grad is not None}
            if config.grad_clip is not None:
                norm = clip_gradients(
                    gradients, grad_clip=config.grad_clip, grad_clip_by="global_norm"
                )
                if last:
                    stats[gradient_norm_key] = norm
            elif last and config.log_gradients:
                stats[gradient_norm_key] = torch.nn.utils.get_total_norm(gradients.values())
            self.apply_gradients(gradients)
        self._log_lean_update(module_id, columns, stats, loss, len(minibatches) * size, batch)
        self.after_gradient_based_update(timesteps=timesteps or {})
        if not _no_metrics_reduce:
            return self.metrics.reduce()

    def _log_lean_update(self, module_id, columns, stats, loss, rows_trained, batch) -> None:
        """The metrics RLlib's update logs, once: the last minibatch's losses (RLlib keeps only
        the last, window 1, and adapts the KL coefficient to it), and the steps trained."""
        self.metrics.log_dict(stats, key=module_id, window=1)
        self.metrics.log_value((module_id, self.TOTAL_LOSS_KEY), loss, window=1)
        if WEIGHTS_SEQ_NO in columns:
            lag = (self._weights_seq_no - columns[WEIGHTS_SEQ_NO]).float().mean()
            self.metrics.log_value(
                (module_id, DIFF_NUM_GRAD_UPDATES_VS_SAMPLER_POLICY), lag, window=1
            )
        self.metrics.log_value((module_id, WEIGHTS_SEQ_NO), self._weights_seq_no, window=1)
        self.metrics.log_value(
            (module_id, MODULE_TRAIN_BATCH_SIZE_MEAN), rows_trained, reduce="mean"
        )
        for key in ((module_id, NUM_MODULE_STEPS_TRAINED), (ALL_MODULES, NUM_MODULE_STEPS_TRAINED)):
            self.metrics.log_value(key, rows_trained, reduce="sum")
        for key in (
            (module_id, NUM_MODULE_STEPS_TRAINED_LIFETIME),
            (ALL_MODULES, NUM_MODULE_STEPS_TRAINED_LIFETIME),
        ):
            self.metrics.log_value(key, rows_trained, reduce="lifetime_sum")
        env_steps = batch.env_steps()
        self.metrics.log_value((ALL_MODULES, NUM_ENV_STEPS_TRAINED), env_steps, reduce="sum")
        self.metrics.log_value(
            (ALL_MODULES, NUM_ENV_STEPS_TRAINED_LIFETIME), env_steps, reduce="lifetime_sum"
        )

    @override(RLlibPPOTorchLearner)
    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        if config.advantages_per_minibatch:
            batch = dict(batch)
            batch[Postprocessing.ADVANTAGES] = standardized(
                batch[Postprocessing.ADVANTAGES], batch.get(Columns.LOSS_MASK)
            )
        return super().compute_loss_for_module(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )

    def _apply_flat_gradients(self, flat: torch.Tensor, gradients: dict, grad_clip) -> None:
        """``clip_gradients`` (by global norm) and ``apply_gradients`` for ``gradients`` that are
        views of the one tensor ``flat``: its norm is the total norm, in one kernel."""
        norm = torch.linalg.vector_norm(flat)
        if not torch.isfinite(norm) or self._lr_scheduler_classes is not None:
            if grad_clip is not None:  # RLlib's own clip (its norm maps inf to 1e9)
                clip_gradients(gradients, grad_clip=grad_clip, grad_clip_by="global_norm")
            return self.apply_gradients(gradients)  # nan/inf: RLlib's treatment, step for step
        if grad_clip is not None:  # clip_gradients' global-norm clip, on the flat tensor
            flat.mul_(torch.clamp(grad_clip / torch.clamp(norm + 1e-6, min=grad_clip), max=1.0))
        self._step_optimizers(gradients)

    @override(RLlibPPOTorchLearner)
    def apply_gradients(self, gradients_dict) -> None:
        if (
            not gradients_dict
            or self._grad_scalers is not None
            or self._lr_scheduler_classes is not None
        ):
            return super().apply_gradients(gradients_dict)
        total_norm = torch.nn.utils.get_total_norm(list(gradients_dict.values()))
        if not torch.isfinite(total_norm):  # RLlib's path: warn, zero the nan/inf gradients, step
            return super().apply_gradients(gradients_dict)
        self._step_optimizers(gradients_dict)

    def _step_optimizers(self, gradients_dict) -> None:
        """Each optimizer's step with these gradients (the fused kernel where it can)."""
        optimizers = [
            self.get_optimizer(module_id, name)
            for module_id, names in self._module_optimizers.items()
            for name in names
        ]
        by_param = {self._params[pid]: grad for pid, grad in gradients_dict.items()}
        for optimizer in optimizers:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            if len(optimizer.param_groups) == 1 and all(p in by_param for p in params):
                # the fused kernel on the optimizer's own state, without step()'s regrouping
                manual_gradients.adam_step(optimizer, [by_param[p] for p in params])
                continue
            for param in params:
                param.grad = by_param.get(param)
            optimizer.step()


class PPOConfig(rllib_ppo.PPOConfig):
    #: a class default only, set on the instance when given: Tune's restore refuses a config whose
    #: keys differ from the saved experiment's, and experiments saved before it must resume
    fast_update = True

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or PPO)
        self.vf_clip_param = math.inf  # no clamp of the squared value error (see the module doc)
        self.orthogonal_init = False
        self.adam_epsilon = 1e-8
        self.advantages_per_minibatch = False
        self.lean_update = True
        self.reward_scaling = False

    @override(rllib_ppo.PPOConfig)
    def training(
        self,
        *,
        orthogonal_init: bool | None = NotProvided,
        adam_epsilon: float | None = NotProvided,
        advantages_per_minibatch: bool | None = NotProvided,
        lean_update: bool | None = NotProvided,
        fast_update: bool | None = NotProvided,
        reward_scaling: bool | None = NotProvided,
        **kwargs,
    ):
        """RLlib's PPO settings, and:

        Args:
            orthogonal_init: start the networks orthogonal (as Stable-Baselines3 and CleanRL)
                rather than with torch's default initialisation.
            adam_epsilon: Adam's epsilon (torch's default 1e-8; Stable-Baselines3 uses 1e-5).
            advantages_per_minibatch: standardise the advantages again within each minibatch,
                as Stable-Baselines3 and CleanRL do (RLlib does it once per train batch).
            lean_update: run the epochs of minibatches without RLlib's per-minibatch
                bookkeeping (on by default; ``ddrl.algorithms.lean_ppo``); the loss, minibatch
                size and count are RLlib's.
            fast_update: in the lean update, compute each minibatch's gradients by hand
                (on by default; ``lean_ppo.ppo_gradients``: the same numbers as autograd's
                within float rounding, in fewer kernels) where the module is RLlib's default
                pair of MLPs with a diagonal Gaussian; any other module keeps autograd.
            reward_scaling: divide the rewards the learner trains on by the running standard
                deviation of the discounted return, clipped to +-10, as Stable-Baselines3's
                ``VecNormalize`` (``ddrl.algorithms.reward_scaling``); reported returns stay
                in the env's units.
        """
        super().training(**kwargs)
        for name, value in (
            ("orthogonal_init", orthogonal_init),
            ("adam_epsilon", adam_epsilon),
            ("advantages_per_minibatch", advantages_per_minibatch),
            ("lean_update", lean_update),
            ("fast_update", fast_update),
            ("reward_scaling", reward_scaling),
        ):
            if value is not NotProvided:
                setattr(self, name, value)
        return self

    @override(rllib_ppo.PPOConfig)
    def validate(self) -> None:
        super().validate()
        if not isinstance(self.fast_update, bool):
            self._value_error(f"`fast_update` must be true or false, got {self.fast_update!r}.")
        if self.reward_scaling and (self.num_learners or 0) > 1:
            self._value_error(
                "training.reward_scaling keeps one set of statistics on one learner; set "
                "learners.num_learners to 0 or 1, or reward_scaling to false."
            )

    @override(rllib_ppo.PPOConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        return RLModuleSpec(module_class=PPOTorchRLModule)

    @property
    @override(rllib_ppo.PPOConfig)
    def _model_config_auto_includes(self):
        return super()._model_config_auto_includes | {"orthogonal_init": self.orthogonal_init}

    @override(rllib_ppo.PPOConfig)
    def get_default_learner_class(self):
        return PPOTorchLearner


class PPO(rllib_ppo.PPO):
    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> PPOConfig:
        return PPOConfig()
