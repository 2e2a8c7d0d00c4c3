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

import sys

import gymnasium as gym
import numpy as np
import pytest

envpool = pytest.importorskip("envpool")

from parllel import fields  # noqa: E402
from parllel.agents import NumpyHandler, RandomAgent, ScriptedAgent  # noqa: E402
from parllel.cages import TrajInfo, numeric_info_example  # noqa: E402
from parllel.errors import (  # noqa: E402
    CageStateError,
    ConfigError,
    MissingDependencyError,
    UnsupportedVectorEnvError,
)
from parllel.interop import EnvPoolCage, make_envpool_cage  # noqa: E402
from parllel.patterns import build_sample_tree  # noqa: E402
from parllel.samplers import FeedForwardSampler  # noqa: E402
from parllel.seeding import Seeds  # noqa: E402
from parllel.tree import buffer_from_example  # noqa: E402
from tests.helpers.cage_helpers import allocate, slots  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: (task, EnvPool settings, steps): short episode limits force truncations
TASKS = {
    "cartpole": ("CartPole-v1", {"max_episode_steps": 15}, 60),
    "pong": ("Pong-v5", {"max_episode_steps": 12, "num_threads": 2}, 30),
    "halfcheetah": ("HalfCheetah-v4", {"max_episode_steps": 10}, 25),
    "hopper": ("Hopper-v4", {"max_episode_steps": 40}, 60),
}
N, MASTER = 4, 5


def random_actions(space: gym.Space, T: int, n: int, seed: int = 0) -> np.ndarray:
    """``[T, n]`` random actions of ``space`` (in its dtype)."""
    space.seed(seed)
    return np.stack([np.stack([space.sample() for _ in range(n)]) for _ in range(T)])


def direct_steps(task: str, kwargs: dict, seeds, actions: np.ndarray) -> dict:
    """EnvPool stepped directly: each env's first ``T`` transitions.

    Returns arrays ``[T + 1, n]`` of observations (row ``t + 1``: the next
    observation as a parllel cage stores it, the reset observation where the
    episode ended), ``[T, n]`` rewards, flags and infos (routing keys left
    out), and ``final``: ``{(t, env): the episode's last observation}``.
    """
    T, n = actions.shape[:2]
    pool = envpool.make_gymnasium(task, num_envs=n, seed=list(seeds), **kwargs)
    try:
        observation, _ = pool.reset()
        obs = [[observation[i]] for i in range(n)]
        rewards = [[] for _ in range(n)]
        terminated = [[] for _ in range(n)]
        truncated = [[] for _ in range(n)]
        infos = [[] for _ in range(n)]
        final = {}
        taken = np.zeros(n, int)  # actions each env consumed
        resetting = np.zeros(n, bool)  # its next step is EnvPool's reset
        while (taken < T).any() or resetting.any():
            step_actions = np.stack(
                [actions[min(taken[i], T - 1), i] for i in range(n)]
            )
            o, r, te, tr, info = pool.step(step_actions)
            for i in range(n):
                if resetting[i]:  # NEXT_STEP: the action was ignored
                    assert r[i] == 0 and not te[i] and not tr[i]
                    obs[i][-1] = o[i]
                    resetting[i] = False
                    continue
                if taken[i] >= T:
                    continue
                rewards[i].append(r[i])
                terminated[i].append(te[i])
                truncated[i].append(tr[i])
                infos[i].append({k: v[i] for k, v in info.items() if k != "players"})
                obs[i].append(o[i])
                if te[i] or tr[i]:
                    final[(int(taken[i]), i)] = o[i]
                    resetting[i] = True
                taken[i] += 1
    finally:
        pool.close()
    return {
        "observation": np.stack([np.stack(o) for o in obs], axis=1),
        "reward": np.stack([np.stack(r) for r in rewards], axis=1),
        "terminated": np.array(terminated).T,
        "truncated": np.array(truncated).T,
        "infos": infos,
        "final": final,
    }


def episodes_of(expected: dict) -> list[tuple[int, int, float, bool, bool]]:
    """``(env, length, return, terminated, truncated)`` of each finished episode."""
    T, n = expected["reward"].shape
    found = []
    for i in range(n):
        start = 0
        for t in range(T):
            if expected["terminated"][t, i] or expected["truncated"][t, i]:
                rewards = expected["reward"][start : t + 1, i].astype(np.float64)
                found.append(
                    (
                        i,
                        t + 1 - start,
                        float(np.sum(rewards)),
                        bool(expected["terminated"][t, i]),
                        bool(expected["truncated"][t, i]),
                    )
                )
                start = t + 1
    return sorted(found)


def summary(trajs: list[TrajInfo]) -> list[tuple[int, int, float, bool, bool]]:
    return sorted(
        (t.env_index, t.length, t.return_, t.terminated, t.truncated) for t in trajs
    )


