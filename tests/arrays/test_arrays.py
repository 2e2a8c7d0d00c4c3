"""Array semantics equal numpy's for every index expression (hypothesis)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from parllel.arrays import Array
from parllel.errors import ConfigError, DtypeError, ShapeError

DTYPES = [np.float32, np.float64, np.int32, np.uint8, np.bool_]


@st.composite
def array_case(draw):
    """A (shape, dtype, padding, storage) spec plus filled reference data."""
    batch_shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=2)))
    feature_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    dtype = draw(st.sampled_from(DTYPES))
    padding = draw(st.integers(0, min(2, batch_shape[0])))
    storage = draw(st.sampled_from(["local", "shared"]))
    return batch_shape, feature_shape, np.dtype(dtype), padding, storage


def leading_index(draw, length: int, padding: int):
    """An index expression for the leading dim, in batch coordinates."""
    kind = draw(st.sampled_from(["int", "neg", "slice", "bool", "intarray", "pad"]))
    if kind == "int":
        return draw(st.integers(0, length - 1))
    if kind == "neg":
        return draw(st.integers(-length, -1))
    if kind == "slice":
        start = draw(st.none() | st.integers(-length - 1, length + 1))
        stop = draw(st.none() | st.integers(-length - 1, length + 1))
        step = draw(st.none() | st.sampled_from([1, 2, 3, -1, -2]))
        return slice(start, stop, step)
    if kind == "bool":
        return np.array(draw(st.lists(st.booleans(), min_size=length, max_size=length)))
    if kind == "intarray":
        return np.array(
            draw(st.lists(st.integers(-length, length - 1), min_size=1, max_size=4))
        )
    return "pad"


@settings(max_examples=300, deadline=None)
@given(case=array_case(), data=st.data())
def test_read_write_match_numpy(case, data):
    batch_shape, feature_shape, dtype, padding, storage = case
    shape = batch_shape + feature_shape
    reference = data.draw(hnp.arrays(dtype, shape))
    with Array(
        batch_shape, feature_shape, dtype, storage=storage, padding=padding
    ) as array:
        array[...] = reference
        np.testing.assert_array_equal(array.to_ndarray(), reference)
        length = batch_shape[0]
        lead = leading_index(data.draw, length, padding)
        if isinstance(lead, str):  # index into the trailing padding
            if padding == 0:
                return
            row = data.draw(st.integers(length, length + padding - 1))
            value = data.draw(hnp.arrays(dtype, shape[1:]))
            array[row] = value
            np.testing.assert_array_equal(array[row], value)
            np.testing.assert_array_equal(
                array.to_ndarray(), reference
            )  # batch untouched
            return
        rest = []
        if len(shape) > 1 and data.draw(st.booleans()):
            rest.append(data.draw(st.integers(-shape[1], shape[1] - 1)))
        use_ellipsis = data.draw(st.booleans())
        index = (lead, *rest, Ellipsis) if use_ellipsis else (lead, *rest)
        expected = reference[index]
        got = array[index]
        np.testing.assert_array_equal(got, expected)
        assert np.shape(got) == np.shape(expected)
        new = data.draw(hnp.arrays(dtype, np.shape(expected)))
        reference[index] = new
        array[index] = new
        np.testing.assert_array_equal(array.to_ndarray(), reference)


@settings(max_examples=60, deadline=None)
@given(case=array_case(), data=st.data())
def test_padded_coordinates_reach_both_sides(case, data):
    batch_shape, feature_shape, dtype, padding, storage = case
    length = batch_shape[0]
    with Array(
        batch_shape, feature_shape, dtype, storage=storage, padding=padding
    ) as array:
        full = data.draw(
            hnp.arrays(dtype, (length + 2 * padding,) + batch_shape[1:] + feature_shape)
        )
        array.padded[:] = full
        np.testing.assert_array_equal(array.padded_ndarray(), full)
        row = data.draw(st.integers(-padding, length + padding - 1))
        np.testing.assert_array_equal(array.padded[row], full[row + padding])
        if 0 <= row:
            np.testing.assert_array_equal(array[row], full[row + padding])
        if padding:
            # -1 in batch coordinates is the last batch row, not padding
            np.testing.assert_array_equal(array[-1], full[padding + length - 1])
            np.testing.assert_array_equal(array.padded[-1], full[padding - 1])


def test_rotate_carries_rows_across_the_boundary():
    array = Array((4, 2), dtype=np.int64, padding=1)
    array.padded[:] = np.arange(6)[:, None] * np.ones((1, 2), np.int64)
    array.rotate()
    # the old rows T-1 (=3) and T (=4) become rows -1 and 0
    assert array.padded[-1, 0] == 3 + 1  # padded storage values were shifted by P
    np.testing.assert_array_equal(array[0], [5, 5])


def test_full_size_window_slides_then_wraps():
    array = Array((2, 1), dtype=np.int64, padding=1, full_size=6)
    for batch in range(3):
        if batch:
            array.rotate()
        array.padded[0:3] = np.full((3, 1), batch)  # includes the bootstrap row T
    assert array.full.shape == (6, 1)
    np.testing.assert_array_equal(array.full[:, 0], [0, 0, 1, 1, 2, 2])
    array[2] = 7  # the bootstrap row of the last window is the trailing padding
    array.rotate()  # wraps: row 0 receives it, padded[-1] the row before it
    assert array[0, 0] == 7 and array.padded[-1, 0] == 2


def test_full_view_grows_with_rotations():
    array = Array((2,), dtype=np.float32, full_size=8)
    assert array.full.shape == (2,)
    array.rotate()
    assert array.full.shape == (4,)


def test_indices_out_of_bounds_raise():
    array = Array((3, 2), padding=1)
    with pytest.raises(IndexError, match="padded"):
        array.padded[-2]
    with pytest.raises(IndexError, match="out of bounds"):
        array[5]
    with pytest.raises(IndexError):
        array[-4]
    with pytest.raises(IndexError, match="boolean index"):
        array[np.array([True, False])]
    assert array[3].shape == (2,)  # the bootstrap row


def test_write_checks_shape_and_dtype():
    array = Array((3, 2), (4,), np.int32)
    with pytest.raises(ShapeError, match=r"\(2, 4\)"):
        array[0] = np.zeros((2, 5), np.int32)
    with pytest.raises(DtypeError, match="float64"):
        array[0] = np.zeros((2, 4), np.float64)
    with pytest.raises(DtypeError, match="float"):
        array[0, 0, 0] = 1.5
    array[0] = np.ones((2, 4), np.int8)  # safe cast is fine
    array[1] = 7  # python int into int array
    assert array[1, 1, 3] == 7


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_shape": ()},
        {"batch_shape": (0, 2)},
        {"batch_shape": (4,), "storage": "gpu"},
        {"batch_shape": (4,), "padding": -1},
        {"batch_shape": (4,), "padding": 5},
        {"batch_shape": (4,), "full_size": 6},
    ],
)
def test_bad_config_raises(kwargs):
    with pytest.raises(ConfigError):
        Array(**kwargs)


def test_shared_pickles_by_name_independent_of_size():
    small = Array((16,), (16,), np.float32, storage="shared")
    large = Array((1024,), (1024, 16), np.float32, storage="shared")
    try:
        assert len(pickle.dumps(large)) < 4096
        assert abs(len(pickle.dumps(large)) - len(pickle.dumps(small))) < 64
        clone = pickle.loads(pickle.dumps(large))
        clone[3, 2, 1] = 9.0
        assert large[3, 2, 1] == 9.0
    finally:
        small.close()
        large.close()


def test_local_pickles_by_value():
    array = Array((3,), padding=1)
    array[3] = 2.0
    clone = pickle.loads(pickle.dumps(array))
    assert clone[3] == 2.0
    clone[0] = 1.0
    assert array[0] == 0.0


def test_close_is_idempotent_and_views_survive():
    array = Array((3,), storage="shared")
    view = array.to_ndarray()
    array.close()
    array.close()
    view[0] = 1.0  # the mapping stays valid for live views
    assert view[0] == 1.0


def test_array_protocol_is_zero_copy():
    array = Array((3, 2))
    view = np.asarray(array)
    view[1, 1] = 4.0
    assert array[1, 1] == 4.0
    assert np.asarray(array, dtype=np.float64).dtype == np.float64
