"""SelfPlay: a learner against frozen snapshots of itself, one game per env.

:class:`SelfPlay` is a :class:`~parllel.agents.Handler` over ``[B, A]`` rows
(the multi-agent sample tree) built from the learner's handler, an opponent
factory and an :class:`~parllel.multiagent.OpponentPool`. At the start of
every env's episode it seats the learner uniformly at random and gives the
other seats an opponent drawn from the pool; when the episode ends it
records the learner's win, draw or loss against that opponent. Opponents
infer in batches: all envs playing the same snapshot form one
:class:`~parllel.multiagent.PolicyMapping` policy, so one call per distinct
snapshot and step.

The rest of self-play is where the layers put it: the runner callback that
snapshots the learner (:class:`~parllel.runners.SelfPlayCallback`, above
this package) and the torch snapshots and opponents
(:mod:`parllel.torch.selfplay`; the core does not import torch).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from parllel.agents.base import AgentExample, Handler
from parllel.agents.state import ALL, as_index
from parllel.errors import ConfigError
from parllel.multiagent.opponent_pool import OpponentPool
from parllel.multiagent.policy_mapping import PolicyMapping
from parllel.validation import check_at_least, check_fraction

LEARNER = 0
"""Policy index of the learner's rows (``agent_info.policy_index``)."""

MIRROR = -2
"""``SelfPlay.opponent`` of an env whose game the learner plays in every seat."""


def game_outcome(agent_returns: Any, seat: int) -> str:
    """``"win"``, ``"draw"`` or ``"loss"``: the return of ``seat`` against the
    best return of the other seats."""
    returns = np.asarray(agent_returns, dtype=np.float64)
    mine = returns[seat]
    best_other = np.delete(returns, seat).max()
    return "win" if mine > best_other else "draw" if mine == best_other else "loss"


