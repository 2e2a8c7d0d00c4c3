"""AECEnvAdapter in cages: one mover per step, rewards of the dead steps, tic-tac-toe."""

from __future__ import annotations

import numpy as np
import pytest

from parllel import fields
from parllel.multiagent import make_aec_env_factory
from parllel.multiagent.aec_env import AECEnvAdapter
from tests.helpers.ma_envs import AGENTS, TurnAECEnv, agent_reward, ends_terminated
from tests.multiagent.ma_reference import (
    A,
    Stacked,
    aec_factory,
    new_row,
    run_sampler,
    scripted_actions,
)

T, B, N_BATCHES = 6, 3, 4
AGENT_KEYS = (
    fields.AGENT_REWARD,
    fields.AGENT_TERMINATED,
    fields.AGENT_TRUNCATED,
    fields.AGENT_MASK,
)


def observe_alive(env, stacked):
    for agent in env.agents:
        stacked.write(agent, env.observe(agent))


def aec_reference(env, seed, n_steps):
    """Rows of one env column, the rewards computed from the toy's rules."""
    env.reset(seed=seed)
    stacked = Stacked(dict_obs=True)
    observe_alive(env, stacked)
    rows, episodes, returns, truncated_any = [], [], np.zeros(A), False
    for _ in range(n_steps):
        mover = env.agent_selection
        i = AGENTS.index(mover)
        row = new_row(stacked.value([mover]))
        observation = {k: v[None] for k, v in row["observation"].items()}
        row["action"] = actions = scripted_actions(observation)[0]
        t, action = env.t, int(actions[i])
        rewards = np.zeros(A)
        for j, agent in enumerate(AGENTS):
            if agent in env.agents and agent != mover:
                rewards[j] = 0.001 * (i + 1)  # a reward while another moves
        rewards[i] = agent_reward(action, t, i)
        env.step(actions[i])
        row[fields.AGENT_MASK][i] = True
        if env.terminations[mover] or env.truncations[mover]:
            terminal = ends_terminated(i, env.episode)
            row[fields.AGENT_TERMINATED][i] = terminal
            row[fields.AGENT_TRUNCATED][i] = not terminal
            truncated_any |= not terminal
            stacked.write(mover, env.observe(mover))  # its final observation
            env.step(None)  # the dead step: 0.0001 to every agent left
            for j, agent in enumerate(AGENTS):
                if agent in env.agents:
                    rewards[j] += 0.0001
        row[fields.AGENT_REWARD] = rewards.astype(np.float32)
        returns += row[fields.AGENT_REWARD]
        row["reward"] = np.float32(rewards.sum())
        observe_alive(env, stacked)
        over = not env.agents
        row["terminated"], row["truncated"] = (
            over and not truncated_any,
            over and truncated_any,
        )
        if over:
            row["final_observation"] = stacked.value([])
            episodes.append(returns.copy())
            returns[:], truncated_any = 0.0, False
            env.reset()
            stacked = Stacked(dict_obs=True)
            observe_alive(env, stacked)
        rows.append(row)
    rows.append(new_row(stacked.value([env.agent_selection])))
    return rows, episodes


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["serial", "process"])
def test_turns_and_dead_step_rewards_line_up_with_a_plain_loop(kind):
    batches, completed, seeds = run_sampler(kind, aec_factory(), B, T, N_BATCHES)
    for b in range(B):
        rows, episodes = aec_reference(TurnAECEnv(), seeds[b], N_BATCHES * T)
        for k, batch in enumerate(batches):
            for t in range(T + 1):
                row, where = rows[k * T + t], f"batch {k}, t {t}, env {b}"
                for leaf in ("observation", "action_mask"):
                    np.testing.assert_array_equal(
                        batch[f"{fields.OBSERVATION}.{leaf}"][t, b],
                        row["observation"][leaf],
                        where,
                    )
                if t == T:
                    continue
                np.testing.assert_array_equal(batch[fields.ACTION][t, b], row["action"])
                assert batch[fields.REWARD][t, b] == row["reward"], where
                for key in (fields.TERMINATED, fields.TRUNCATED):
                    assert batch[key][t, b] == row[key], (where, key)
                for key in AGENT_KEYS:
                    np.testing.assert_array_equal(
                        batch[f"{fields.ENV_INFO}.{key}"][t, b], row[key], (where, key)
                    )
        mine = [traj for traj in completed if traj.env_index == b]
        assert len(mine) == len(episodes) > 0
        for traj, returns in zip(mine, episodes):
            np.testing.assert_allclose(traj.agent_returns, returns, rtol=1e-12)
            assert traj.agent_lengths.sum() == traj.length
    masks = np.concatenate(
        [b[f"{fields.ENV_INFO}.{fields.AGENT_MASK}"] for b in batches]
    )
    assert (masks.sum(-1) == 1).all()  # exactly one mover per step