def assert_equal_to_direct(tree: dict, trajs: list, expected: dict) -> None:
    """The cage's slots (``tree``: arrays by path) equal the direct run's."""
    T = expected["reward"].shape[0]
    np.testing.assert_array_equal(tree["observation"][: T + 1], expected["observation"])
    reward_dtype = tree["reward"].dtype
    np.testing.assert_array_equal(
        tree["reward"], expected["reward"].astype(reward_dtype)
    )
    np.testing.assert_array_equal(tree["terminated"], expected["terminated"])
    np.testing.assert_array_equal(tree["truncated"], expected["truncated"])
    for (t, i), final in expected["final"].items():
        np.testing.assert_array_equal(tree["final_observation"][t, i], final)
    for i, env_infos in enumerate(expected["infos"]):
        for t, info in enumerate(env_infos):
            for key, value in info.items():
                if key == "env_id":
                    assert f"env_info.{key}" not in tree
                    continue
                np.testing.assert_array_equal(
                    tree[f"env_info.{key}"][t, i], np.asarray(value, np.float64)
                )
    assert summary(trajs) == pytest.approx(episodes_of(expected))


@pytest.mark.parametrize("name", sorted(TASKS))
def test_stepping_the_cage_equals_stepping_envpool(name):
    task, kwargs, T = TASKS[name]
    with make_envpool_cage(task, N, seed=MASTER, **kwargs) as cage:
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
        got["observation"] = np.array(tree.observation.padded_ndarray()[1 : T + 2])
        tree.close()
    expected = direct_steps(task, kwargs, cage.env_seeds, actions)
    assert expected["truncated"].any()  # the cases the test is about happen
    if name == "cartpole":
        assert expected["terminated"].any()
    assert_equal_to_direct(got, trajs, expected)


def test_feedforward_sampler_batches_equal_stepping_envpool():
    """Two batches of a sampler (a batch boundary, episode ends inside both)."""
    task, kwargs, _ = TASKS["cartpole"]
    T, n_batches = 20, 2
    with make_envpool_cage(task, N, seed=MASTER, **kwargs) as cage:
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
    np.testing.assert_array_equal(got["observation"], expected["observation"])
    np.testing.assert_array_equal(got["reward"], expected["reward"])
    np.testing.assert_array_equal(got["terminated"], expected["terminated"])
    np.testing.assert_array_equal(got["truncated"], expected["truncated"])
    for (t, i), final in expected["final"].items():
        np.testing.assert_array_equal(got["final_observation"][t, i], final)
    assert summary(trajs) == pytest.approx(episodes_of(expected))


def test_random_agent_sampler_on_pong_fills_info_slots_and_int32_actions():
    with make_envpool_cage("Pong-v5", 2, seed=0, num_threads=2) as cage:
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
    from parllel.torch.agents import ActorCriticAgent
    from parllel.torch.algos import PPO, ActorCriticEvaluator
    from parllel.torch.handler import TorchHandler
    from parllel.torch.models import build_actor_critic
    from parllel.transforms import EstimateAdvantage

    torch.manual_seed(0)
    with make_envpool_cage("CartPole-v1", 8, seed=0) as cage:
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


# -- seeds ------------------------------------------------------------------------


def test_seeds_are_the_pools_and_a_different_seed_is_refused():
    pool = envpool.make_gymnasium("CartPole-v1", num_envs=3, seed=7)
    with EnvPoolCage(pool) as cage:
        assert cage.env_seeds == (7, 8, 9)  # EnvPool: env i gets seed + i
    seeds = Seeds.from_master(3, 3).envs
    pool = envpool.make_gymnasium("CartPole-v1", num_envs=3, seed=list(seeds))
    with EnvPoolCage(pool, seed=3) as cage:  # the master of the pool's seeds
        assert cage.env_seeds == seeds
    pool = envpool.make_gymnasium("CartPole-v1", num_envs=3, seed=7)
    with pytest.raises(ConfigError, match="EnvPool seeds its envs only when"):
        EnvPoolCage(pool, seed=7)  # a master seed 7 is not seed + i
    with EnvPoolCage(pool, seed=[7, 8, 9]) as cage:
        assert cage.env_seeds == (7, 8, 9)


def test_env_offset_takes_the_seeds_of_its_envs():
    with make_envpool_cage("CartPole-v1", 2, seed=1, env_offset=2) as cage:
        assert cage.env_seeds == Seeds.from_master(1, 4).envs[2:]
        assert cage.env_indices == range(2, 4)


def test_unseeded_cage_records_fresh_seeds():
    with (
        make_envpool_cage("CartPole-v1", 2) as a,
        make_envpool_cage("CartPole-v1", 2) as b,
    ):
        assert a.env_seeds != b.env_seeds and len(a.env_seeds) == 2


def test_reset_cannot_reseed_nor_take_options():
    with make_envpool_cage("CartPole-v1", 2, seed=0) as cage:
        obs = np.zeros((2, 4), np.float32)
        with pytest.raises(ConfigError, match="cannot reseed"):
            cage.reset(obs, seeds=[1, 2])
        with pytest.raises(ConfigError, match="take no options"):
            cage.reset(obs, options={"x": 1})
        cage.reset(obs, seeds=[None, None])  # no seed asked for: fine


