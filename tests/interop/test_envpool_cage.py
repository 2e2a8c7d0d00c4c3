"""EnvPoolCage: EnvPool's batched envs as a cage equal EnvPool stepped directly.

The reference steps an EnvPool built with the same task, settings and seeds
directly, in EnvPool's own ``NEXT_STEP`` autoreset: after a step that ends
an episode, that env's next ``step`` is its reset (the action is ignored,
reward 0), so the reference feeds each env its own sequence of actions and
a dummy action at its reset steps. The cage must give, step for step and env
for env, the same observations, rewards, terminated and truncated flags and
env infos, the episode's last observation in ``final_observation`` and the
reset observation in the next observation slot, with no step lost to resets.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

envpool = pytest.importorskip("envpool")

from parllel import fields  # noqa: E402
from parllel.agents import NumpyHandler, RandomAgent, ScriptedAgent  # noqa: E402
from parllel.builders import build_sample_tree  # noqa: E402
from parllel.cages import CageOptions, TrajInfo  # noqa: E402
from parllel.cages.env_info import numeric_info_example  # noqa: E402
from parllel.interop import make_envpool_cage  # noqa: E402
from parllel.samplers import FeedForwardSampler  # noqa: E402
from parllel.seeding import Seeds  # noqa: E402
from parllel.tree import buffer_from_example  # noqa: E402
from tests.helpers.cage_helpers import allocate, slots  # noqa: E402
from tests.helpers.envpool_reference import (  # noqa: E402
    assert_episodes_match,
    direct_steps,
    random_actions,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TASKS = {
    "cartpole": ("CartPole-v1", {"max_episode_steps": 15}, 60),
    "pong": ("Pong-v5", {"max_episode_steps": 12, "num_threads": 2}, 30),
    # a lost life ends an episode but not the game (EnvPool's autoreset goes
    # on with the next life, where a forced reset would restart the game)
    "breakout_episodic_life": (
        "Breakout-v5",
        {"episodic_life": True, "max_episode_steps": 40, "num_threads": 2},
        60,
    ),
    "halfcheetah": ("HalfCheetah-v4", {"max_episode_steps": 10}, 25),
    # dm_control: Dict observations
    "cheetah_run": ("CheetahRun-v1", {"max_episode_steps": 10}, 25),
    "hopper": ("Hopper-v4", {"max_episode_steps": 40}, 60),
}
N, MASTER = 4, 5


def assert_equal_to_direct(tree: dict, trajs: list, expected: dict) -> None:
    """The cage's slots (``tree``: arrays by path) equal the direct run's."""
    T = expected["reward"].shape[0]
    for suffix, observations in expected["observation"].items():
        assert observations.shape[0] == T + 1
        np.testing.assert_array_equal(tree[f"observation{suffix}"], observations)
    reward_dtype = tree["reward"].dtype
    np.testing.assert_array_equal(
        tree["reward"], expected["reward"].astype(reward_dtype)
    )
    np.testing.assert_array_equal(tree["terminated"], expected["terminated"])
    np.testing.assert_array_equal(tree["truncated"], expected["truncated"])
    for (t, i), final in expected["final"].items():
        for suffix, row in final.items():
            np.testing.assert_array_equal(tree[f"final_observation{suffix}"][t, i], row)
    for i, env_infos in enumerate(expected["infos"]):
        for t, info in enumerate(env_infos):
            for key, value in info.items():
                if key == "env_id":
                    assert f"env_info.{key}" not in tree
                    continue
                np.testing.assert_array_equal(
                    tree[f"env_info.{key}"][t, i], np.asarray(value, np.float64)
                )
    assert_episodes_match(trajs, expected)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_stepping_the_cage_equals_stepping_envpool(name):
    task, kwargs, T = TASKS[name]
    with make_envpool_cage(task, N, options=CageOptions(seed=MASTER), **kwargs) as cage:
        assert cage.env_seeds == Seeds.from_master(MASTER, N).envs
        actions = random_actions(cage.spaces.action, T, N)
        tree = allocate(cage, T, storage="local")
        tree.action[:] = actions
        cage.reset(tree.observation[0])
        trajs = []
        for t in range(T):
            trajs += cage.step(tree.action[t], slots(tree, t))
        got = {path: np.array(leaf) for path, leaf in tree.items_flat()}
        # the observation's rows 0..T (T: the padding row after the last step)
        for path, leaf in tree.items_flat():
            if path.startswith("observation"):
                got[path] = np.array(leaf.padded_ndarray()[1 : T + 2])
        tree.close()
    expected = direct_steps(task, kwargs, cage.env_seeds, actions)
    assert expected["truncated"].any()  # the cases the test is about happen
    if name in ("cartpole", "breakout_episodic_life"):
        assert expected["terminated"].any()
    assert_equal_to_direct(got, trajs, expected)


def test_feedforward_sampler_batches_equal_stepping_envpool():
    """Two batches of a sampler (a batch boundary, episode ends inside both)."""
    task, kwargs, _ = TASKS["cartpole"]
    T, n_batches = 20, 2
    with make_envpool_cage(task, N, options=CageOptions(seed=MASTER), **kwargs) as cage:
        actions = random_actions(cage.spaces.action, T * n_batches, N)
        step = [0]  # the next row of actions

        def policy(obs, prev_action, prev_reward):
            step[0] += 1
            return actions[step[0] - 1, : len(obs)]

        handler = NumpyHandler(ScriptedAgent(policy), N)
        with build_sample_tree(
            cage, handler, T, storage="local", final_observation=True
        ) as tree:
            step[0] = 0  # the tree's example step used a row
            sampler = FeedForwardSampler(cage, handler, tree)
            batches, trajs = [], []
            for _ in range(n_batches):
                batch, completed = sampler.collect_batch()
                arrays = {path: np.array(leaf) for path, leaf in batch.items_flat()}
                # rows 0..T (T: the bootstrap row, in the padding)
                arrays["observation"] = np.array(
                    batch.observation.padded_ndarray()[1 : T + 2]
                )
                batches.append(arrays)
                trajs += completed
    expected = direct_steps(task, kwargs, cage.env_seeds, actions)
    got = {
        key: np.concatenate([b[key][:T] for b in batches])
        for key in ("reward", "terminated", "truncated", "final_observation")
    }
    got["observation"] = np.concatenate(
        [batches[0]["observation"][:T], batches[1]["observation"][: T + 1]]
    )
    assert expected["terminated"].any() and expected["truncated"].any()
    np.testing.assert_array_equal(got["observation"], expected["observation"][""])
    np.testing.assert_array_equal(got["reward"], expected["reward"])
    np.testing.assert_array_equal(got["terminated"], expected["terminated"])
    np.testing.assert_array_equal(got["truncated"], expected["truncated"])
    for (t, i), final in expected["final"].items():
        np.testing.assert_array_equal(got["final_observation"][t, i], final[""])
    assert_episodes_match(trajs, expected)


def test_random_agent_sampler_on_pong_fills_info_slots_and_int32_actions():
    with make_envpool_cage(
        "Pong-v5", 2, options=CageOptions(seed=0), num_threads=2
    ) as cage:
        assert cage.spaces.action == gym.spaces.Discrete(6, dtype=np.int32)
        assert cage.example[fields.OBSERVATION].shape == (4, 84, 84)
        assert set(cage.example[fields.ENV_INFO]) == {
            "lives", "reward", "terminated", "ram", "elapsed_step",
        }  # fmt: skip
        handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), 2)
        with build_sample_tree(cage, handler, 8, storage="local") as tree:
            batch, _ = FeedForwardSampler(cage, handler, tree).collect_batch()
            assert batch.action.dtype == np.int32
            assert batch.env_info.ram.shape == (8, 2, 128)
            np.testing.assert_array_equal(
                batch.env_info.elapsed_step[:, 0], np.arange(1, 9)
            )


def test_ppo_smoke_run_on_envpool_cartpole():
    torch = pytest.importorskip("torch")
    from parllel.torch import TorchHandler
    from parllel.torch.agents import ActorCriticAgent
    from parllel.torch.algos import PPO, ActorCriticEvaluator
    from parllel.torch.models import build_actor_critic
    from parllel.transforms import EstimateAdvantage

    torch.manual_seed(0)
    with make_envpool_cage("CartPole-v1", 8, options=CageOptions(seed=0)) as cage:
        model, distribution = build_actor_critic(
            cage.spaces.observation, cage.spaces.action, hidden_sizes=(16,)
        )
        agent = ActorCriticAgent(model, distribution)
        handler = TorchHandler(agent, 8, seed=0)
        with build_sample_tree(cage, handler, 32) as tree:
            gae = EstimateAdvantage(tree, 0.99, 0.95)
            sampler = FeedForwardSampler(cage, handler, tree, transform=gae)
            ppo = PPO(
                ActorCriticEvaluator(model, distribution),
                torch.optim.Adam(model.parameters(), lr=1e-3),
                epochs=1,
                minibatches=2,
            )
            episodes = []
            for _ in range(3):
                batch, completed = sampler.collect_batch()
                episodes += completed
                metrics = ppo.optimize(batch)
            assert np.isfinite(metrics["policy_loss"])
            assert episodes and all(e.length >= 1 for e in episodes)


# -- infos and episode statistics ---------------------------------------------------


class StepRecordingTrajInfo(TrajInfo):
    """Records every step's arguments (the cage then calls it env by env)."""

    def step(self, observation, action, reward, terminated, truncated, env_info):
        self.extra.setdefault("steps", []).append(
            (np.array(observation), int(action), float(reward), dict(env_info))
        )
        super().step(observation, action, reward, terminated, truncated, env_info)


