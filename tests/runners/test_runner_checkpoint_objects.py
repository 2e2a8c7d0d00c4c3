"""A runner refuses checkpoint objects it could not save or restore when it
is built, not at its first checkpoint."""

from __future__ import annotations

import pytest
from torch import nn

from parllel.errors import ConfigError
from parllel.runners import OnPolicyRunner
from tests.helpers.resume_fakes import NormalizedSampler, OptimizerState


class SavesOnly:
    def state_dict(self) -> dict:
        return {}


class FlaxLikeModule:
    """Like a flax module: no weights, and attribute lookups of what it lacks fail."""

    def __getattr__(self, name: str):
        raise AttributeError(f'"FlaxLikeModule" object has no attribute "{name}"')


@pytest.mark.parametrize("bad", [FlaxLikeModule(), SavesOnly(), object()])
def test_object_without_state_dict_methods_is_refused_at_construction(bad, tmp_path):
    sampler = NormalizedSampler(2, 2, 3)
    model = nn.Linear(3, 1)
    with pytest.raises(ConfigError, match=r"checkpoint_objects\['actor'\] .*agent"):
        OnPolicyRunner(
            sampler,
            OptimizerState(),
            8,
            checkpoint_dir=tmp_path,
            checkpoint_objects={"model": model, "actor": bad},
        )


def test_objects_with_both_methods_are_kept() -> None:
    model = nn.Linear(3, 1)
    runner = OnPolicyRunner(
        NormalizedSampler(2, 2, 3),
        OptimizerState(),
        8,
        checkpoint_objects={"model": model},
    )
    assert runner.checkpoint_objects == {"model": model}
