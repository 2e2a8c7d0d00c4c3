"""Reward normalization (VecNormalize-style) and reward clipping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from parllel.errors import ConfigError, ShapeError
from parllel.fields import REWARD, TERMINATED, TRUNCATED, VALID
from parllel.transforms._checks import (
    as_columns,
    batch_and_feature_shape,
    check_float_array,
    done_columns,
    flag_columns,
)
from parllel.transforms.base import Transform, as_ndarray, field_name, get_field
from parllel.transforms.kernels.normalization import normalize_reward_kernel
from parllel.validation import check_at_least, check_fraction, check_positive


class NormalizeRewards(Transform):
    """Scale rewards by the running std of the discounted return, in place.

    As Stable-Baselines3's ``VecNormalize``: a per-env running return updates
    running moments (unless :attr:`frozen`) and each reward becomes
    ``clip(r / sqrt(var(R) + epsilon))``, not centered. ``reset="termination"``
    is gymnasium 0.28's rule (CleanRL's PPO); ``prior_count`` is gymnasium's
    prior weight. Run it before :class:`EstimateAdvantage`; resuming continues
    exactly (docs/transforms.md).

    Example:
        >>> NormalizeRewards(sample_tree, gamma=0.99)(sample_tree)
    """

    def __init__(
        self,
        sample_tree: Any,
        gamma: float,
        *,
        clip: float = 10.0,
        epsilon: float = 1e-8,
        only_valid: bool = False,
        reward_field: str | tuple[str, ...] = REWARD,
        done_fields: tuple[Any, Any] = (TERMINATED, TRUNCATED),
        reset: Literal["episode_end", "termination"] = "episode_end",
        prior_count: float = 0.0,
    ) -> None:
        if reset not in ("episode_end", "termination"):
            raise ConfigError(
                f"reset must be 'episode_end' or 'termination', got {reset!r}"
            )
        self.reset = reset
        self.reward_field = reward_field
        self.reward_name = field_name(reward_field)
        self.done_fields = tuple(done_fields)
        if len(self.done_fields) != 2:
            raise ConfigError(
                "done_fields names two fields: the terminated and the truncated flags"
            )
        self.gamma = check_fraction("gamma", gamma)
        self.clip = check_positive("clip", clip, allow_inf=True)
        self.epsilon = check_positive("epsilon", epsilon)
        self.only_valid = bool(only_valid)
        self.frozen = False
        name = self.reward_name
        reward = check_float_array(
            name, as_ndarray(get_field(sample_tree, reward_field, "to normalize"), name)
        )
        batch_shape, feature_shape = batch_and_feature_shape(name, reward)
        for path in self.done_fields:
            get_field(sample_tree, path, "reward normalization resets on episode ends")
        if self.only_valid:
            get_field(
                sample_tree, VALID, "only_valid=True; build ComputeValidMask first"
            )
        self.feature_shape = feature_shape
        n_comp = int(np.prod(feature_shape)) if feature_shape else 1
        self._returns = np.zeros(batch_shape[1] * n_comp, dtype=np.float64)
        prior = float(check_at_least("prior_count", prior_count, 0))
        self._count = np.full(n_comp, prior, dtype=np.float64)
        self._mean = np.zeros(n_comp, dtype=np.float64)
        self._m2 = np.full(n_comp, prior, dtype=np.float64)  # variance 1
        self._scratch = np.zeros((3, n_comp), dtype=np.float64)
        self._no_mask = np.ones((1, 1), dtype=np.bool_)
        self._arguments(sample_tree)  # validates shapes and dtypes up front

    def _arguments(self, sample_tree: Any) -> tuple:
        name = self.reward_name
        leaf = get_field(sample_tree, self.reward_field)
        reward = check_float_array(name, as_ndarray(leaf, name))
        batch_shape, feature_shape = batch_and_feature_shape(name, reward)
        if feature_shape != self.feature_shape or self._returns.size != int(
            np.prod(reward.shape[1:])
        ):
            raise ShapeError(f"field '{name}' changed shape to {reward.shape}")
        (term_field, term_name), (trunc_field, trunc_name) = (
            (path, field_name(path)) for path in self.done_fields
        )
        term, trunc, k = done_columns(
            as_ndarray(get_field(sample_tree, term_field), term_name),
            as_ndarray(get_field(sample_tree, trunc_field), trunc_name),
            batch_shape, feature_shape, (term_name, trunc_name),
        )  # fmt: skip
        mask, use_mask = self._no_mask, False
        if self.only_valid:
            mask, k3 = flag_columns(
                VALID, as_ndarray(sample_tree[VALID], VALID), batch_shape, feature_shape
            )
            if k3 != k:
                raise ShapeError("field 'valid' must have the layout of 'terminated'")
            use_mask = True
        return as_columns(name, reward, 2), term, trunc, mask, use_mask, k

    def __call__(self, sample_tree: Any) -> Any:
        """Normalize the rewards in place (updating statistics unless frozen)."""
        reward, term, trunc, mask, use_mask, k = self._arguments(sample_tree)
        normalize_reward_kernel(
            reward, term, trunc, mask, use_mask, k, self.gamma, self.epsilon,
            self.clip, not self.frozen, self.reset == "termination",
            self._returns, self._count, self._mean,
            self._m2, self._scratch[0], self._scratch[1], self._scratch[2],
        )  # fmt: skip
        return sample_tree

    @property
    def return_var(self) -> np.ndarray:
        """Variance of the discounted return per component (ones before data)."""
        var = np.where(self._count > 0, self._m2 / np.maximum(self._count, 1), 1.0)
        return var.reshape(self.feature_shape)

    def state_dict(self) -> dict[str, Any]:
        """Return the return statistics and the per-env running returns."""
        return {
            "count": self._count.copy(),
            "mean": self._mean.copy(),
            "m2": self._m2.copy(),
            "returns": self._returns.copy(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore state saved by :meth:`state_dict`."""
        for key in ("count", "mean", "m2", "returns"):
            if key not in state:
                raise ConfigError(f"state dict is missing key '{key}'")
            target = getattr(self, f"_{key}")
            value = np.asarray(state[key], dtype=np.float64)
            if value.shape != target.shape:
                raise ShapeError(
                    f"state '{key}' has shape {value.shape}, expected {target.shape}"
                )
            target[:] = value


class ClipRewards(Transform):
    """Clip ``reward`` to ``[-bound, bound]`` in place.

    Example:
        >>> ClipRewards(sample_tree, bound=1.0)(sample_tree)
    """

    def __init__(self, sample_tree: Any, bound: float = 1.0) -> None:
        self.bound = check_positive("bound", bound)
        check_float_array(
            REWARD, as_ndarray(get_field(sample_tree, REWARD, "to clip"), REWARD)
        )

    def __call__(self, sample_tree: Any) -> Any:
        """Clip ``reward`` in place."""
        reward = as_ndarray(sample_tree[REWARD], REWARD)
        np.clip(reward, -self.bound, self.bound, out=reward)
        return sample_tree