def random_legal(seed):
    rng = np.random.default_rng(seed)

    def policy(observation, prev_action, prev_reward):
        mask = np.asarray(observation["action_mask"]).astype(bool)  # [N, A, 9]
        scores = rng.random(mask.shape) + mask  # legal moves score above 1
        return np.where(mask.any(-1), scores.argmax(-1), 0).astype(np.int64)

    return policy


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["serial", "process"])
def test_tictactoe_random_legal_play(kind):
    pytest.importorskip("pettingzoo")
    from pettingzoo.classic import tictactoe_v3

    factory = make_aec_env_factory(tictactoe_v3.env)
    batch_T, n_envs = 20, 4
    batches, completed, _ = run_sampler(
        kind, factory, n_envs, batch_T, 3, policy=random_legal(3)
    )
    wins = 0
    for batch in batches:
        mask = batch[f"{fields.OBSERVATION}.action_mask"].astype(bool)  # [T+1, B, 2, 9]
        acted = batch[f"{fields.ENV_INFO}.{fields.AGENT_MASK}"]
        reward = batch[f"{fields.ENV_INFO}.{fields.AGENT_REWARD}"]
        action = batch[fields.ACTION]
        assert (acted.sum(-1) == 1).all()  # only the agent to move acts
        # the mover has legal moves, everybody else an all-zero mask
        np.testing.assert_array_equal(mask[:-1].any(-1), acted)
        for t, b in zip(*np.nonzero(~batch[fields.DONE])):
            assert mask[t + 1, b].any(-1).sum() == 1
        for t, b in np.ndindex(batch_T, n_envs):
            mover = int(np.argmax(acted[t, b]))
            assert mask[t, b, mover, action[t, b, mover]]  # a legal move
            if reward[t, b].any():  # a win: the loser's -1 lands at the winning move
                wins += 1
                assert reward[t, b, mover] == 1 and reward[t, b, 1 - mover] == -1
                assert batch[fields.TERMINATED][t, b]
    assert wins > 0
    assert len(completed) >= 4
    for traj in completed:
        # no illegal-move termination: that would give (-1, 0)
        assert tuple(traj.agent_returns) in {(1.0, -1.0), (-1.0, 1.0), (0.0, 0.0)}
        assert traj.terminated and not traj.truncated
        assert traj.agent_lengths[0] - traj.agent_lengths[1] in (0, 1)
        assert traj.agent_lengths.sum() == traj.length >= 5


def test_tictactoe_adapter_spaces_and_masks():
    pytest.importorskip("pettingzoo")
    from pettingzoo.classic import tictactoe_v3

    env = AECEnvAdapter(tictactoe_v3.env())
    assert env.possible_agents == ("player_1", "player_2")
    assert env.observation_space["observation"].shape == (2, 3, 3, 2)
    assert env.observation_space["action_mask"].dtype == np.int8
    observation, info = env.reset(seed=0)
    assert info == {}
    np.testing.assert_array_equal(observation["action_mask"].sum(-1), [9, 0])
    # player_1 wins along the top row; player_2 plays the middle row
    for move in (0, 3, 1, 4):
        observation, reward, *_ = env.step({env.env.agent_selection: move})
        assert reward == 0
    observation, reward, terminated, truncated, info = env.step(np.array([2, 0]))
    assert terminated and not truncated and reward == 0.0
    np.testing.assert_array_equal(info[fields.AGENT_REWARD], [1, -1])
    np.testing.assert_array_equal(info[fields.AGENT_MASK], [True, False])
    np.testing.assert_array_equal(info[fields.AGENT_TERMINATED], [True, True])
    assert not observation["action_mask"].any()
    # each player's final view of the board: its own marks in plane 0
    assert observation["observation"][0, 0, :, 0].all()
    assert observation["observation"][1, 0, :, 1].all()
