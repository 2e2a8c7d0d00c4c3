"""Env indices: negative ones count from the end, others out of range raise (issue 26).

``call`` / ``apply`` / ``get_attr`` / ``set_attr`` took indices unchecked: a
process cage sent -1 to the main process's share (its last env, not the
cage's) or, without a share, failed with an internal CageError.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.cages.env_indices import normalize_env_indices
from parllel.errors import ConfigError, EnvIndexError, ParllelError
from tests.helpers.cage_helpers import allocate
from tests.helpers.envs import CountingEnv

N_ENVS = 4
LENGTHS = [10, 11, 12, 13]  # env i's max_length, to tell the envs apart

# every place an env can live: this process, workers only, the main process's
# share (envs 0 and 1) next to workers (envs 2 and 3)
CAGES = {
    "serial": SerialCage,
    "workers": partial(
        ProcessCage, layout=ProcessLayout(envs_per_worker=2), start_method="fork"
    ),
    "main-share": partial(
        ProcessCage,
        layout=ProcessLayout(main_process_envs=2, envs_per_worker=1),
        start_method="fork",
    ),
}


@pytest.fixture(params=list(CAGES), scope="module")
def open_cage(request):
    with CAGES[request.param](CountingEnv, N_ENVS, options=CageOptions(seed=0)) as cage:
        yield cage


@pytest.fixture
def cage(open_cage):
    """The module's cage, its envs told apart by their max_length."""
    open_cage.set_attr("max_length", LENGTHS)
    return open_cage


def max_length(env) -> int:
    return env.max_length


# -- the helper ---------------------------------------------------------------
@given(
    n_envs=st.integers(1, 8),
    indices=st.lists(st.integers(-12, 12), max_size=6),
)
def test_normalized_indices_pick_what_python_list_indexing_picks(n_envs, indices):
    envs = list(range(n_envs))
    try:
        expected = [envs[i] for i in indices]
    except IndexError:
        with pytest.raises(EnvIndexError, match="out of range for"):
            normalize_env_indices(indices, n_envs)
    else:
        assert normalize_env_indices(indices, n_envs) == expected
    assert normalize_env_indices(None, n_envs) == envs


def test_index_errors_are_parllel_config_and_index_errors():
    assert issubclass(EnvIndexError, ParllelError)
    assert issubclass(EnvIndexError, ConfigError)
    assert issubclass(EnvIndexError, IndexError)
    with pytest.raises(EnvIndexError, match="integers"):
        normalize_env_indices([1.0], 4)
    assert normalize_env_indices(np.array([-1, 0]), 4) == [3, 0]


# -- every cage method ------------------------------------------------------------
def test_get_attr_and_call_count_negative_indices_from_the_end(cage):
    assert cage.get_attr("max_length", env_indices=[-1, -4, 2, -2]) == [13, 10, 12, 12]
    assert cage.call("_action_value", 2.0, env_indices=[-1]) == [2.0]
    assert len(cage.render(env_indices=[-3])) == 1


def test_apply_counts_negative_indices_from_the_end(cage):
    assert cage.apply(max_length, env_indices=[-1, 0, -3]) == [13, 10, 11]


def test_set_attr_counts_negative_indices_from_the_end(cage):
    cage.set_attr("max_length", 99, env_indices=[-1])
    assert cage.get_attr("max_length") == [10, 11, 12, 99]
    cage.set_attr("max_length", [7, 8], env_indices=[-4, -2])
    assert cage.get_attr("max_length") == [7, 11, 8, 99]


def test_reset_counts_negative_indices_from_the_end(cage):
    tree = allocate(cage, 1)
    try:
        observation = tree.observation[0]
        cage.reset(observation)
        episodes = np.array(observation[:, 1])
        cage.reset(observation, env_indices=[-1, -3])
        assert list(np.array(observation[:, 1]) - episodes) == [0, 1, 0, 1]
    finally:
        tree.close()


@pytest.mark.parametrize(
    "method", ["call", "apply", "get_attr", "set_attr", "render", "reset"]
)
@pytest.mark.parametrize("index", [N_ENVS, -N_ENVS - 1, 100])
def test_every_method_refuses_indices_out_of_range(cage, method, index):
    tree = allocate(cage, 1)
    calls = {
        "call": lambda: cage.call("_action_value", 1.0, env_indices=[0, index]),
        "apply": lambda: cage.apply(max_length, env_indices=[index]),
        "get_attr": lambda: cage.get_attr("max_length", env_indices=[index]),
        "set_attr": lambda: cage.set_attr("max_length", 1, env_indices=[index]),
        "render": lambda: cage.render(env_indices=[index]),
        "reset": lambda: cage.reset(tree.observation[0], env_indices=[index]),
    }
    try:
        with pytest.raises(IndexError, match=rf"\[{index}\] out of range"):
            calls[method]()
        # nothing was sent or changed: the cage is still usable
        assert cage.get_attr("max_length") == LENGTHS
    finally:
        tree.close()
