"""The run-time services live in ``parllel.runtime``; the old ``parllel.runners``
paths keep working with a DeprecationWarning for one release."""

from __future__ import annotations

import importlib
import warnings

import pytest

import parllel.runtime as runtime

MOVED_MODULES = (
    "checkpoint",
    "cli",
    "compatibility",
    "finite",
    "run_directory",
    "seeding",
)


def test_new_paths_import_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in MOVED_MODULES:
            importlib.import_module(f"parllel.runtime.{name}")
        from parllel.runners import Callback, OffPolicyRunner, OnPolicyRunner, Runner
        from parllel.runtime import RunDirectory, Seeds, seed_everything
    assert {Callback, OffPolicyRunner, OnPolicyRunner, Runner}
    assert {RunDirectory, Seeds, seed_everything}


@pytest.mark.parametrize("name", runtime.__all__)
def test_old_package_names_warn_and_are_the_same_objects(name):
    import parllel.runners as runners

    with pytest.warns(DeprecationWarning, match=f"parllel.runtime.{name}"):
        old = getattr(runners, name)
    assert old is getattr(runtime, name)
    assert name not in runners.__all__


def test_old_from_import_warns_at_the_callers_line():
    with pytest.warns(DeprecationWarning) as record:
        from parllel.runners import RunDirectory
    assert RunDirectory is runtime.RunDirectory
    assert {w.filename for w in record} == {__file__}


@pytest.mark.parametrize("module", MOVED_MODULES)
def test_old_submodules_forward_every_name(module):
    new = importlib.import_module(f"parllel.runtime.{module}")
    old = importlib.import_module(f"parllel.runners.{module}")
    names = [n for n in vars(new) if not n.startswith("__")]
    assert names
    for name in names:
        with pytest.warns(DeprecationWarning, match=f"parllel.runtime.{module}"):
            assert getattr(old, name) is getattr(new, name)


def test_unknown_names_still_raise_attribute_error():
    import parllel.runners as runners
    import parllel.runners.checkpoint as old_checkpoint

    with pytest.raises(AttributeError, match="no_such_name"):
        runners.no_such_name  # noqa: B018
    with pytest.raises(AttributeError, match="no_such_name"):
        old_checkpoint.no_such_name  # noqa: B018
