"""Sampler builders for the background-sampler tests (run in the background process)."""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import nn

from parllel import fields
from parllel.agents import AgentStep, NumpyHandler, RandomAgent
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.samplers import FeedForwardSampler
from parllel.torch import TorchHandler
from parllel.transforms import EstimateAdvantage, NormalizeObservations
from tests.helpers.envs import CountingEnv

T, N_ENVS = 6, 3
ENV_KWARGS = {"min_length": 2, "max_length": 9, "terminal": False}


def build_random_sampler(seed: int, process: bool = False, **env_kwargs):
    """CountingEnvs (truncating), a RandomAgent, decorrelation: a FeedForwardSampler."""
    kwargs = {**ENV_KWARGS, **env_kwargs}
    if process:
        cage = ProcessCage(
            CountingEnv,
            N_ENVS,
            kwargs,
            layout=ProcessLayout(n_workers=1),
            options=CageOptions(seed=seed),
        )
    else:
        cage = SerialCage(CountingEnv, N_ENVS, kwargs, options=CageOptions(seed=seed))
    handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=seed), N_ENVS)
    tree = build_sample_tree(cage, handler, T, previous=True)
    return FeedForwardSampler(cage, handler, tree, decorrelation_steps=4, seed=seed)


class LinearAgent:
    """Deterministic torch agent: action = argmax of a linear layer; value = its first output."""

    def __init__(self) -> None:
        self.model = nn.Linear(4, 5)

    def initial_state(self, n_envs):
        return None

    def _out(self, observation):
        # one row at a time: torch may pick another matmul kernel for another
        # batch size, which changes the last bit on some CPUs, and the tests
        # compare samplers that split the envs differently bit for bit
        return torch.cat([self.model(row) for row in (observation / 10).split(1)])

    def step(self, observation, prev_action, prev_reward, state):
        out = self._out(observation)
        return AgentStep(out.argmax(-1), {"value": out[:, 0]})

    def value(self, observation, prev_action, prev_reward, state):
        return self._out(observation)[:, 0]

    def set_mode(self, mode):
        pass


def make_linear_handler(seed: int) -> TorchHandler:
    torch.manual_seed(seed)
    return TorchHandler(LinearAgent(), N_ENVS)


def snapshot(tree) -> dict[str, np.ndarray]:
    """Every leaf with its padding; final observations only where an episode ended."""
    done = tree[fields.DONE].to_ndarray()
    out = {}
    for path, leaf in tree.items_flat():
        if path.startswith(fields.FINAL_OBSERVATION):
            out[path] = leaf.to_ndarray()[done].copy()  # other rows are unspecified
        else:
            out[path] = leaf.padded_ndarray().copy()
    return out


def learner_update(handler: TorchHandler, batch_index: int) -> None:
    """A deterministic stand-in for an optimizer step."""
    with torch.no_grad():
        for k, param in enumerate(handler.agent.model.parameters()):
            param.add_(
                torch.sin(torch.arange(param.numel()).view_as(param) + batch_index + k)
            )


def build_torch_sampler(seed: int, weights=None, normalize: bool = False):
    """CountingEnvs, the LinearAgent (following ``weights`` if given), GAE;
    with ``normalize``, an observation normalizer with running statistics."""
    cage = SerialCage(CountingEnv, N_ENVS, ENV_KWARGS, options=CageOptions(seed=seed))
    handler = make_linear_handler(seed)
    if weights is not None:
        handler.follow_weights(weights)
    tree = build_sample_tree(cage, handler, T)
    gae = EstimateAdvantage(tree, 0.99, 0.95)
    normalizer = NormalizeObservations(tree) if normalize else None
    return FeedForwardSampler(
        cage,
        handler,
        tree,
        transform=gae,
        observation_normalizer=normalizer,
        seed=seed,
    )


def build_failing_sampler(seed: int):
    """A sampler whose envs raise at their 20th step (the third batch)."""
    return build_random_sampler(seed, fail_at_step=20)


def build_raising(seed: int):
    raise ValueError(f"cannot build sampler {seed}")


def build_worker_pid_sampler(seed: int, pids):
    """A process-cage sampler that reports its worker pids and its own pid."""
    sampler = build_random_sampler(seed, process=True)
    for cage in sampler.cages:
        for pid in cage.worker_pids:
            pids.put(pid)
    pids.put(os.getpid())
    return sampler


def build_normalizing_sampler(seed: int, weights=None):
    """:func:`build_torch_sampler` with an observation normalizer."""
    return build_torch_sampler(seed, weights, normalize=True)


def build_tree_then_follow(seed: int, weights):
    """A mistake: the sample tree is built before the handler follows the
    weights, so it has no ``agent_info.policy_version``."""
    cage = SerialCage(CountingEnv, N_ENVS, ENV_KWARGS, options=CageOptions(seed=seed))
    handler = make_linear_handler(seed)
    tree = build_sample_tree(cage, handler, T)
    handler.follow_weights(weights)
    return FeedForwardSampler(cage, handler, tree, seed=seed)


class ThreadCountAgent(LinearAgent):
    """LinearAgent whose agent info records the process's torch thread count."""

    def step(self, observation, prev_action, prev_reward, state):
        step = super().step(observation, prev_action, prev_reward, state)
        threads = torch.full((len(observation),), torch.get_num_threads())
        return AgentStep(step.action, {**step.agent_info, "threads": threads})


def build_thread_count_sampler(seed: int):
    """CountingEnvs and the :class:`ThreadCountAgent`: a FeedForwardSampler."""
    cage = SerialCage(CountingEnv, N_ENVS, ENV_KWARGS, options=CageOptions(seed=seed))
    torch.manual_seed(seed)
    handler = TorchHandler(ThreadCountAgent(), N_ENVS)
    tree = build_sample_tree(cage, handler, T)
    return FeedForwardSampler(cage, handler, tree, seed=seed)
