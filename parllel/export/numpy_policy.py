"""A JAX run's exported policy acting in plain numpy, without JAX.

:func:`load_numpy_policy` reads a ``policy.npz`` (or a JAX run directory:
its export, or its newest checkpoint through its ``policy_spec.json``) and
returns a :class:`NumpyPolicy`, which acts as :class:`parllel.torch.Policy`
does: ``act(observation)`` takes raw gymnasium observations, applies the
saved observation normalizer, evaluates the network with
:func:`~parllel.export.network.apply_module` and returns an action for
``env.step``::

    policy = load_numpy_policy("runs/cartpole-ppo-20250101-120000")
    action = policy.act(observation)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from parllel.cages.spaces import zero_example
from parllel.errors import PolicyFileError, ShapeError
from parllel.export.actions import choose_actions
from parllel.export.network import apply_module
from parllel.export.normalizer import FrozenObservationNormalizer
from parllel.export.npz import (
    NPZ_POLICY_FILE,
    NumpyPolicyRecord,
    is_npz_policy,
    read_npz_policy,
)
from parllel.export.observations import ObservationAdapter
from parllel.export.spaces import space_from_data
from parllel.export.spec import (
    SPEC_FILE,
    checkpoint_source,
    normalizer_from_checkpoint,
    spec_weights,
)

__all__ = ["NumpyPolicy", "load_numpy_policy", "plays_in_numpy"]

WEIGHTS = "network"
"""the name of the network's parameters in a numpy policy file"""


class NumpyPolicy:
    """A JAX run's network, spaces and observation normalizer, acting in numpy.

    Build one with :func:`load_numpy_policy`. Actions are the JAX agent's
    (as numpy): an ``int`` for a ``Discrete`` space, a ``float32`` array for
    a ``Box``. Feed-forward: :meth:`reset` has nothing to forget.

    Args:
        header: the export's header (architecture, spaces, provenance).
        params: the network's parameters (nested dicts of arrays).
        observation_normalizer: the saved normalizer, or None.
        source: the file the weights came from.
        clip_actions: clip ``Box`` actions into the space's bounds.
        seed: seed of the stochastic actions' generator.

    Raises:
        PolicyFileError: the header lacks its architecture or spaces.
        ConfigError: ``clip_actions`` for a ``Box`` without a finite bound.
    """

    def __init__(
        self,
        header: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        observation_normalizer: FrozenObservationNormalizer | None = None,
        source: Path | None = None,
        clip_actions: bool = False,
        seed: int | None = None,
    ) -> None:
        try:
            architecture = dict(header["architecture"])
            self.network = dict(architecture["network"])
            self.distribution = dict(architecture["distribution"])
            self.builder = str(architecture["builder"])
            self.observation_space = space_from_data(header["observation_space"])
            self.action_space = space_from_data(header["action_space"])
        except (KeyError, TypeError) as error:
            raise PolicyFileError(f"{source} lacks {error}") from None
        self.action_mask_key = architecture.get("action_mask_key")
        example = zero_example(self.observation_space)
        self.params = params
        self.observation_normalizer = observation_normalizer
        self.trained_with = dict(header.get("trained_with") or {})
        self.source = source
        self.clip_actions = bool(clip_actions)
        self._adapter = ObservationAdapter(
            self.observation_space,
            self.action_space,
            observation_normalizer,
            clip_actions,
        )
        self.rng = np.random.default_rng(seed)
        try:  # the weights must fit the network the header describes
            apply_module(self.network, params, self._adapter.inputs(example, False))
        except (ValueError, IndexError, ShapeError) as error:
            raise PolicyFileError(
                f"the weights of {source} do not fit the network it describes: "
                f"{type(error).__name__}: {error}"
            ) from error

    @property
    def recurrent(self) -> bool:
        """False: JAX agents are feed-forward."""
        return False

    def seed(self, seed: int | None) -> None:
        """Restart the generator of stochastic actions from ``seed``."""
        self.rng = np.random.default_rng(seed)

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The action for one observation, or actions for a batch ``[N, ...]``.

        Args:
            observation: as the env returns it (any nesting of its space), or
                N of them stacked on a leading dim.
            deterministic: the distribution's mode (greedy for DQN), as in
                evaluation; False samples (DQN: epsilon-greedy with the
                epsilon at export).
        """
        batch = self._adapter.batch_size(observation)
        inputs = self._adapter.inputs(observation, batch is not None)
        outputs = apply_module(self.network, self.params, inputs)
        mask = None
        if self.action_mask_key is not None and isinstance(inputs, Mapping):
            mask = inputs.get(self.action_mask_key)
        action = choose_actions(
            self.distribution,
            outputs,
            deterministic=deterministic,
            rng=self.rng,
            action_mask=mask,
        )
        return self._adapter.actions(action, batch is not None)

    __call__ = act

    def reset(self, env_indices: Any = None) -> None:
        """Nothing to forget (feed-forward); for :class:`parllel.torch.Policy`'s interface."""

    def __repr__(self) -> str:
        trained = ", ".join(f"{k}={v}" for k, v in self.trained_with.items() if v)
        return (
            f"NumpyPolicy({self.builder}, observation_space={self.observation_space}"
            f", action_space={self.action_space}{', ' + trained if trained else ''})"
        )


