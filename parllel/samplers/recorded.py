"""What a sample tree records: read once, when a sampler or its views are built.

The tree decides which optional fields a sampler writes (the user controls the
buffer's contents); :class:`RecordedFields` is that decision, so the step code
reads attributes instead of probing the tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from parllel import fields
from parllel.errors import ConfigError

__all__ = ["RecordedFields"]

# Fields every sampler reads or writes at every step (the others are optional).
REQUIRED = (
    fields.OBSERVATION, fields.ACTION, fields.AGENT_INFO, fields.REWARD,
    fields.TERMINATED, fields.TRUNCATED, fields.DONE,
)  # fmt: skip


@dataclass(frozen=True)
class RecordedFields:
    """The optional fields a sample tree holds (build it with :meth:`of`).

    ``frame_stack`` is the ``k`` of a tree built with ``frame_stack=k`` (its
    observations staged in ``[B]`` slots, one frame per step kept), else None.
    """

    previous: bool  # prev_action and prev_reward
    env_info: bool  # at least one numeric env-info key
    final_observation: bool
    final_value: bool
    bootstrap_value: bool
    valid: bool  # the wait-reset mask
    initial_state: bool
    frame_stack: int | None

    @classmethod
    def of(cls, sample_tree: Mapping[str, Any]) -> RecordedFields:
        """Read what ``sample_tree`` records.

        Raises:
            ConfigError: a field every sampler writes is missing, or only one of
                ``prev_action`` and ``prev_reward`` is there.
        """
        missing = [key for key in REQUIRED if key not in sample_tree]
        if missing:
            raise ConfigError(
                f"the sample tree lacks the fields {missing} that every sampler "
                "writes; build it with sample_tree_from_examples (or "
                "parllel.builders.build_sample_tree)"
            )
        if (fields.PREV_ACTION in sample_tree) != (fields.PREV_REWARD in sample_tree):
            raise ConfigError(
                f"the sample tree keeps only one of {fields.PREV_ACTION!r} and "
                f"{fields.PREV_REWARD!r}; samplers write both or neither"
            )
        env_info = sample_tree.get(fields.ENV_INFO)
        frames = sample_tree.get(fields.FRAMES)  # [k + T, B]
        T = len(sample_tree[fields.REWARD])
        return cls(
            previous=fields.PREV_ACTION in sample_tree,
            env_info=env_info is not None and len(env_info) > 0,
            final_observation=fields.FINAL_OBSERVATION in sample_tree,
            final_value=fields.FINAL_VALUE in sample_tree,
            bootstrap_value=fields.BOOTSTRAP_VALUE in sample_tree,
            valid=fields.VALID in sample_tree,
            initial_state=fields.INITIAL_STATE in sample_tree,
            frame_stack=None if frames is None else len(frames) - T,
        )