# -- resets -------------------------------------------------------------------------


def test_partial_reset_equals_envpool_reset_of_those_envs():
    seeds = list(Seeds.from_master(2, 4).envs)
    reference = envpool.make_gymnasium("CartPole-v1", num_envs=4, seed=seeds)
    reference.reset()
    expected, info = reference.reset(np.array([3, 1], np.int32))
    reference.close()
    with make_envpool_cage("CartPole-v1", 4, seed=2, keep_infos=True) as cage:
        obs = np.zeros((4, 4), np.float32)
        cage.reset(obs)
        assert cage.waiting_envs() == []
        before = obs.copy()
        cage.reset(obs, env_indices=[3, -3])  # env 1, counted from the end
        order = {int(e): j for j, e in enumerate(info["env_id"])}
        np.testing.assert_array_equal(obs[3], expected[order[3]])
        np.testing.assert_array_equal(obs[1], expected[order[1]])
        np.testing.assert_array_equal(obs[[0, 2]], before[[0, 2]])
        assert sorted(cage.last_infos.reset) == [1, 3]
        assert "env_id" not in cage.last_infos.reset[1]


def test_step_before_reset_and_wait_mode_are_refused():
    with make_envpool_cage("CartPole-v1", 2, seed=0) as cage:
        tree = allocate(cage, 1, storage="local")
        with pytest.raises(CageStateError, match="before its first reset"):
            cage.step(tree.action[0], slots(tree, 0))
        tree.close()
    pool = envpool.make_gymnasium("CartPole-v1", num_envs=2)
    with pytest.raises(UnsupportedVectorEnvError, match="reset_mode='wait'"):
        EnvPoolCage(pool, reset_mode="wait")
    pool.close()


# -- what is refused ----------------------------------------------------------------


def test_pools_the_cage_cannot_step_are_refused():
    with pytest.raises(UnsupportedVectorEnvError, match="make_gymnasium"):
        EnvPoolCage(gym.make("CartPole-v1"))
    dm_pool = envpool.make_dm("CartPole-v1", num_envs=2)
    with pytest.raises(UnsupportedVectorEnvError, match="dm_env API"):
        EnvPoolCage(dm_pool)
    dm_pool.close()
    async_pool = envpool.make_gymnasium("CartPole-v1", num_envs=4, batch_size=2)
    with pytest.raises(UnsupportedVectorEnvError, match="asynchronous"):
        EnvPoolCage(async_pool)
    async_pool.close()
    closed = envpool.make_gymnasium("CartPole-v1", num_envs=2)
    closed.close()
    with pytest.raises(UnsupportedVectorEnvError, match="closed"):
        EnvPoolCage(closed)
    # env_type="gym" is EnvPool's gymnasium API in 1.2.5: accepted
    with EnvPoolCage(envpool.make("CartPole-v1", env_type="gym", num_envs=2)):
        pass


def test_make_envpool_cage_refuses_what_it_sets_itself():
    for key in ("num_envs", "batch_size", "env_seed", "env_type"):
        with pytest.raises(ConfigError, match="sets"):
            make_envpool_cage("CartPole-v1", 2, **{key: 1})


def test_env_access_beyond_render_is_refused():
    with make_envpool_cage("CartPole-v1", 2, seed=0) as cage:
        with pytest.raises(UnsupportedVectorEnvError, match="C\\+\\+"):
            cage.get_attr("gravity")
        with pytest.raises(UnsupportedVectorEnvError, match="C\\+\\+"):
            cage.set_attr("gravity", 1.0)
    pool = envpool.make_gymnasium("Pong-v5", num_envs=2, render_mode="rgb_array")
    with EnvPoolCage(pool) as cage:
        cage.reset(np.zeros((2, 4, 84, 84), np.uint8))
        frames = cage.render(env_indices=[1])
        assert len(frames) == 1 and frames[0].ndim == 3
    assert pool.closed  # the cage closed its pool


def test_missing_envpool_names_the_extra(monkeypatch):
    for name in list(sys.modules):
        if name == "envpool" or name.startswith(
            ("envpool.", "parllel.interop.envpool")
        ):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "envpool", None)
    import parllel.interop as interop

    for name in ("envpool_cage", "envpool_pool"):  # imported: attributes too
        monkeypatch.delattr(interop, name, raising=False)

    with pytest.raises(MissingDependencyError, match=r"parllel\[envpool\]"):
        interop.__getattr__("EnvPoolCage")


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
        seed=MASTER,
        keep_infos=True,
        traj_info_type=StepRecordingTrajInfo,
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
    with make_envpool_cage("CartPole-v1", 2, seed=0, max_episode_steps=3) as cage:
        tree = allocate(cage, 3, storage="local")
        cage.reset(tree.observation[0])
        trajs = []
        for t in range(3):
            step_slots = slots(tree, t)
            del step_slots[fields.ENV_INFO]
            trajs += cage.step(tree.action[t], step_slots)
        tree.close()
    assert [t.extra for t in trajs] == [{"elapsed_step": 3}] * 2
