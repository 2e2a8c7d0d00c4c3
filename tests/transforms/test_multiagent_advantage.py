"""Per-agent masked GAE against a decision-list reference, hand cases, the Transform."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.arrays import Array
from parllel.errors import ConfigError, DtypeError, ShapeError
from parllel.transforms import Compose, EstimateAdvantage, MultiAgentGAE
from parllel.transforms.functional import generalized_advantage_estimation
from parllel.transforms.multiagent_advantage import multiagent_gae
from parllel.tree import ArrayDict
from tests.transforms.test_transforms_kernels import ref_normalized

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TOL = {"rtol": 1e-5, "atol": 1e-5}


# -- plain-Python reference: list the decisions, then GAE over the list ------
def ref_column(
    reward, value, mask, term, trunc, done, boot, final, gamma, lam, boot_trunc,
    acting=True,
):  # fmt: skip
    """One (env, agent) column ``[T]``; returns (advantage, return) lists."""
    n = len(reward)
    decisions = []  # each: [t, reward_sum, end_value or None (continues)]
    current = None
    for t in range(n):
        if mask[t]:
            current = [t, 0.0, None]
            decisions.append(current)
        if current is not None:
            current[1] += float(reward[t])
        terminated = bool(term[t]) or (bool(trunc[t]) and not boot_trunc)
        truncated = bool(trunc[t]) and not terminated
        if terminated or truncated or done[t]:
            if current is not None:
                if not truncated:
                    end = 0.0
                elif done[t]:
                    end = float(final[t])
                elif t == n - 1:
                    end = float(boot)
                else:
                    end = float(value[t + 1])
                current[2] = end
            current = None
    if current is not None:
        current[2] = float(boot) if acting else "open"
    adv = [0.0] * n
    ret = [0.0] * n
    following = None  # (t, advantage) of the next decision in the column
    for t, total, end in reversed(decisions):
        if end == "open":  # not to act at observation[T]: nothing to learn yet
            a = 0.0
        elif end is not None:
            a = total + gamma * end - float(value[t])
        else:
            t_next, a_next = following
            a = (
                total
                + gamma * float(value[t_next])
                - float(value[t])
                + gamma * lam * a_next
            )
        adv[t] = a
        ret[t] = a + float(value[t])
        following = (t, a)
    return adv, ret


def ref_multiagent_gae(reward, value, mask, term, trunc, done, boot, final, gamma, lam,
                       boot_trunc=True, acting=None):  # fmt: skip
    T, B, A = reward.shape
    adv = np.zeros((T, B, A))
    ret = np.zeros((T, B, A))
    for b in range(B):
        for a in range(A):
            column = [x[:, b, a] for x in (reward, value, mask, term, trunc)]
            fin = None if final is None else final[:, b, a]
            adv_c, ret_c = ref_column(
                *column, done[:, b], boot[b, a], fin, gamma, lam, boot_trunc,
                True if acting is None else bool(acting[b, a]),
            )  # fmt: skip
            adv[:, b, a], ret[:, b, a] = adv_c, ret_c
    return adv, ret


@st.composite
def ma_batches(draw, all_acting=False):
    T = draw(st.integers(1, 9))
    B = draw(st.integers(1, 3))
    A = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p_act = 1.0 if all_acting else draw(st.sampled_from([0.3, 0.6, 0.9]))
    p_end = draw(st.sampled_from([0.0, 0.1, 0.3]))
    shape = (T, B, A)
    return dict(
        reward=rng.normal(size=shape).astype(dtype),
        value=rng.normal(size=shape).astype(dtype),
        mask=rng.random(shape) < p_act,
        term=rng.random(shape) < p_end,
        trunc=rng.random(shape) < p_end,
        done=rng.random((T, B)) < p_end,
        boot=rng.normal(size=(B, A)).astype(dtype),
        acting=rng.random((B, A)) < (1.0 if all_acting else 0.5),
        final=rng.normal(size=shape).astype(dtype),
        gamma=draw(st.sampled_from([0.0, 0.5, 0.99, 1.0])),
        lam=draw(st.sampled_from([0.0, 0.9, 1.0])),
    )


def run(batch, **kwargs):
    b = batch
    return multiagent_gae(
        b["reward"], b["value"], b["mask"], b["term"], b["trunc"], b["done"],
        b["boot"], b["final"], gamma=b["gamma"], gae_lambda=b["lam"],
        **{"bootstrap_acting": b.get("acting"), **kwargs},
    )  # fmt: skip


@SETTINGS
@given(ma_batches(), st.booleans())
def test_multiagent_gae_matches_reference(batch, truncation_as_termination):
    adv, ret = run(batch, truncation_as_termination=truncation_as_termination)
    ref_adv, ref_ret = ref_multiagent_gae(
        *(batch[k] for k in ("reward", "value", "mask", "term", "trunc", "done")),
        batch["boot"], batch["final"], batch["gamma"], batch["lam"],
        boot_trunc=not truncation_as_termination, acting=batch["acting"],
    )  # fmt: skip
    assert adv.dtype == batch["value"].dtype and ret.dtype == adv.dtype
    np.testing.assert_allclose(adv, ref_adv, **TOL)
    np.testing.assert_allclose(ret, ref_ret, **TOL)
    assert not adv[~batch["mask"]].any() and not ret[~batch["mask"]].any()


@SETTINGS
@given(ma_batches(all_acting=True))
def test_one_agent_acting_every_step_is_single_agent_gae(batch):
    """A = 1, every step acted, agent flags = env flags: the existing GAE kernel."""
    single = {
        k: v[:, :, :1] for k, v in batch.items() if k in ("reward", "value", "final")
    }
    term, trunc = batch["term"][:, :, :1], batch["trunc"][:, :, :1]
    done = (term | trunc)[:, :, 0]
    adv, ret = multiagent_gae(
        single["reward"], single["value"], np.ones_like(term), term, trunc, done,
        batch["boot"][:, :1], single["final"], gamma=batch["gamma"],
        gae_lambda=batch["lam"],
    )  # fmt: skip
    gae_adv, gae_ret = generalized_advantage_estimation(
        single["reward"][..., 0], single["value"][..., 0], term[..., 0],
        trunc[..., 0], batch["boot"][:, 0], single["final"][..., 0],
        gamma=batch["gamma"], gae_lambda=batch["lam"],
    )  # fmt: skip
    np.testing.assert_allclose(adv[..., 0], gae_adv, **TOL)
    np.testing.assert_allclose(ret[..., 0], gae_ret, **TOL)


def _column_case(mask, reward, term=None, trunc=None, done=None, value=None,
                 boot=None, final=None):  # fmt: skip
    """Arrays ``[T, 1, A]`` from per-step rows ``[T][A]``."""
    mask = np.array(mask, bool)[:, None]
    T, _, A = mask.shape
    zeros = np.zeros((T, 1, A))
    return dict(
        reward=np.array(reward, float)[:, None],
        value=zeros if value is None else np.array(value, float)[:, None],
        mask=mask,
        term=zeros.astype(bool) if term is None else np.array(term, bool)[:, None],
        trunc=zeros.astype(bool) if trunc is None else np.array(trunc, bool)[:, None],
        done=np.zeros((T, 1), bool) if done is None else np.array(done, bool)[:, None],
        boot=np.zeros((1, A)) if boot is None else np.array(boot, float)[None],
        final=zeros if final is None else np.array(final, float)[:, None],
    )


def test_turn_based_loser_reward_arrives_on_winner_move():
    # Players alternate: 0 moves at t = 0, 2; 1 moves at t = 1, 3 and wins at
    # t = 3: both terminated there, the loser's -1 on the winner's move.
    case = _column_case(
        mask=[[1, 0], [0, 1], [1, 0], [0, 1]],
        reward=[[0, 0], [0, 0], [0, 0], [-1, 1]],
        term=[[0, 0], [0, 0], [0, 0], [1, 1]],
        done=[0, 0, 0, 1],
        value=[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]],
        boot=[9.0, 9.0],  # next episode: never read
    )
    adv, ret = run({**case, "gamma": 0.5, "lam": 1.0})
    # player 0: decisions at t = 0 and t = 2; the -1 belongs to t = 2
    assert ret[2, 0, 0] == pytest.approx(-1.0)
    assert ret[0, 0, 0] == pytest.approx(0.5 * -1.0)
    # player 1: decisions at t = 1 and t = 3
    assert ret[3, 0, 1] == pytest.approx(1.0)
    assert ret[1, 0, 1] == pytest.approx(0.5)
    assert adv[2, 0, 0] == pytest.approx(-1.0 - 0.5)  # return - value
    assert ret[1, 0, 0] == ret[0, 0, 1] == ret[2, 0, 1] == ret[3, 0, 0] == 0.0


def test_agent_truncated_mid_episode_bootstraps_from_its_next_value():
    # agent 1 drops out truncated at t = 1 (env continues); its kept last
    # observation's value at t = 2 is the bootstrap.
    case = _column_case(
        mask=[[1, 1], [1, 1], [1, 0], [1, 0]],
        reward=[[1, 1], [1, 2], [1, 5], [1, 5]],  # agent 1's later rewards: dropped
        trunc=[[0, 0], [0, 1], [0, 0], [0, 0]],
        value=[[0, 0], [0, 0], [0, 3.0], [0, 7.0]],
        boot=[4.0, 11.0],
    )
    adv, ret = run({**case, "gamma": 0.5, "lam": 1.0})
    assert ret[1, 0, 1] == pytest.approx(2 + 0.5 * 3.0)
    assert ret[0, 0, 1] == pytest.approx(1 + 0.5 * (2 + 0.5 * 3.0))
    assert ret[2, 0, 1] == ret[3, 0, 1] == 0.0
    # agent 0 continues to the batch end and bootstraps from bootstrap_value
    assert ret[3, 0, 0] == pytest.approx(1 + 0.5 * 4.0)


def test_truncation_where_the_env_ended_uses_final_value():
    case = _column_case(
        mask=[[1], [1]], reward=[[1], [1]], trunc=[[1], [0]], done=[1, 0],
        value=[[0], [8.0]], final=[[6.0], [0]], boot=[2.0],
    )  # fmt: skip
    _, ret = run({**case, "gamma": 0.5, "lam": 1.0})
    assert ret[0, 0, 0] == pytest.approx(1 + 0.5 * 6.0)
    assert ret[1, 0, 0] == pytest.approx(1 + 0.5 * 2.0)


def test_truncated_at_last_step_without_env_end_uses_bootstrap_value():
    case = _column_case(
        mask=[[1], [1]], reward=[[0], [1]], trunc=[[0], [1]], boot=[3.0]
    )
    _, ret = run({**case, "gamma": 0.5, "lam": 1.0})
    assert ret[1, 0, 0] == pytest.approx(1 + 0.5 * 3.0)


def test_batch_boundaries_pending_decision_and_orphan_rewards():
    # Agent 0's last move at t = 1 is still pending at the batch end: its
    # rewards at t = 1, 2 count, then bootstrap_value. Agent 1's reward at
    # t = 0, before its first move, belongs to a previous batch's decision.
    case = _column_case(
        mask=[[0, 0], [1, 1], [0, 0]],
        reward=[[5, 7], [1, 1], [2, 2]],
        boot=[10.0, 10.0],
    )
    adv, ret = run({**case, "gamma": 0.5, "lam": 0.9})
    assert ret[1, 0, 0] == pytest.approx(1 + 2 + 0.5 * 10.0)
    assert ret[1, 0, 1] == pytest.approx(1 + 2 + 0.5 * 10.0)
    assert not ret[0].any() and not ret[2].any()


def test_a_waiting_agents_last_decision_is_left_open():
    # Agent 0 moved at t = 1 and is not to act at observation[T]: its value
    # there is of a waiting state, so that move stays open (advantage 0,
    # return its value) and the move at t = 0 bootstraps from value[1].
    # Agent 1 is to act at observation[T]: it bootstraps as before.
    case = _column_case(
        mask=[[1, 0], [1, 1], [0, 0]],
        reward=[[5, 7], [1, 1], [2, 2]],
        boot=[10.0, 10.0],
    )
    case["value"][:, 0, 0] = [3.0, 4.0, 0.0]
    adv, ret = run(
        {**case, "gamma": 0.5, "lam": 0.9}, bootstrap_acting=np.array([[False, True]])
    )
    assert adv[1, 0, 0] == 0 and ret[1, 0, 0] == 4.0
    assert ret[0, 0, 0] == pytest.approx(5 + 0.5 * 4.0)
    assert ret[1, 0, 1] == pytest.approx(1 + 2 + 0.5 * 10.0)


def test_a_decision_whose_episode_ended_is_never_left_open():
    case = _column_case(
        mask=[[1], [0]], reward=[[0], [-1]], term=[[0], [1]], boot=[10.0]
    )
    adv, ret = run(
        {**case, "gamma": 1.0, "lam": 1.0}, bootstrap_acting=np.zeros((1, 1), bool)
    )
    assert ret[0, 0, 0] == -1.0


def test_env_done_resets_the_carry_without_agent_flags():
    # an env-level end with no agent flag counts as a termination
    case = _column_case(
        mask=[[1], [1]], reward=[[1], [1]], done=[1, 0], value=[[0], [100.0]],
        boot=[0.0],
    )  # fmt: skip
    _, ret = run({**case, "gamma": 1.0, "lam": 1.0})
    assert ret[0, 0, 0] == pytest.approx(1.0)


# -- the Transform on a sample tree ------------------------------------------
def make_ma_tree(T=6, B=2, A=3, seed=0, dtype=np.float32, drop=()):
    rng = np.random.default_rng(seed)

    def arr(batch, dt=dtype, p=None):
        a = Array(batch_shape=batch, dtype=dt)
        a.to_ndarray()[...] = (
            rng.random(batch) < p if p is not None else rng.normal(size=batch)
        )
        return a

    env_info = {
        fields.AGENT_REWARD: arr((T, B, A)),
        fields.AGENT_MASK: arr((T, B, A), np.bool_, 0.6),
        fields.AGENT_TERMINATED: arr((T, B, A), np.bool_, 0.1),
        fields.AGENT_TRUNCATED: arr((T, B, A), np.bool_, 0.1),
    }
    tree = {
        fields.DONE: arr((T, B), np.bool_, 0.2),
        fields.ENV_INFO: {k: v for k, v in env_info.items() if k not in drop},
        fields.AGENT_INFO: {fields.VALUE: arr((T, B, A))},
        fields.BOOTSTRAP_VALUE: rng.normal(size=(B, A)).astype(dtype),
        fields.FINAL_VALUE: arr((T, B, A)),
    }
    return ArrayDict({k: v for k, v in tree.items() if k not in drop})


def _nd(leaf):
    return leaf.to_ndarray() if isinstance(leaf, Array) else leaf


def functional_gae(tree, **kwargs):
    """multiagent_gae on the tree's fields (gamma 0.9, lambda 0.8)."""
    info = tree[fields.ENV_INFO]
    return multiagent_gae(
        _nd(info[fields.AGENT_REWARD]), _nd(tree[fields.AGENT_INFO][fields.VALUE]),
        _nd(info[fields.AGENT_MASK]), _nd(info[fields.AGENT_TERMINATED]),
        _nd(info[fields.AGENT_TRUNCATED]), _nd(tree[fields.DONE]),
        tree[fields.BOOTSTRAP_VALUE], _nd(tree[fields.FINAL_VALUE]),
        gamma=0.9, gae_lambda=0.8, **kwargs,
    )  # fmt: skip


