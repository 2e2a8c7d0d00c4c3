"""After close(), a shared Array or tree refuses writes with ArrayClosedError; reads still work."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.arrays import Array
from parllel.errors import ArrayClosedError
from parllel.tree import ArrayDict

T, B = 4, 3


def _tree() -> ArrayDict:
    return ArrayDict(
        {
            "observation": Array((T, B), (2,), np.float32, storage="shared", padding=1),
            "reward": Array((T, B), (), np.float32, storage="shared"),
            "info": {"lives": Array((T, B), (), np.int64, storage="shared")},
        }
    )


def _step(value: float) -> dict:
    return {
        "observation": np.full(2, value, np.float32),
        "reward": value,
        "info": {"lives": int(value)},
    }


def _contents(tree: ArrayDict) -> dict:
    return {path: np.array(leaf.padded_ndarray()) for path, leaf in tree.items_flat()}


def test_array_refuses_writes_after_close_and_keeps_its_contents():
    array = Array((T, B), (2,), np.float32, storage="shared", padding=1)
    array[1, 2] = np.ones(2, np.float32)
    array.close()
    assert array.closed
    with pytest.raises(ArrayClosedError, match="closed"):
        array[0] = 5.0
    with pytest.raises(ArrayClosedError):
        array[1, 2] = np.zeros(2, np.float32)
    with pytest.raises(ArrayClosedError):
        array.padded[-1] = 5.0
    with pytest.raises(ArrayClosedError, match="rotate"):
        array.rotate()
    with pytest.raises(ArrayClosedError):
        pickle.dumps(array)
    assert array[1, 2].tolist() == [1.0, 1.0]  # reads still work
    view = array.to_ndarray()
    assert not view.flags.writeable
    array.close()  # idempotent
    assert array.closed


@pytest.mark.parametrize("storage", ["local", "shared"])
def test_local_and_shared_arrays_refuse_use_after_close_alike(storage):
    """A closed local Array fails as a closed shared one does (a sample tree
    of a serial cage and one of a process cage)."""
    array = Array((T, B), storage=storage)
    array[0] = 1.0
    array.close()
    assert array.closed
    with pytest.raises(ArrayClosedError, match="the Array was closed"):
        array[0] = 2.0
    with pytest.raises(ArrayClosedError, match="the Array was closed"):
        array.rotate()
    assert array[0].tolist() == [1.0] * B  # reads still work


def test_tree_refuses_writes_after_close_naming_the_leaf():
    tree = _tree()
    tree[0, 1] = _step(1.0)
    before = _contents(tree)
    tree.close()
    with pytest.raises(ArrayClosedError, match="'observation'"):
        tree[0, 1] = _step(2.0)
    with pytest.raises(ArrayClosedError, match="'observation'"):
        tree[2] = _step(3.0)  # the general path
    with pytest.raises(ArrayClosedError, match="'lives'"):
        tree["info"][1, 1] = {"lives": 3}
    with pytest.raises(ArrayClosedError, match="cannot write: the Array was closed"):
        tree.reward[1:3] = 0.5
    with pytest.raises(ArrayClosedError, match="leaf 'observation'"):
        tree.rotate()
    after = _contents(tree)
    for path in before:
        np.testing.assert_array_equal(after[path], before[path], err_msg=path)


indices = st.one_of(
    st.integers(-T, T - 1),
    st.tuples(st.integers(-T, T - 1), st.integers(-B, B - 1)),
    st.builds(slice, st.integers(0, T), st.integers(0, T)),
)


@settings(max_examples=60, deadline=None)
@given(index=indices, value=st.floats(-10, 10, width=32))
def test_every_write_after_close_raises_and_changes_nothing(index, value):
    with _tree() as tree:
        for t in range(T):
            tree[t, t % B] = _step(float(t))
        before = _contents(tree)
        tree.close()
        for write in (
            lambda: tree.__setitem__(index, value),
            lambda: tree.observation.__setitem__(index, value),
            lambda: tree.reward.__setitem__(index, value),
        ):
            with pytest.raises(ArrayClosedError):
                write()
        after = _contents(tree)
        for path in before:
            np.testing.assert_array_equal(after[path], before[path], err_msg=path)
