"""A PPO minibatch update of K stacked 64x64 actor-critics three ways:
K sequential eager torch updates, one ``torch.func`` (``vmap`` over stacked
parameters) update, and one ``jax.jit(jax.vmap(...))`` update (what
:class:`~parllel.jax.algos.SeededPPO` compiles). HalfCheetah's sizes (17
observations, 6 actions), CleanRL's minibatch of 64 per run, Adam, torch on
one thread. ``many_seeds.py`` prints the figures (issue #37: does a torch
seed axis pay?)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

OBS, ACT, HIDDEN, MINIBATCH, CLIP = 17, 6, 64, 64, 0.2


def _per_call(step: Callable[[], Any], repeats: int) -> float:
    """Median seconds per call of ``step`` after two warm-up calls."""
    step()
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _data(K: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.standard_normal((K, MINIBATCH, OBS), np.float32),
        "action": rng.standard_normal((K, MINIBATCH, ACT), np.float32),
        "old_log_prob": rng.standard_normal((K, MINIBATCH), np.float32),
        "advantage": rng.standard_normal((K, MINIBATCH), np.float32),
        "ret": rng.standard_normal((K, MINIBATCH), np.float32),
    }


def torch_updates(K: int, repeats: int) -> tuple[float, float]:
    """Seconds per update of all K runs: (K sequential eager, one torch.func)."""
    import torch
    from torch import nn
    from torch.func import functional_call, grad, stack_module_state, vmap

    torch.set_num_threads(1)

    class ActorCritic(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pi = nn.Sequential(
                nn.Linear(OBS, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN),
                nn.Tanh(), nn.Linear(HIDDEN, ACT),
            )  # fmt: skip
            self.v = nn.Sequential(
                nn.Linear(OBS, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN),
                nn.Tanh(), nn.Linear(HIDDEN, 1),
            )  # fmt: skip
            self.log_std = nn.Parameter(torch.zeros(ACT))

        def forward(self, obs: Any) -> tuple[Any, Any]:
            return self.pi(obs), self.v(obs).squeeze(-1)

    def loss_of(mean: Any, value: Any, log_std: Any, batch: dict[str, Any]) -> Any:
        dist = torch.distributions.Normal(mean, log_std.exp())
        log_prob = dist.log_prob(batch["action"]).sum(-1)
        ratio = (log_prob - batch["old_log_prob"]).exp()
        adv = batch["advantage"]
        policy = -torch.minimum(
            ratio * adv, ratio.clamp(1 - CLIP, 1 + CLIP) * adv
        ).mean()
        return policy + 0.5 * ((value - batch["ret"]) ** 2).mean()

    data = {k: torch.from_numpy(v) for k, v in _data(K).items()}
    models = [ActorCritic() for _ in range(K)]
    optimizers = [torch.optim.Adam(m.parameters(), lr=3e-4) for m in models]

    def sequential() -> None:
        for k, (model, optimizer) in enumerate(zip(models, optimizers)):
            batch = {name: value[k] for name, value in data.items()}
            mean, value = model(batch["obs"])
            loss = loss_of(mean, value, model.log_std, batch)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()

    params, buffers = stack_module_state(models)  # type: ignore[arg-type]
    stacked = [p.detach().requires_grad_(False) for p in params.values()]
    names = list(params)
    base = ActorCritic().to("meta")
    adam = torch.optim.Adam(stacked, lr=3e-4)

    def one_loss(flat: tuple[Any, ...], batch: dict[str, Any]) -> Any:
        mapping = dict(zip(names, flat))
        mean, value = functional_call(base, (mapping, {}), (batch["obs"],))
        return loss_of(mean, value, mapping["log_std"], batch)

    grads_of = vmap(grad(one_loss))

    def vectorized() -> None:
        with torch.no_grad():
            grads = grads_of(tuple(stacked), data)
            norms = torch.stack([g.flatten(1).square().sum(1) for g in grads]).sum(0)
            scale = (0.5 / (norms.sqrt() + 1e-6)).clamp(max=1.0)
            for tensor, g in zip(stacked, grads):
                tensor.grad = g * scale.reshape(-1, *([1] * (g.ndim - 1)))
            adam.step()

    return _per_call(sequential, repeats), _per_call(vectorized, repeats)


def jax_update(K: int, repeats: int) -> float:
    """Seconds per update of all K runs: one ``jit(vmap(...))`` call."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import linen as nn

    class ActorCritic(nn.Module):
        @nn.compact
        def __call__(self, obs: Any) -> tuple[Any, Any, Any]:
            pi = nn.Dense(ACT)(
                nn.tanh(nn.Dense(HIDDEN)(nn.tanh(nn.Dense(HIDDEN)(obs))))
            )
            v = nn.Dense(1)(nn.tanh(nn.Dense(HIDDEN)(nn.tanh(nn.Dense(HIDDEN)(obs)))))
            log_std = self.param("log_std", nn.initializers.zeros, (ACT,))
            return pi, v[..., 0], log_std

    model = ActorCritic()
    keys = jax.random.split(jax.random.key(0), K)
    params = jax.vmap(lambda key: model.init(key, jnp.zeros((1, OBS))))(keys)
    optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(3e-4))
    opt_state = jax.vmap(optimizer.init)(params)
    data = {k: jnp.asarray(v) for k, v in _data(K).items()}

    def loss_of(p: Any, batch: dict[str, Any]) -> Any:
        mean, value, log_std = model.apply(p, batch["obs"])
        std = jnp.exp(log_std)
        log_prob = (
            -0.5 * jnp.square((batch["action"] - mean) / std)
            - log_std
            - 0.5 * jnp.log(2 * jnp.pi)
        ).sum(-1)
        ratio = jnp.exp(log_prob - batch["old_log_prob"])
        adv = batch["advantage"]
        policy = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - CLIP, 1 + CLIP) * adv)
        return policy.mean() + 0.5 * jnp.square(value - batch["ret"]).mean()

    def step(p: Any, state: Any, batch: dict[str, Any]) -> Any:
        grads = jax.grad(loss_of)(p, batch)
        updates, state = optimizer.update(grads, state, p)
        return optax.apply_updates(p, updates), state

    update = jax.jit(jax.vmap(step))
    carry = [params, opt_state]

    def call() -> None:
        carry[0], carry[1] = update(carry[0], carry[1], data)
        jax.block_until_ready(carry[0])

    return _per_call(call, repeats)


def measure(K: int = 8, repeats: int = 50) -> dict[str, float | None]:
    """The three timings (ms per update of all K runs) and their ratios."""
    sequential, vectorized = torch_updates(K, repeats)
    result: dict[str, float | None] = {
        f"torch_sequential{K}_update_ms": round(1e3 * sequential, 3),
        f"torch_func_seeds{K}_update_ms": round(1e3 * vectorized, 3),
        f"torch_func_seeds{K}_vs_{K}_sequential": round(vectorized / sequential, 3),
    }
    try:
        jax_seconds = jax_update(K, repeats)
    except ImportError:  # no jax extra: the torch figures stand alone
        result[f"jax_seeds{K}_update_ms"] = None
        result[f"torch_func_seeds{K}_vs_jax_seeds{K}"] = None
        return result
    result[f"jax_seeds{K}_update_ms"] = round(1e3 * jax_seconds, 3)
    result[f"torch_func_seeds{K}_vs_jax_seeds{K}"] = round(vectorized / jax_seconds, 3)
    return result


if __name__ == "__main__":
    print(measure())