def test_transform_allocates_and_matches_functional():
    tree = make_ma_tree()
    gae = MultiAgentGAE(tree, gamma=0.9, gae_lambda=0.8)
    assert isinstance(tree[fields.ADVANTAGE], Array)
    assert _nd(tree[fields.ADVANTAGE]).shape == (6, 2, 3)
    expected = functional_gae(tree)
    _nd(tree[fields.ADVANTAGE])[...] = 0
    assert Compose([gae])(tree) is tree
    np.testing.assert_array_equal(_nd(tree[fields.ADVANTAGE]), expected[0])
    np.testing.assert_array_equal(_nd(tree[fields.RETURN]), expected[1])
    assert gae.state_dict() == {}


def test_transform_reads_who_is_to_act_from_the_action_mask_at_T():
    T, B, A = 6, 2, 3
    tree = make_ma_tree(T, B, A)
    mask = Array(batch_shape=(T, B, A), feature_shape=(4,), dtype=np.int8, padding=1)
    mask.to_ndarray()[...] = 1
    acting = np.array([[True, False, False], [False, True, False]])
    mask.padded_ndarray()[1 + T] = acting[..., None]  # observation[T]
    tree[fields.OBSERVATION] = ArrayDict({"action_mask": mask})
    MultiAgentGAE(tree, gamma=0.9, gae_lambda=0.8)(tree)
    expected = functional_gae(tree, bootstrap_acting=acting)
    assert not np.array_equal(functional_gae(tree)[1], expected[1])  # flags matter
    np.testing.assert_array_equal(_nd(tree[fields.RETURN]), expected[1])


