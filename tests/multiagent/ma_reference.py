"""Plain reference loops over the toy envs, and helpers to run a sampler over them.

The reference steps the raw PettingZoo env (no adapter) with the same
scripted policy and writes down, step by step, what every sample-tree field
must hold; tests compare a sampler's batches with it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from parllel import fields
from parllel.agents import NumpyHandler, ScriptedAgent
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.multiagent import (
    MultiAgentTrajInfo,
    make_aec_env_factory,
    make_parallel_env_factory,
)
from parllel.samplers import FeedForwardSampler, sample_tree_from_examples
from tests.helpers.ma_envs import AGENTS, N_ACTIONS

A = len(AGENTS)


def scripted_actions(observation, prev_action=None, prev_reward=None):
    """``[N, A]`` actions from stacked observations: the first legal action at
    or after ``(t + agent + episode) % N_ACTIONS``."""
    is_dict = isinstance(observation, Mapping)
    vector = np.asarray(observation["observation"] if is_dict else observation)
    base = (vector[..., 2] + vector[..., 3] + vector[..., 1]).astype(
        np.int64
    ) % N_ACTIONS
    if not is_dict:
        return base
    mask = np.asarray(observation["action_mask"]).astype(bool)
    shifts = (base[..., None] + np.arange(N_ACTIONS)) % N_ACTIONS  # [N, A, n]
    legal = np.take_along_axis(mask, shifts, -1)
    first = np.where(legal.any(-1), legal.argmax(-1), 0)
    return np.take_along_axis(shifts, first[..., None], -1)[..., 0]


class Stacked:
    """The stacked observation of the reference: kept rows, masks of actors."""

    def __init__(self, dict_obs: bool) -> None:
        self.dict_obs = dict_obs
        self.vector = np.zeros((A, 5), np.float32)
        self.mask = np.zeros((A, N_ACTIONS), np.int8)

    def write(self, agent, observation) -> None:
        i = AGENTS.index(agent)
        if isinstance(observation, dict):
            self.vector[i] = observation["observation"]
            self.mask[i] = observation["action_mask"]
        else:
            self.vector[i] = observation

    def value(self, may_act) -> object:
        """The observation, with the masks of agents not in ``may_act`` zeroed."""
        if not self.dict_obs:
            return self.vector.copy()
        mask = self.mask.copy()
        for i, agent in enumerate(AGENTS):
            if agent not in may_act:
                mask[i] = 0
        return {"observation": self.vector.copy(), "action_mask": mask}


def new_row(observation):
    return {
        "observation": observation,
        fields.AGENT_REWARD: np.zeros(A, np.float32),
        fields.AGENT_TERMINATED: np.zeros(A, bool),
        fields.AGENT_TRUNCATED: np.zeros(A, bool),
        fields.AGENT_MASK: np.zeros(A, bool),
        "final_observation": None,
    }


def parallel_reference(env, seed, n_steps, dict_obs):
    """Rows of one env column; the last row holds only the next observation."""
    stacked = Stacked(dict_obs)
    observations, _ = env.reset(seed=seed)
    for agent, observation in observations.items():
        stacked.write(agent, observation)
    rows, episodes, truncated_any = [], [], False
    returns = np.zeros(A)
    for _ in range(n_steps):
        row = new_row(stacked.value(env.agents))
        actions = scripted_actions(
            {k: v[None] for k, v in row["observation"].items()}
            if dict_obs
            else row["observation"][None]
        )[0]
        row["action"] = actions
        acting = list(env.agents)
        out, rewards, terms, truncs, _ = env.step(
            {agent: actions[AGENTS.index(agent)] for agent in acting}
        )
        for agent in acting:
            i = AGENTS.index(agent)
            row[fields.AGENT_MASK][i] = True
            row[fields.AGENT_REWARD][i] = rewards[agent]
            row[fields.AGENT_TERMINATED][i] = terms[agent]
            row[fields.AGENT_TRUNCATED][i] = truncs[agent]
            truncated_any |= bool(truncs[agent])
        returns += row[fields.AGENT_REWARD]
        for agent, observation in out.items():
            stacked.write(agent, observation)
        row["reward"] = np.float32(sum(rewards.values()))
        over = not env.agents
        row["terminated"], row["truncated"] = (
            over and not truncated_any,
            over and truncated_any,
        )
        if over:
            row["final_observation"] = stacked.value(env.agents)
            episodes.append(returns.copy())
            returns[:], truncated_any = 0.0, False
            stacked = Stacked(dict_obs)
            observations, _ = env.reset()
            for agent, observation in observations.items():
                stacked.write(agent, observation)
        rows.append(row)
    rows.append(new_row(stacked.value(env.agents)))
    return rows, episodes


def make_cage(kind, factory, n_envs, seed):
    options = CageOptions(seed=seed, traj_info_type=MultiAgentTrajInfo)
    if kind == "serial":
        return SerialCage(factory, n_envs, options=options)
    return ProcessCage(
        factory,
        n_envs,
        layout=ProcessLayout(n_workers=2),
        options=options,
        start_method="fork",
    )


def run_sampler(kind, factory, n_envs, batch_T, n_batches, seed=7, policy=None):
    """(copies of each batch's fields by path, completed TrajInfos, env seeds).

    Observation leaves hold rows ``0 .. T`` (the next batch's first included).
    """
    cage = make_cage(kind, factory, n_envs, seed)
    try:
        handler = NumpyHandler(ScriptedAgent(policy or scripted_actions), n_envs)
        example = handler.example_outputs(cage.example[fields.OBSERVATION])
        tree = sample_tree_from_examples(cage.example, example, batch_T, n_envs)
        with tree:
            sampler = FeedForwardSampler(cage, handler, tree)
            batches, completed = [], []
            for _ in range(n_batches):
                batch, traj_infos = sampler.collect_batch()
                batches.append(
                    {
                        path: np.array(
                            leaf.padded_ndarray()[1:]
                            if path.split(".")[0] == fields.OBSERVATION
                            else leaf.to_ndarray()
                        )
                        for path, leaf in batch.items_flat()
                    }
                )
                completed += traj_infos
        return batches, completed, list(cage.env_seeds)
    finally:
        cage.close()


def parallel_factory(**kwargs):
    from tests.helpers.ma_envs import DropoutParallelEnv

    return make_parallel_env_factory(DropoutParallelEnv, **kwargs)


def aec_factory(**kwargs):
    from tests.helpers.ma_envs import TurnAECEnv

    return make_aec_env_factory(TurnAECEnv, **kwargs)


__all__ = [
    "A",
    "aec_factory",
    "parallel_factory",
    "parallel_reference",
    "run_sampler",
    "scripted_actions",
]