def test_declared_info_dtypes_kept_infos_and_custom_traj_infos():
    T, kwargs = 9, {"max_episode_steps": 4, "num_threads": 2}
    with make_envpool_cage(
        "Pong-v5",
        2,
        options=CageOptions(
            seed=MASTER, keep_infos=True, traj_info_type=StepRecordingTrajInfo
        ),
        **kwargs,
    ) as cage:
        info_example = numeric_info_example(
            cage.example[fields.ENV_INFO], dtypes={"ram": np.uint8, "lives": np.int8}
        )
        actions = random_actions(cage.spaces.action, T, 2)
        tree = allocate(cage, T, storage="local")
        tree["env_info"].close()
        tree["env_info"] = buffer_from_example(info_example, (T, 2), "local")
        tree.action[:] = actions
        cage.reset(tree.observation[0])
        assert sorted(cage.last_infos.reset) == [0, 1]
        trajs, kept = [], []
        for t in range(T):
            trajs += cage.step(tree.action[t], slots(tree, t))
            kept.append(cage.last_infos)
        ram = np.array(tree.env_info.ram)
        final = np.array(tree.final_observation)
        tree.close()
    expected = direct_steps("Pong-v5", kwargs, cage.env_seeds, actions)
    assert ram.dtype == np.uint8
    for i in range(2):
        for t in range(T):
            info = expected["infos"][i][t]
            np.testing.assert_array_equal(ram[t, i], info["ram"])
            step_info = kept[t].step[i]
            assert set(step_info) == {
                "lives", "reward", "terminated", "ram", "elapsed_step",
            }  # fmt: skip
            assert step_info["elapsed_step"] == info["elapsed_step"]
    # episodes end at steps 4 and 8: their reset infos are kept, with the step's
    assert sorted(kept[3].reset) == [0, 1] and kept[4].reset == {}
    assert [t.length for t in trajs] == [4, 4, 4, 4]
    for k, traj in enumerate(trajs):
        steps = traj.extra["steps"]
        assert len(steps) == 4
        # the last step's observation is the final observation
        end = 3 if k < 2 else 7
        np.testing.assert_array_equal(steps[-1][0], final[end, traj.env_index])
        assert [s[1] for s in steps] == actions[
            end - 3 : end + 1, traj.env_index
        ].tolist()
        assert steps[-1][3]["elapsed_step"] == 4
        assert traj.reset_info["elapsed_step"] == 0


def test_without_info_slots_the_last_info_reaches_traj_info_extra():
    with make_envpool_cage(
        "CartPole-v1", 2, options=CageOptions(seed=0), max_episode_steps=3
    ) as cage:
        tree = allocate(cage, 3, storage="local")
        cage.reset(tree.observation[0])
        trajs = []
        for t in range(3):
            step_slots = slots(tree, t)
            del step_slots[fields.ENV_INFO]
            trajs += cage.step(tree.action[t], step_slots)
        tree.close()
    assert [t.extra for t in trajs] == [{"elapsed_step": 3}] * 2