@SETTINGS
@given(st.integers(0, 10_000))
def test_transform_normalizes_over_acted_rows_only(seed):
    tree = make_ma_tree(seed=seed, dtype=np.float64)
    plain = MultiAgentGAE(tree, gamma=0.9, gae_lambda=0.8)
    raw = _nd(plain(tree)[fields.ADVANTAGE]).copy()
    MultiAgentGAE(tree, gamma=0.9, gae_lambda=0.8, normalize_advantage=True)(tree)
    normalized = _nd(tree[fields.ADVANTAGE])
    acted = _nd(tree[fields.ENV_INFO][fields.AGENT_MASK])
    assert not normalized[~acted].any()
    if acted.any():
        rows = raw[acted]
        expected = ref_normalized(rows)
        np.testing.assert_allclose(normalized[acted], expected, rtol=1e-6, atol=1e-6)


def test_transform_errors_name_the_problem():
    tree = make_ma_tree(drop=(fields.AGENT_MASK,))
    with pytest.raises(ConfigError, match="env_info.agent_mask"):
        MultiAgentGAE(tree, gamma=0.9, gae_lambda=0.9)
    tree = make_ma_tree(drop=(fields.FINAL_VALUE,))
    with pytest.raises(ConfigError, match="final_value"):
        MultiAgentGAE(tree, gamma=0.9, gae_lambda=0.9)
    MultiAgentGAE(tree, gamma=0.9, gae_lambda=0.9, truncation_as_termination=True)
    tree = make_ma_tree()
    tree[fields.BOOTSTRAP_VALUE] = np.zeros(2, np.float32)
    with pytest.raises(ShapeError, match="bootstrap_value"):
        MultiAgentGAE(tree, gamma=0.9, gae_lambda=0.9)
    tree = make_ma_tree()
    tree[fields.DONE] = np.zeros((6, 2, 3), bool)
    with pytest.raises(ShapeError, match="done"):
        MultiAgentGAE(tree, gamma=0.9, gae_lambda=0.9)
    with pytest.raises(ConfigError, match="gamma"):
        MultiAgentGAE(make_ma_tree(), gamma=1.5, gae_lambda=0.9)


