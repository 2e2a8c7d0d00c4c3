"""The forward pass of an exported network in plain numpy.

A JAX run's export describes its flax modules as plain data (each module's
type name and fields, see :func:`parllel.jax.export.describe_module`) next
to their parameters; :func:`apply_module` evaluates that description on
numpy arrays with the flax modules' semantics (layer names, the torch-order
flatten of the CNN, ``uint8`` images scaled by 1/255), so the policy plays
without JAX. Only what acting needs is evaluated: encoders, MLPs and the
policy heads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from parllel.errors import PolicyFileError, ShapeError

__all__ = ["ACTIVATIONS", "apply_module"]


def _gelu(x: np.ndarray) -> np.ndarray:  # jax.nn.gelu's default (tanh) form
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
    return 0.5 * x * (1.0 + np.tanh(inner))


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "softplus": lambda x: np.logaddexp(x, 0),
    "gelu": _gelu,
}
"""The activations an export may name (flax.linen's functions of those names)."""

Module = Mapping[str, Any]
_Apply = Callable[[Module, Mapping[str, Any], Any], Any]
_APPLY: dict[str, _Apply] = {}


def _registers(name: str) -> Callable[[_Apply], _Apply]:
    def register(function: _Apply) -> _Apply:
        _APPLY[name] = function
        return function

    return register


def apply_module(module: Module, params: Mapping[str, Any], inputs: Any) -> Any:
    """Evaluate the described ``module`` with ``params`` on numpy ``inputs``.

    Raises:
        PolicyFileError: a module type or activation this version cannot
            evaluate, or parameters missing for a layer.
    """
    kind = module.get("type") if isinstance(module, Mapping) else None
    apply = _APPLY.get(str(kind))
    if apply is None:
        raise PolicyFileError(
            f"the policy's network has a module {kind!r} that parllel cannot "
            f"evaluate in numpy (known: {sorted(_APPLY)})"
        )
    try:
        return apply(module, params, inputs)
    except KeyError as missing:
        raise PolicyFileError(
            f"the exported {kind} lacks {missing} (weights or fields)"
        ) from None


def _dtype(module: Module) -> np.dtype:
    return np.dtype(module.get("param_dtype", "float32"))


def _activation(name: Any) -> Callable[[np.ndarray], np.ndarray]:
    try:
        return ACTIVATIONS[str(name)]
    except KeyError:
        raise PolicyFileError(
            f"unknown activation {name!r} (known: {sorted(ACTIVATIONS)})"
        ) from None


def _dense(params: Mapping[str, Any], x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    kernel = np.asarray(params["kernel"], dtype)
    return x.astype(dtype) @ kernel + np.asarray(params["bias"], dtype)


@_registers("FlattenEncoder")
def _flatten(module: Module, params: Mapping[str, Any], x: Any) -> np.ndarray:
    shape = tuple(module["feature_shape"])
    x = np.asarray(x)
    if x.shape[x.ndim - len(shape) :] != shape:
        raise ShapeError(f"expected observations [..., {shape}]; got {x.shape}")
    leading = x.shape[: x.ndim - len(shape)]
    return x.reshape(*leading, math.prod(shape)).astype(_dtype(module))


@_registers("OneHotEncoder")
def _one_hot(module: Module, params: Mapping[str, Any], x: Any) -> np.ndarray:
    x = np.asarray(x)
    n = int(module["n"])
    return (x[..., None] == np.arange(n)).astype(_dtype(module))


@_registers("DictEncoder")
def _dict(module: Module, params: Mapping[str, Any], x: Any) -> np.ndarray:
    sequence = isinstance(x, (tuple, list))
    features = [
        apply_module(encoder, params.get(f"encoders_{key}", {}), x[int(key)])
        if sequence
        else apply_module(encoder, params.get(f"encoders_{key}", {}), x[key])
        for key, encoder in module["encoders"].items()
    ]
    return np.concatenate(features, axis=-1)


def _conv(
    params: Mapping[str, Any], x: np.ndarray, stride: int, pad: int, dtype: np.dtype
) -> np.ndarray:
    """A 2-D convolution of ``[N, H, W, C]`` with a ``[kh, kw, C, out]`` kernel."""
    kernel = np.asarray(params["kernel"], dtype)
    kh, kw = kernel.shape[:2]
    if pad:
        x = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(1, 2))
    windows = windows[:, ::stride, ::stride]  # [N, Ho, Wo, C, kh, kw]
    out = np.einsum("nhwcij,ijco->nhwo", windows, kernel, optimize=True)
    return out + np.asarray(params["bias"], dtype)


@_registers("CnnEncoder")
def _cnn(module: Module, params: Mapping[str, Any], images: Any) -> np.ndarray:
    images = np.asarray(images)
    image_shape = tuple(module["image_shape"])
    ndim = len(image_shape)
    if images.shape[images.ndim - ndim :] != image_shape:
        raise ShapeError(
            f"CnnEncoder expects images [..., {image_shape}]; got {images.shape}"
        )
    leading = images.shape[: images.ndim - ndim]
    x = images.reshape(-1, *image_shape)
    channels_last = bool(module["channels_last"])
    if ndim == 2:
        x = x[..., None]
    elif ndim == 3 and not channels_last:
        x = x.transpose(0, 2, 3, 1)
    elif ndim == 4:
        if not channels_last:
            x = x.transpose(0, 1, 3, 4, 2)
        x = x.transpose(0, 2, 3, 1, 4)
        x = x.reshape(*x.shape[:3], -1)
    dtype = _dtype(module)
    x = x.astype(dtype) * dtype.type(1.0 / 255.0) if x.dtype == np.uint8 else x
    x = x.astype(dtype)
    activation = _activation(module["activation"])
    channels = module["channels"]
    paddings = module["paddings"] or [0] * len(channels)
    for index, (stride, pad) in enumerate(zip(module["strides"], paddings)):
        layer = params[f"convs_{2 * index}"]
        x = activation(_conv(layer, x, int(stride), int(pad), dtype))
    x = x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)  # torch's (C, H, W) order
    if module["output_size"] is not None:
        x = activation(_dense(params["linear_0"], x, dtype))
    return x.reshape(*leading, x.shape[-1])


