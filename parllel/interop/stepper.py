"""CageStepper: a cage with its own slots, stepped with gymnasium-style batches.

Both adapters (:class:`~parllel.interop.CageVectorEnv` and the SB3 one) drive
their cage through it: it owns the ``[n_envs]`` slots (shared memory for
process cages), writes batched actions into them, and reads observations,
rewards, flags and final observations back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from parllel import fields
from parllel.arrays import Storage
from parllel.cages import Cage, KeptInfos
from parllel.errors import CageStateError, ClosedCageError, ConfigError
from parllel.interop.batching import (
    allocate_for_space,
    batch_copy,
    batch_view,
    single_value,
    write_batch,
)
from parllel.tree import buffer_from_example, tree_close

__all__ = ["CageStepper"]


class CageStepper:
    """Steps ``cage`` with batched actions into slots it allocates and owns.

    Args:
        cage: a cage built with ``keep_infos=True``; a final-observation slot
            is allocated when its ``reset_mode`` is ``"auto"``.
        reward_dtype: dtype of the reward slot.
    """

    def __init__(self, cage: Cage, reward_dtype: Any = np.float64) -> None:
        if not cage.keep_infos:
            raise ConfigError("an interop adapter needs a cage with keep_infos=True")
        self.cage = cage
        self.n_envs = cage.n_envs
        self.observation_space = cage.spaces.observation
        self.action_space = cage.spaces.action
        storage: Storage = "shared" if cage.needs_shared_memory else "local"
        n = self.n_envs
        self.slots: dict[str, Any] = {
            fields.ACTION: allocate_for_space(self.action_space, n, storage),
            fields.OBSERVATION: allocate_for_space(self.observation_space, n, storage),
            fields.REWARD: buffer_from_example(
                np.dtype(reward_dtype).type(0), (n,), storage
            ),
            fields.TERMINATED: buffer_from_example(False, (n,), storage),
            fields.TRUNCATED: buffer_from_example(False, (n,), storage),
        }
        if cage.reset_mode == "auto":
            self.slots[fields.FINAL_OBSERVATION] = allocate_for_space(
                self.observation_space, n, storage
            )
        #: envs whose episode ended in the last step
        self.done = np.zeros(n, dtype=bool)
        self.pending = False
        self.closed = False
        self.started = False  # reset at least once

    # -- calls -------------------------------------------------------------------
    def reset(
        self,
        env_indices: Sequence[int] | None = None,
        seeds: Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> KeptInfos:
        """Reset envs (all or ``env_indices``) with seeds and options; the kept infos."""
        self.check_open("reset")
        self.check_idle("reset")
        self.cage.reset(
            self.slots[fields.OBSERVATION], env_indices, seeds=seeds, options=options
        )
        self.done[slice(None) if env_indices is None else list(env_indices)] = False
        self.started = True
        return self.cage.last_infos

    def step_async(self, actions: Any) -> None:
        """Write the batched ``actions`` into the action slots and start the step."""
        self.check_open("step_async")
        self.check_idle("step_async")
        if not self.started:
            raise CageStateError("call reset() before the first step()")
        slots = self.slots
        write_batch(self.action_space, slots[fields.ACTION], actions)
        self.cage.step_async(slots[fields.ACTION], slots)
        self.pending = True

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Finish the step; copies of its rewards, terminated and truncated flags."""
        self.check_open("step_wait")
        if not self.pending:
            raise CageStateError("step_wait() called without step_async()")
        self.pending = False
        self.cage.await_step()
        slots = self.slots
        rewards = np.array(slots[fields.REWARD].to_ndarray())
        terminated = np.array(slots[fields.TERMINATED].to_ndarray())
        truncated = np.array(slots[fields.TRUNCATED].to_ndarray())
        np.logical_or(terminated, truncated, out=self.done)
        return rewards, terminated, truncated

    # -- reading -----------------------------------------------------------------
    def observations(self, copy: bool) -> Any:
        """The observation batch: copied, or views the next step overwrites."""
        observation = self.slots[fields.OBSERVATION]
        if copy:
            return batch_copy(self.observation_space, observation)
        return batch_view(self.observation_space, observation)

    def final_observation(self, index: int) -> Any:
        """The last observation of env ``index``'s episode that ended in this step."""
        return single_value(
            self.observation_space, self.slots[fields.FINAL_OBSERVATION], index
        )

    # -- lifetime ----------------------------------------------------------------
    def close(self) -> None:
        """Close the cage (envs, worker processes) and the slots (idempotent)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.cage.close()
        finally:
            tree_close(self.slots)

    def check_open(self, call: str) -> None:
        """Raise ClosedCageError after :meth:`close`."""
        if self.closed:
            raise ClosedCageError(f"cannot {call}: the vector env is closed")

    def check_idle(self, call: str) -> None:
        """Raise CageStateError while a step is pending."""
        if self.pending:
            raise CageStateError(
                f"cannot {call} while stepping: call step_wait() first"
            )