def test_functional_checks_dtypes_and_shapes():
    batch = dict(
        reward=np.zeros((3, 2, 2), np.float32), value=np.zeros((3, 2, 2), np.float32),
        mask=np.ones((3, 2, 2), bool), term=np.zeros((3, 2, 2), bool),
        trunc=np.zeros((3, 2, 2), bool), done=np.zeros((3, 2), bool),
        boot=np.zeros((2, 2), np.float32), final=None, gamma=0.9, lam=0.9,
    )  # fmt: skip
    with pytest.raises(ConfigError, match="final_value"):
        run(batch)
    with pytest.raises(DtypeError, match="agent_mask"):
        run(
            {**batch, "mask": np.ones((3, 2, 2), np.float32)},
            truncation_as_termination=True,
        )
    with pytest.raises(ShapeError, match="agent_reward"):
        run(
            {**batch, "reward": np.zeros((3, 2), np.float32)},
            truncation_as_termination=True,
        )
    with pytest.raises(ShapeError, match="agent_terminated"):
        run(
            {**batch, "term": np.zeros((3, 2, 1), bool)}, truncation_as_termination=True
        )


def test_single_agent_gae_on_per_agent_values_points_to_multiagent_gae():
    T, B, A = 4, 2, 3
    reward = np.zeros((T, B), np.float32)  # the team reward
    value = np.zeros((T, B, A), np.float32)  # agent_info.value of a shared model
    ended = np.zeros((T, B), bool)
    with pytest.raises(ShapeError, match="MultiAgentGAE"):
        generalized_advantage_estimation(
            reward, value, ended, ended, np.zeros((B, A), np.float32), None,
            gamma=0.9, gae_lambda=0.9, truncation_as_termination=True,
        )  # fmt: skip