def _record_of_run(run_dir: Path) -> NumpyPolicyRecord:
    """The newer of the run's export and its newest checkpoint (the export on a tie)."""
    export = run_dir / NPZ_POLICY_FILE
    record = read_npz_policy(export) if export.is_file() else None
    trained = {} if record is None else record.header["trained_with"]
    source = checkpoint_source(run_dir, NPZ_POLICY_FILE, trained.get("env_steps"))
    if source is None and record is not None:
        return record
    assert source is not None  # checkpoint_source raises if there is nothing
    spec, path = source.spec, source.checkpoint
    state_key = spec.get("architecture", {}).get("state_key")
    weights = {}
    for name, state in spec_weights(spec, source.objects, path).items():
        if not isinstance(state, Mapping) or state_key not in state:
            raise PolicyFileError(
                f"checkpoint {path}: the agent's state has no {state_key!r} "
                "parameters (the spec's architecture.state_key)"
            )
        weights[name] = state[state_key]
    header = {
        **spec,
        "trained_with": {**spec["trained_with"], "env_steps": source.step},
    }
    normalizer = normalizer_from_checkpoint(spec, source.objects, path)
    return NumpyPolicyRecord(header, weights, normalizer, path)


def load_numpy_policy(
    path: str | os.PathLike[str],
    *,
    clip_actions: bool = False,
    seed: int | None = None,
) -> NumpyPolicy:
    """Load a JAX run's exported policy to act in numpy, from its file or run directory.

    A run directory gives its ``policy.npz``, or its newest checkpoint (read
    with the run's ``policy_spec.json``) when that is newer than the export
    or there is no export.

    Example:
        >>> policy = load_numpy_policy("runs/cartpole-ppo-20250101-120000")
        >>> action = policy.act(observation)

    Args:
        path: a ``policy.npz`` or a JAX run's directory.
        clip_actions: clip ``Box`` actions into the space's bounds.
        seed: seed of the stochastic actions' generator.

    Raises:
        PolicyFileError: nothing to load at ``path``.
        PolicyFileError: the file is damaged, not a policy, of a newer
            format, or names a module this version cannot evaluate.
        ConfigError: ``clip_actions`` for a ``Box`` without a finite bound.
    """
    path = Path(path)
    if path.is_dir():
        record = _record_of_run(path)
    elif path.exists():
        record = read_npz_policy(path)
    else:
        raise PolicyFileError(f"{path} does not exist (a policy file or run directory)")
    if WEIGHTS not in record.weights:
        raise PolicyFileError(f"{record.source} has no {WEIGHTS!r} weights")
    normalizer = record.observation_normalizer
    return NumpyPolicy(
        record.header,
        record.weights[WEIGHTS],
        observation_normalizer=(
            None
            if normalizer is None
            else FrozenObservationNormalizer.from_data(normalizer)
        ),
        source=record.source,
        clip_actions=clip_actions,
        seed=seed,
    )


def plays_in_numpy(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a JAX run's policy (:func:`load_numpy_policy`
    loads it) rather than a torch one (:func:`parllel.torch.load_policy`).

    True for a ``policy.npz``, and for a run directory with one or whose
    ``policy_spec.json`` records the ``jax`` backend.
    """
    path = Path(path)
    if not path.is_dir():
        return path.is_file() and is_npz_policy(path)
    if (path / NPZ_POLICY_FILE).is_file():
        return True
    try:
        spec = json.loads((path / SPEC_FILE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(spec, Mapping) and spec.get("backend") == "jax"
