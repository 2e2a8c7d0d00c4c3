"""Parameter pytrees: initialization and conversion to and from torch state dicts.

Flax parameters are nested dicts of arrays (pytrees). The JAX models use
the torch models' submodule names, so a torch ``state_dict`` converts by
name: ``trunk.layers.0.weight`` is ``params["trunk"]["layers_0"]["kernel"]``
(transposed: torch stores ``[out, in]``, flax ``[in, out]``; conv kernels
``[out, in, kh, kw]`` become ``[kh, kw, in, out]``). Both directions take and
give numpy arrays, so neither side imports the other framework: pass
``{k: v.numpy() for k, v in model.state_dict().items()}`` from torch and
``{k: torch.from_numpy(v) ...}`` back.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from parllel.errors import CheckpointMismatchError

__all__ = ["init_params", "params_from_torch", "params_to_numpy", "params_to_torch"]

_LEAF_NAMES = {"weight": "kernel", "bias": "bias"}
_CONTAINERS = ("encoders",)  # a ModuleDict's key joins its name, as in flax


def init_params(network: nn.Module, example_observation: Any, key: jax.Array) -> Any:
    """Initialize ``network``'s parameters for one batch of example observations.

    Args:
        network: e.g. from :func:`~parllel.jax.models.build_actor_critic`.
        example_observation: an observation (array or tree) with a leading
            batch dim, e.g. ``observation_space.sample()[None]``.
        key: the PRNG key of the initialization.

    Returns:
        The parameter pytree (``variables["params"]``).
    """
    try:
        hash(network)
    except TypeError:  # e.g. a dict of encoders: compiled for this call only
        return jax.jit(network.init)(key, example_observation)["params"]
    return _jitted_init(network, key, example_observation)


@functools.partial(jax.jit, static_argnums=0)
def _jitted_init(network: nn.Module, key: jax.Array, example_observation: Any) -> Any:
    """One compiled program per network configuration: flax modules compare
    by their fields, so K equal networks (K seeds) compile it once."""
    return network.init(key, example_observation)["params"]


def _flax_path(torch_name: str) -> tuple[tuple[str, ...], str, str]:
    """``(module path, flax leaf name, torch leaf name)`` of a torch entry."""
    parts = torch_name.split(".")
    *modules, leaf = parts
    path: list[str] = []
    index = 0
    while index < len(modules):
        part = modules[index]
        following = modules[index + 1] if index + 1 < len(modules) else None
        if following is not None and (following.isdigit() or part in _CONTAINERS):
            path.append(f"{part}_{following}")
            index += 2
        else:
            path.append(part)
            index += 1
    return tuple(path), _LEAF_NAMES.get(leaf, leaf), leaf


def _to_flax(leaf: str, value: np.ndarray) -> np.ndarray:
    if leaf == "weight" and value.ndim == 2:
        return value.T
    if leaf == "weight" and value.ndim == 4:
        return value.transpose(2, 3, 1, 0)
    return value


def _to_torch(leaf: str, value: np.ndarray) -> np.ndarray:
    if leaf == "kernel" and value.ndim == 2:
        return value.T
    if leaf == "kernel" and value.ndim == 4:
        return value.transpose(3, 2, 0, 1)
    return value


def params_from_torch(state_dict: Mapping[str, Any], dtype: Any = None) -> Any:
    """Flax parameters from a torch state dict of numpy arrays.

    Args:
        state_dict: ``{name: ndarray}`` (a torch ``state_dict`` with each
            tensor's ``.numpy()``) of a model the torch builders made
            (``build_actor_critic``, ``MLP``, ``CnnEncoder``, ...).
        dtype: cast every array to it (None: keep).

    Returns:
        A nested dict of ``jnp`` arrays, the ``params`` of the JAX twin.

    Example:
        >>> torch_model, _ = parllel.torch.models.build_actor_critic(obs, act)
        >>> params = params_from_torch(
        ...     {k: v.numpy() for k, v in torch_model.state_dict().items()})
    """
    params: dict[str, Any] = {}
    for name, value in state_dict.items():
        path, leaf, torch_leaf = _flax_path(name)
        array = _to_flax(torch_leaf, np.asarray(value))
        node = params
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = jnp.asarray(array if dtype is None else array.astype(dtype))
    return params


def params_to_torch(params: Any) -> dict[str, np.ndarray]:
    """A torch state dict (numpy arrays) from flax ``params``; the inverse of
    :func:`params_from_torch` (load it with ``{k: torch.from_numpy(v)}``)."""
    state: dict[str, np.ndarray] = {}

    def walk(node: Mapping[str, Any], prefix: list[str]) -> None:
        for name, value in node.items():
            if isinstance(value, Mapping):
                walk(value, [*prefix, *_torch_parts(name)])
                continue
            torch_leaf = {"kernel": "weight"}.get(name, name)
            array = np.array(value)  # a writable copy
            state[".".join([*prefix, torch_leaf])] = _to_torch(name, array)

    walk(params, [])
    return state


def _torch_parts(flax_name: str) -> list[str]:
    """``layers_0`` -> ``["layers", "0"]``; ``encoders_pixels`` ->
    ``["encoders", "pixels"]``; other names unchanged."""
    head, _, tail = flax_name.rpartition("_")
    if head and tail.isdigit():
        return [head, tail]
    for container in _CONTAINERS:
        if flax_name.startswith(container + "_"):
            return [container, flax_name[len(container) + 1 :]]
    return [flax_name]


def params_to_numpy(params: Any) -> Any:
    """The pytree with numpy leaves (for checkpoints and pickling): copies,
    writable and independent of JAX's buffers (on a CPU ``np.asarray`` would
    give read-only views, which keep a donated buffer from being reused)."""
    return jax.tree.map(lambda leaf: np.array(leaf, copy=True), params)


def load_params(current: Any, saved: Any, what: str = "params") -> Any:
    """``saved`` (numpy leaves) as jnp arrays in ``current``'s structure.

    Raises:
        CheckpointMismatchError: the structures or the leaf shapes differ.
    """
    current_leaves, treedef = jax.tree.flatten(current)
    saved_leaves, saved_treedef = jax.tree.flatten(saved)
    if str(saved_treedef) != str(treedef):
        raise CheckpointMismatchError(
            f"the saved {what} do not have the current structure: "
            f"{saved_treedef} saved, {treedef} now"
        )
    for path_leaf, (old, new) in enumerate(zip(saved_leaves, current_leaves)):
        if np.shape(old) != np.shape(new):
            raise CheckpointMismatchError(
                f"{what} leaf {path_leaf}: shape {np.shape(old)} saved, "
                f"{np.shape(new)} now"
            )
    return jax.tree.unflatten(
        treedef,
        [
            jnp.asarray(old, dtype=jnp.asarray(new).dtype)
            for old, new in zip(saved_leaves, current_leaves)
        ],
    )