def test_single_agent_tree_gives_estimate_advantage_values():
    """A = 1 tree with every step acted: EstimateAdvantage's numbers, per agent."""
    T, B = 7, 3
    rng = np.random.default_rng(3)
    term = rng.random((T, B)) < 0.15
    trunc = rng.random((T, B)) < 0.15
    reward = rng.normal(size=(T, B)).astype(np.float32)
    value = rng.normal(size=(T, B)).astype(np.float32)
    boot = rng.normal(size=B).astype(np.float32)
    final = rng.normal(size=(T, B)).astype(np.float32)
    single = ArrayDict({
        fields.REWARD: reward, fields.TERMINATED: term, fields.TRUNCATED: trunc,
        fields.AGENT_INFO: {fields.VALUE: value}, fields.BOOTSTRAP_VALUE: boot,
        fields.FINAL_VALUE: final,
    })  # fmt: skip
    EstimateAdvantage(single, gamma=0.95, gae_lambda=0.9)
    multi = ArrayDict({
        fields.DONE: term | trunc,
        fields.ENV_INFO: {
            fields.AGENT_REWARD: reward[..., None], fields.AGENT_MASK: np.ones((T, B, 1), bool),
            fields.AGENT_TERMINATED: term[..., None], fields.AGENT_TRUNCATED: trunc[..., None],
        },
        fields.AGENT_INFO: {fields.VALUE: value[..., None]},
        fields.BOOTSTRAP_VALUE: boot[:, None], fields.FINAL_VALUE: final[..., None],
    })  # fmt: skip
    MultiAgentGAE(multi, gamma=0.95, gae_lambda=0.9)
    np.testing.assert_allclose(
        multi[fields.ADVANTAGE][..., 0], single[fields.ADVANTAGE], **TOL
    )
    np.testing.assert_allclose(
        multi[fields.RETURN][..., 0], single[fields.RETURN], **TOL
    )
