"""Per-step cost of the handlers: JaxHandler against TorchHandler.

One ``handler.step`` on CartPole shapes (a ``[B, 4]`` float32 observation
view of a sample tree, a 64x64 tanh actor-critic, a categorical action,
``log_prob`` and ``value`` written back), B = 8 and 64 envs, one thread per
library, interleaved repeats. ``jax_call_us`` is the bare jitted policy call
on the same observation (the dispatch XLA costs), so ``jax_step_us -
jax_call_us`` is the handler's own work: the input conversion, the one
device-to-host fetch and the writes into the slots.

Last line: one JSON object with ``torch_step_us_{B}``, ``jax_step_us_{B}``,
``jax_call_us_{B}`` and ``jax_vs_torch_{B}`` (JAX step time / torch's).

JAX's CPU backend is set up as the JAX examples set it
(``configure_cpu_backend``: compiled calls on the calling thread), with
one XLA thread. Usage: ``python benchmarks/handler_step.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import gymnasium as gym  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # this checkout's parllel, not another
from _common import median_time, pin_threads, print_result, ratio  # noqa: E402

from parllel import fields  # noqa: E402
from parllel.jax import JaxHandler  # noqa: E402
from parllel.jax.agents import build_actor_critic_agent  # noqa: E402
from parllel.jax.cpu_backend import configure_cpu_backend  # noqa: E402
from parllel.torch import TorchHandler  # noqa: E402
from parllel.torch.agents import ActorCriticAgent  # noqa: E402
from parllel.torch.models import build_actor_critic  # noqa: E402
from parllel.tree import buffer_from_example  # noqa: E402

OBSERVATION = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
ACTION = gym.spaces.Discrete(2)


def measure(handler: object, n_envs: int, repeats: int, number: int) -> float:
    """Median µs of one handler step on a sample tree's slots."""
    example = handler.example_outputs(np.zeros(4, np.float32))  # type: ignore[attr-defined]
    tree = buffer_from_example(
        {
            fields.OBSERVATION: np.zeros(4, np.float32),
            fields.ACTION: example.action,
            fields.AGENT_INFO: example.agent_info,
        },
        (2, n_envs),
    )
    rng = np.random.default_rng(0)
    tree[fields.OBSERVATION][0] = rng.normal(size=(n_envs, 4)).astype(np.float32)
    observation = tree[fields.OBSERVATION].to_ndarray()[0]
    action = tree[fields.ACTION].to_ndarray()[0]
    info = {k: v.to_ndarray()[0] for k, v in tree[fields.AGENT_INFO].items()}

    def step() -> None:
        handler.step(  # type: ignore[attr-defined]
            observation, None, None, out_action=action, out_agent_info=info
        )

    for _ in range(20):
        step()
    seconds = median_time(step, repeats, number)
    tree.close()
    return seconds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few repeats")
    args = parser.parse_args()
    pin_threads()
    configure_cpu_backend(threads=1)  # before the first JAX computation
    repeats, number = (3, 20) if args.quick else (15, 500)
    result: dict[str, float | None] = {}
    for n_envs in (8, 64):
        torch.manual_seed(0)
        model, distribution = build_actor_critic(OBSERVATION, ACTION)
        torch_handler = TorchHandler(ActorCriticAgent(model, distribution), n_envs)
        agent = build_actor_critic_agent(OBSERVATION, ACTION, seed=0)
        jax_handler = JaxHandler(agent, n_envs, seed=0)
        observation = np.zeros((n_envs, 4), np.float32)
        call = jax_handler._sample  # the bare jitted policy call
        key = jax.random.key(0)

        def bare_call(call=call, params=agent.params, obs=observation, key=key) -> None:
            jax.block_until_ready(call(params, obs, key))

        torch_us, jax_us, call_us = [], [], []
        for _ in range(3):  # interleaved
            torch_us.append(measure(torch_handler, n_envs, repeats, number))
            jax_us.append(measure(jax_handler, n_envs, repeats, number))
            call_us.append(median_time(bare_call, repeats, number) * 1e6)
        result[f"torch_step_us_{n_envs}"] = round(float(np.median(torch_us)), 1)
        result[f"jax_step_us_{n_envs}"] = round(float(np.median(jax_us)), 1)
        result[f"jax_call_us_{n_envs}"] = round(float(np.median(call_us)), 1)
        result[f"jax_vs_torch_{n_envs}"] = ratio(
            result[f"jax_step_us_{n_envs}"], result[f"torch_step_us_{n_envs}"]
        )
    print_result(result)


if __name__ == "__main__":
    main()