class SelfPlay:
    """A learner Handler playing against snapshots from an opponent pool.

    A Handler over ``[B, A]`` rows: the learner's rows have
    ``agent_info.policy_index == 0``, the opponents' the index of the batch
    their snapshot is inferred in. ``opponent_factory(snapshot, n_rows)``
    builds an opponent's handler; checkpoint the SelfPlay as a runner
    checkpoint object. The seating, the handler cache, mirror games, the
    metrics and every argument are described in docs/multiagent.md
    ("Self-play").

    Raises:
        ConfigError: a bad argument, a handler not built for ``n_envs *
            n_agents`` rows, or episodes without ``agent_returns`` (use
            ``traj_info_type=MultiAgentTrajInfo``).

    Example:
        >>> selfplay = SelfPlay(TorchHandler(agent, n_envs=B * 2),
        ...                     opponent_factory(agent), OpponentPool(20, seed=0),
        ...                     n_envs=B, n_agents=2,
        ...                     snapshot_learner=lambda: snapshot_state(agent))
    """

    def __init__(
        self,
        learner: Handler,
        opponent_factory: Callable[[Any, int], Handler],
        pool: OpponentPool,
        n_envs: int,
        n_agents: int,
        *,
        snapshot_learner: Callable[[], Any] | None = None,
        handler_cache_size: int = 4,
        window: int = 100,
        mirror_share: float = 0.0,
        seed: int | None = None,
    ) -> None:
        if int(n_agents) < 2:
            raise ConfigError(f"self-play needs n_agents >= 2 seats, got {n_agents}")
        check_at_least("handler_cache_size", int(handler_cache_size), minimum=0)
        check_at_least("window (games)", int(window))
        check_fraction("mirror_share", mirror_share, allow_one=False)
        n_rows = int(n_envs) * int(n_agents)
        if int(learner.n_envs) != n_rows:
            raise ConfigError(
                f"the learner's handler is built for n_envs={learner.n_envs} rows; "
                f"SelfPlay needs one row per seat of every game, n_envs * n_agents "
                f"= {n_envs} * {n_agents} = {n_rows} (e.g. "
                f"TorchHandler(agent, n_envs={n_rows}))"
            )
        self.mirror_share = float(mirror_share)
        self.learner = learner
        self.opponent_factory = opponent_factory
        self.pool = pool
        self.snapshot_learner = snapshot_learner
        self.handler_cache_size = int(handler_cache_size)
        self.mapping = PolicyMapping(
            [learner], n_envs, n_agents, value_policies=[LEARNER]
        )
        self.n_envs, self.n_agents = self.mapping.n_envs, self.mapping.n_agents
        self.rng = np.random.default_rng(seed)
        self.seat = np.zeros(self.n_envs, np.int64)
        self.opponent = np.full(self.n_envs, -1, np.int64)  # snapshot id per env
        self._slot_snapshot: list[int | None] = [None]  # policy index -> snapshot
        self._handlers: OrderedDict[int, Handler] = OrderedDict()
        self._started = False
        self.recent: deque[str] = deque(maxlen=int(window))
        self.total = dict.fromkeys(("win", "draw", "loss"), 0)
        self.mirror_games = 0

    # -- games -------------------------------------------------------------------
    def start_games(self, env_indices: Any = None) -> None:
        """Start new games in ``env_indices`` (all if None): seat the learner,
        draw opponents (the games they were playing are not recorded)."""
        index = as_index(env_indices)
        envs = np.arange(self.n_envs)[index] if isinstance(index, slice) else index
        envs = np.unique(np.asarray(envs, dtype=np.int64))
        if not len(envs):
            return
        if not len(self.pool) and self.snapshot_learner is not None:
            self.pool.add(self.snapshot_learner(), step=0)
        self._check_seat_shares()
        seats = self.rng.integers(0, self.n_agents, len(envs))
        mirror = np.zeros(len(envs), bool)
        if self.mirror_share > 0:
            mirror = self.rng.random(len(envs)) < self.mirror_share
        opponents = self.pool.sample(int((~mirror).sum()), seats=seats[~mirror])
        self.opponent[envs] = -1  # their slots may be reused now
        self.opponent[envs[mirror]] = MIRROR
        for env in envs[mirror]:
            self.seat[env] = 0
            self.mapping.assign(int(env), np.full(self.n_agents, LEARNER))
        for env, seat, snapshot_id in zip(envs[~mirror], seats[~mirror], opponents):
            slot = self._slot_for(int(snapshot_id))
            self.opponent[env], self.seat[env] = snapshot_id, seat
            row = np.full(self.n_agents, slot)
            row[seat] = LEARNER
            self.mapping.assign(int(env), row)
        self._trim_cache()
        self._started = True

    def _check_seat_shares(self) -> None:
        """Per-seat shares of fixed opponents must have one entry per seat."""
        for opponent_id, share in self.pool.fixed_shares.items():
            if isinstance(share, tuple) and len(share) != self.n_agents:
                raise ConfigError(
                    f"fixed opponent {opponent_id} has {len(share)} per-seat shares "
                    f"{list(share)}, but the games have n_agents={self.n_agents} "
                    f"seats: give one share per seat of the learner"
                )

    def episodes_ended(self, traj_infos: Iterable[Any]) -> None:
        """Record the outcomes of finished games and start new ones in their envs.

        Episodes cut because a worker died (``traj_info.lost``) are not
        recorded; their envs start new games too.
        """
        ended = []
        for traj_info in traj_infos:
            env = int(traj_info.env_index)
            ended.append(env)
            if not hasattr(traj_info, "agent_returns"):
                raise ConfigError(
                    f"self-play reads each seat's return from the episodes' "
                    f"agent_returns, which {type(traj_info).__name__} does not "
                    "have: build the cages with traj_info_type=MultiAgentTrajInfo "
                    "(from parllel.multiagent)"
                )
            lost = bool(getattr(traj_info, "lost", False))
            if self.opponent[env] == MIRROR:
                self.mirror_games += not lost  # counted, never rated
                continue
            if lost or self.opponent[env] < 0:
                continue
            outcome = game_outcome(traj_info.agent_returns, int(self.seat[env]))
            self.recent.append(outcome)
            self.total[outcome] += 1
            try:
                self.pool.record(int(self.opponent[env]), outcome)
            except ConfigError:
                pass  # evicted long ago: its rating is forgotten
        if ended:
            self.start_games(np.asarray(ended, dtype=np.int64))

    def metrics(self) -> dict[str, float]:
        """Self-play statistics.

        ``selfplay/games`` (games recorded so far), ``selfplay/learner_rating``
        (openskill's conservative ``mu - 3 sigma``), ``selfplay/pool_size``,
        ``selfplay/mirror_games`` (games of the learner against itself);
        once a game ended, ``selfplay/win_rate``, ``draw_rate`` and
        ``loss_rate`` over the last ``window`` games.
        """
        metrics = {
            "selfplay/games": float(sum(self.total.values())),
            "selfplay/learner_rating": float(self.pool.learner_rating),
            "selfplay/pool_size": float(len(self.pool)),
            "selfplay/mirror_games": float(self.mirror_games),
        }
        if self.recent:
            for outcome in ("win", "draw", "loss"):
                count = sum(1 for o in self.recent if o == outcome)
                metrics[f"selfplay/{outcome}_rate"] = count / len(self.recent)
        return metrics

    # -- opponent batches ----------------------------------------------------------
    def _slot_for(self, snapshot_id: int) -> int:
        """The policy index whose handler plays ``snapshot_id`` (one per snapshot)."""
        if snapshot_id in self._slot_snapshot:
            return self._slot_snapshot.index(snapshot_id)
        handler = self._handler(snapshot_id)
        in_use = set(self.opponent[self.opponent >= 0].tolist())
        for slot in range(1, len(self._slot_snapshot)):
            if self._slot_snapshot[slot] not in in_use:
                self.mapping.set_policy(slot, handler)
                self._slot_snapshot[slot] = snapshot_id
                return slot
        self._slot_snapshot.append(snapshot_id)
        return self.mapping.add_policy(handler)

    def _handler(self, snapshot_id: int) -> Handler:
        handler = self._handlers.get(snapshot_id)
        if handler is None:
            n_rows = self.mapping.n_rows
            handler = self.opponent_factory(self.pool.get(snapshot_id), n_rows)
            if int(handler.n_envs) != n_rows:
                raise ConfigError(
                    f"opponent_factory(snapshot, n_rows) must build a handler for "
                    f"n_rows = n_envs * n_agents = {self.n_envs} * {self.n_agents} "
                    f"= {n_rows} rows; it built a {type(handler).__name__} with "
                    f"n_envs={handler.n_envs} (snapshot {snapshot_id})"
                )
            self._handlers[snapshot_id] = handler
        self._handlers.move_to_end(snapshot_id)
        return handler

    def _trim_cache(self) -> None:
        in_use = set(self.opponent[self.opponent >= 0].tolist())
        idle = [i for i in self._handlers if i not in in_use]  # oldest use first
        for snapshot_id in idle[: max(0, len(idle) - self.handler_cache_size)]:
            del self._handlers[snapshot_id]
        for slot, held in enumerate(self._slot_snapshot):
            if slot and held not in in_use:
                self._slot_snapshot[slot] = None  # its handler may be rebuilt

    # -- Handler protocol (the learner's, routed by the mapping) -------------------
    @property
    def recurrent(self) -> bool:
        """Always False (feed-forward policies only)."""
        return False

    @property
    def mode(self) -> str:
        """The learner's mode."""
        return self.learner.mode

    def set_mode(self, mode: str) -> None:
        """Switch the learner's mode (opponents keep sampling)."""
        self.learner.set_mode(mode)

    def example_outputs(
        self, observation: Any, action: Any = None, reward: Any = None
    ) -> AgentExample:
        """One env's outputs (``[A, ...]``), with ``agent_info.policy_index``."""
        return self.mapping.example_outputs(observation, action, reward)

    def step(
        self,
        observation: Any,
        prev_action: Any,
        prev_reward: Any,
        *,
        out_action: Any,
        out_agent_info: Any,
        env_indices: Any = ALL,
    ) -> None:
        """Actions of the learner and the opponents (games start if none has)."""
        if not self._started:
            self.start_games()
        self.mapping.step(
            observation,
            prev_action,
            prev_reward,
            out_action=out_action,
            out_agent_info=out_agent_info,
            env_indices=env_indices,
        )

    def value(
        self,
        observation: Any,
        prev_action: Any,
        prev_reward: Any,
        env_indices: Any = ALL,
    ) -> np.ndarray:
        """The learner's values ``[n, A]`` at its seats (0 at the opponents')."""
        return self.mapping.value(observation, prev_action, prev_reward, env_indices)

    def reset(self, env_indices: Any = None) -> None:
        """Start new games in ``env_indices`` (all if None)."""
        self.start_games(env_indices)

    def reset_one(self, env_index: int) -> None:
        """Start a new game in one env."""
        self.start_games([int(env_index)])

    def write_state(self, out: Any) -> None:
        """Nothing to write: no recurrent state."""

    # -- checkpoints -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The pool's state, the seat generator's state and the outcome counters."""
        return {
            "pool": self.pool.state_dict(),
            "rng": self.rng.bit_generator.state,
            "total": dict(self.total),
            "recent": list(self.recent),
            "mirror_games": self.mirror_games,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; every env starts a new game at the next
        :meth:`reset` (or step)."""
        self.pool.load_state_dict(state["pool"])
        self.rng.bit_generator.state = state["rng"]
        self.total = {k: int(v) for k, v in state["total"].items()}
        self.recent.clear()
        self.recent.extend(state["recent"])
        self.mirror_games = int(state.get("mirror_games", 0))
        self.opponent[:] = -1
        self._handlers.clear()
        self._slot_snapshot = [None] * len(self._slot_snapshot)
        self._started = False