@_registers("MLP")
def _mlp(module: Module, params: Mapping[str, Any], x: Any) -> np.ndarray:
    dtype = _dtype(module)
    activation = _activation(module["activation"])
    x = np.asarray(x)
    index = 0
    for _ in module["hidden_sizes"]:
        x = activation(_dense(params[f"layers_{index}"], x, dtype))
        index += 2
    if module["output_size"] is not None:
        x = _dense(params[f"layers_{index}"], x, dtype)
    return x


@_registers("CategoricalHead")
def _categorical_head(
    module: Module, params: Mapping[str, Any], x: Any
) -> dict[str, np.ndarray]:
    return {"logits": _dense(params["linear"], x, _dtype(module))}


@_registers("GaussianHead")
def _gaussian_head(
    module: Module, params: Mapping[str, Any], x: Any
) -> dict[str, np.ndarray]:
    dtype = _dtype(module)
    mean = _dense(params["mean"], x, dtype)
    if module["state_dependent_std"]:
        log_std = _dense(params["log_std_layer"], x, dtype)
    else:
        log_std = np.broadcast_to(np.asarray(params["log_std"], dtype), mean.shape)
    return {"mean": mean, "log_std": log_std}


def _optional(
    module: Module, name: str, params: Mapping[str, Any], x: np.ndarray
) -> np.ndarray:
    sub = module.get(name)
    return x if sub is None else apply_module(sub, params.get(name, {}), x)


@_registers("ActorCriticNetwork")
def _actor_critic(
    module: Module, params: Mapping[str, Any], observation: Any
) -> dict[str, np.ndarray]:
    """The policy half: encoder, shared trunk, policy trunk, policy head."""
    features = apply_module(module["encoder"], params.get("encoder", {}), observation)
    features = _optional(module, "trunk", params, features)
    features = _optional(module, "policy_trunk", params, features)
    return apply_module(module["policy_head"], params["policy_head"], features)


@_registers("SacActor")
def _sac_actor(
    module: Module, params: Mapping[str, Any], observation: Any
) -> dict[str, np.ndarray]:
    features = apply_module(module["encoder"], params.get("encoder", {}), observation)
    trunk = {key: module[key] for key in ("hidden_sizes", "activation")}
    features = _mlp({**trunk, "output_size": None}, params["trunk"], features)
    head = {"state_dependent_std": True, "param_dtype": "float32"}
    return _gaussian_head(head, params["head"], features)


@_registers("QNetwork")
def _q_network(
    module: Module, params: Mapping[str, Any], observation: Any
) -> dict[str, np.ndarray]:
    features = apply_module(module["encoder"], params.get("encoder", {}), observation)
    mlp = {key: module[key] for key in ("hidden_sizes", "activation")}
    mlp["output_size"] = module["num_actions"]
    return {"q_values": _mlp(mlp, params["mlp"], features)}
