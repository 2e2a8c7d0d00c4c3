"""OpponentPool: frozen snapshots of a learner, sampled as self-play opponents.

The pool stores opaque snapshot objects (e.g. a CPU copy of a torch model's
state dict) with metadata, picks opponents by a strategy, and rates the
learner and every snapshot with openskill's Plackett-Luce model from game
outcomes. Everything, including the random generator, is in
:meth:`OpponentPool.state_dict`, so a resumed run picks the same opponents.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from parllel.errors import (
    ConfigError,
    MissingDependencyError,
    ParllelError,
)
from parllel.errors.base import install_hint
from parllel.validation import check_at_least, check_fraction

STRATEGIES = ("latest", "mostly_latest", "uniform", "rating")
"""Opponent sampling strategies of :class:`OpponentPool`."""

OUTCOMES = {"win": 0, "draw": 1, "loss": 2}
"""Game outcomes for the learner, as :meth:`OpponentPool.record` takes them."""

MIN_RATING_WEIGHT = 1e-3
"""Floor of an opponent's weight under the ``rating`` strategy (relative to 1)."""


def _openskill_model() -> Any:
    try:
        from openskill.models import PlackettLuce
    except ImportError as error:
        raise MissingDependencyError(
            "opponent ratings need the 'openskill' package: pip install openskill, "
            f"or {install_hint('multiagent')}"
        ) from error
    return PlackettLuce()


@dataclasses.dataclass
class SnapshotInfo:
    """Metadata of one snapshot in the pool.

    Attributes:
        id: the snapshot's id (0, 1, ... in order of :meth:`OpponentPool.add`).
        step: env step of training when it was added.
        games: games the learner played against it.
        mu: rating mean (openskill).
        sigma: rating uncertainty (openskill).
    """

    id: int
    step: int
    games: int
    mu: float
    sigma: float


def _checked_share(share: float | Sequence[float]) -> float | tuple[float, ...]:
    """A fixed opponent's share as a float in ``(0, 1)`` or a tuple of floats in ``[0, 1)``."""
    if isinstance(share, Sequence | np.ndarray):
        shares = tuple(float(x) for x in share)
        if not shares or not all(0.0 <= x < 1.0 for x in shares):
            raise ConfigError(
                f"per-seat shares of a fixed opponent must each be in [0, 1), got "
                f"{list(shares)}"
            )
        return shares
    return check_fraction(
        "a fixed opponent's share", share, allow_zero=False, allow_one=False
    )


class OpponentPool:
    """Frozen snapshots of the learner with ratings; picks self-play opponents.

    :meth:`sample` draws opponents by ``strategy`` (``"latest"``,
    ``"mostly_latest"``, ``"uniform"`` or ``"rating"``: even matches
    preferred); fixed opponents (:meth:`add_fixed`) get a fixed share of the
    games. :meth:`record` updates the openskill ratings; a full pool evicts its
    oldest snapshot. Details: docs/multiagent.md ("Opponent pool").

    Args:
        max_size: most snapshots held.
        strategy: one of :data:`STRATEGIES`.
        p_latest: probability of the newest snapshot under ``mostly_latest``.
        seed: seed of the pool's random generator.

    Raises:
        ConfigError: an unknown strategy, ``max_size < 1`` or ``p_latest``
            outside ``[0, 1]``.

    Example:
        >>> pool = OpponentPool(max_size=10, strategy="mostly_latest", seed=0)
        >>> first = pool.add(snapshot_state(agent), step=0)
        >>> opponent = int(pool.sample(1)[0])
        >>> pool.record(opponent, "win")
    """

    def __init__(
        self,
        max_size: int,
        strategy: str = "mostly_latest",
        p_latest: float = 0.8,
        seed: int | None = None,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ConfigError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        check_at_least("max_size", int(max_size))
        check_fraction("p_latest", p_latest)
        self.max_size = int(max_size)
        self.strategy = strategy
        self.p_latest = float(p_latest)
        self.rng = np.random.default_rng(seed)
        self._snapshots: OrderedDict[int, Any] = OrderedDict()
        self._info: OrderedDict[int, SnapshotInfo] = OrderedDict()
        self._evicted: OrderedDict[int, tuple[float, float]] = OrderedDict()
        self._next_id = 0
        self._fixed: OrderedDict[int, float | tuple[float, ...]] = OrderedDict()
        self._model: Any = None
        self.learner_mu, self.learner_sigma = 25.0, 25.0 / 3.0  # openskill defaults
        self.learner_games = 0

    # -- contents ----------------------------------------------------------------
    def __len__(self) -> int:
        """Snapshots of the learner held (fixed opponents not counted)."""
        return len(self._learner_ids())

    @property
    def fixed_shares(self) -> dict[int, float | tuple[float, ...]]:
        """Each fixed opponent's share (a float, or one per learner seat), by id."""
        return dict(self._fixed)

    @property
    def fixed_ids(self) -> list[int]:
        """Ids of the fixed opponents (:meth:`add_fixed`), in order of addition."""
        return list(self._fixed)

    def __contains__(self, snapshot_id: object) -> bool:
        return snapshot_id in self._snapshots

    @property
    def ids(self) -> list[int]:
        """Ids of the held snapshots and fixed opponents, oldest first."""
        return list(self._snapshots)

    def _learner_ids(self) -> list[int]:
        return [i for i in self._snapshots if i not in self._fixed]

    @property
    def latest_id(self) -> int:
        """Id of the newest snapshot of the learner."""
        self._check_not_empty()
        return self._learner_ids()[-1]

    def get(self, snapshot_id: int) -> Any:
        """The snapshot object of ``snapshot_id``."""
        if snapshot_id not in self._snapshots:
            raise ConfigError(self._unknown(snapshot_id))
        return self._snapshots[snapshot_id]

    def info(self, snapshot_id: int) -> SnapshotInfo:
        """The metadata of ``snapshot_id`` (a copy)."""
        if snapshot_id not in self._info:
            raise ConfigError(self._unknown(snapshot_id))
        return dataclasses.replace(self._info[snapshot_id])

    @property
    def learner_rating(self) -> float:
        """The learner's conservative rating ``mu - 3 * sigma`` (openskill's ordinal)."""
        return self.learner_mu - 3.0 * self.learner_sigma

    def add(self, snapshot: Any, step: int = 0) -> int:
        """Store ``snapshot`` (kept as given: pass a frozen copy); return its id.

        When the pool is full, the oldest snapshot is evicted first.
        """
        if len(self._learner_ids()) >= self.max_size:
            oldest = self._learner_ids()[0]
            info = self._info.pop(oldest)
            del self._snapshots[oldest]
            self._evicted[oldest] = (info.mu, info.sigma)
            while len(self._evicted) > self.max_size:
                self._evicted.popitem(last=False)
        return self._store(snapshot, int(step))

    def add_fixed(self, opponent: Any, share: float | Sequence[float]) -> int:
        """Add an opponent drawn for ``share`` of the games whatever the strategy.

        ``opponent`` is any object the opponent factory can build a handler from;
        it is never evicted, rated like a snapshot and checkpointed with the pool.
        ``share`` is one fraction, or one per seat of the learner (then
        :meth:`sample` needs the seats); see docs/multiagent.md ("Opponent pool").

        Raises:
            ConfigError: a share outside ``[0, 1)``, per-seat shares of differing
                lengths, or a total share >= 1 in some seat.
        """
        value = _checked_share(share)
        shares = [*self._fixed.values(), value]
        lengths = {len(x) for x in shares if isinstance(x, tuple)}
        if len(lengths) > 1:
            raise ConfigError(
                f"per-seat shares of the fixed opponents must all have one entry "
                f"per seat; got lengths {sorted(lengths)}"
            )
        seats = lengths.pop() if lengths else 1
        total = np.sum([np.broadcast_to(x, seats) for x in shares], axis=0)
        if total.max() >= 1.0:
            raise ConfigError(
                f"adding share {share} brings the fixed opponents' shares to "
                f"{np.round(total, 6).tolist()} (per seat); they must stay below 1 "
                f"together in every seat, the rest of the games being against "
                f"learner snapshots"
            )
        opponent_id = self._store(opponent, 0)
        self._fixed[opponent_id] = value
        return opponent_id

    def _store(self, snapshot: Any, step: int) -> int:
        snapshot_id = self._next_id
        self._next_id += 1
        self._snapshots[snapshot_id] = snapshot
        self._info[snapshot_id] = SnapshotInfo(
            snapshot_id, step, 0, self.learner_mu, self.learner_sigma
        )
        return snapshot_id

    # -- sampling ----------------------------------------------------------------
    def sample(self, n: int = 1, seats: Any = None) -> np.ndarray:
        """Ids of ``n`` opponents (int64), drawn by the pool's strategy.

        ``seats`` (``n`` ints) are the learner's seats in those games; they
        are needed when a fixed opponent has per-seat shares.

        Raises:
            ParllelError: the pool holds no snapshot.
            ConfigError: per-seat shares without ``seats``, or a seat beyond
                them.
        """
        self._check_not_empty()
        chosen = self._sample_snapshots(n)
        if self._fixed:
            fixed = np.fromiter(self._fixed, np.int64, len(self._fixed))
            edges = np.cumsum(self._share_table(n, seats), axis=1)
            draw = self.rng.random(n)
            pick = (draw[:, None] >= edges).sum(axis=1)
            chosen = np.where(
                pick < len(fixed), fixed[np.minimum(pick, len(fixed) - 1)], chosen
            )
        return chosen

    def _share_table(self, n: int, seats: Any) -> np.ndarray:
        """``[n, fixed]`` share of each fixed opponent in each of the ``n`` games."""
        columns = []
        for share in self._fixed.values():
            if not isinstance(share, tuple):
                columns.append(np.full(n, share))
                continue
            if seats is None:
                raise ConfigError(
                    "a fixed opponent has per-seat shares: pass the learner's "
                    "seats to OpponentPool.sample(n, seats)"
                )
            seats = np.asarray(seats, np.int64)
            if seats.shape != (n,) or (
                n and not 0 <= seats.min() <= seats.max() < len(share)
            ):
                raise ConfigError(
                    f"seats must be {n} ints in [0, {len(share)}) (one share per "
                    f"seat), got {seats.tolist()}"
                )
            columns.append(np.asarray(share)[seats])
        return np.stack(columns, axis=1)

    def _sample_snapshots(self, n: int) -> np.ndarray:
        learner_ids = self._learner_ids()
        ids = np.asarray(learner_ids, np.int64)
        if self.strategy == "latest" or len(ids) == 1:
            return np.full(n, ids[-1], np.int64)
        if self.strategy == "uniform":
            return ids[self.rng.integers(0, len(ids), n)]
        if self.strategy == "mostly_latest":
            latest = self.rng.random(n) < self.p_latest
            older = ids[self.rng.integers(0, len(ids) - 1, n)]
            return np.where(latest, ids[-1], older)
        weights = self.rating_weights()[: len(ids)]
        return self.rng.choice(ids, size=n, p=weights / weights.sum())

    def rating_weights(self) -> np.ndarray:
        """Unnormalized ``rating``-strategy weights of the learner's snapshots, oldest first."""
        model = self._rating_model()
        learner = model.rating(mu=self.learner_mu, sigma=self.learner_sigma)
        weights = []
        for snapshot_id in self._learner_ids():
            info = self._info[snapshot_id]
            opponent = model.rating(mu=info.mu, sigma=info.sigma)
            p_win = model.predict_win([[learner], [opponent]])[0]
            weights.append(max(4.0 * p_win * (1.0 - p_win), MIN_RATING_WEIGHT))
        return np.asarray(weights)

    # -- outcomes ----------------------------------------------------------------
    def record(self, snapshot_id: int, outcome: str) -> None:
        """Rate a finished game: ``outcome`` (``"win"``, ``"draw"``, ``"loss"``)
        is the learner's, against snapshot ``snapshot_id``.

        Raises:
            ConfigError: an unknown outcome, or a snapshot never added or
                evicted long ago.
        """
        if outcome not in OUTCOMES:
            raise ConfigError(
                f"outcome must be one of {list(OUTCOMES)}, got {outcome!r}"
            )
        info = self._info.get(snapshot_id)
        if info is None and snapshot_id not in self._evicted:
            raise ConfigError(self._unknown(snapshot_id))
        mu, sigma = (info.mu, info.sigma) if info else self._evicted[snapshot_id]
        model = self._rating_model()
        learner = model.rating(mu=self.learner_mu, sigma=self.learner_sigma)
        opponent = model.rating(mu=mu, sigma=sigma)
        ranks = {"win": [0, 1], "draw": [0, 0], "loss": [1, 0]}[outcome]
        [[learner], [opponent]] = model.rate([[learner], [opponent]], ranks=ranks)
        self.learner_mu, self.learner_sigma = float(learner.mu), float(learner.sigma)
        self.learner_games += 1
        if info is not None:
            info.mu, info.sigma = float(opponent.mu), float(opponent.sigma)
            info.games += 1
        else:
            self._evicted[snapshot_id] = (float(opponent.mu), float(opponent.sigma))

    # -- checkpoints -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Snapshots, metadata, ratings, counters and the random generator's state."""
        return {
            "snapshots": [
                {**dataclasses.asdict(self._info[i]), "snapshot": s}
                for i, s in self._snapshots.items()
            ],
            "evicted": [[i, mu, sigma] for i, (mu, sigma) in self._evicted.items()],
            "next_id": self._next_id,
            "fixed": [
                [i, list(share) if isinstance(share, tuple) else share]
                for i, share in self._fixed.items()
            ],
            "learner": [self.learner_mu, self.learner_sigma, self.learner_games],
            "rng": self.rng.bit_generator.state,
            "strategy": self.strategy,
            "max_size": self.max_size,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (the strategy and size stay
        this pool's; a saved pool larger than ``max_size`` is refused).

        Raises:
            ConfigError: the saved pool holds more snapshots than ``max_size``.
        """
        entries = state["snapshots"]
        fixed = {int(i) for i, _ in state.get("fixed", [])}
        if len([e for e in entries if e["id"] not in fixed]) > self.max_size:
            raise ConfigError(
                f"the saved pool holds {len(entries)} snapshots, more than this "
                f"pool's max_size={self.max_size}"
            )
        self._snapshots = OrderedDict()
        self._info = OrderedDict()
        for entry in entries:
            entry = dict(entry)
            snapshot = entry.pop("snapshot")
            info = SnapshotInfo(**entry)
            self._snapshots[info.id] = snapshot
            self._info[info.id] = info
        self._evicted = OrderedDict(
            (int(i), (float(mu), float(sigma))) for i, mu, sigma in state["evicted"]
        )
        self._next_id = int(state["next_id"])
        self._fixed = OrderedDict(
            (int(i), _checked_share(x)) for i, x in state.get("fixed", [])
        )
        mu, sigma, games = state["learner"]
        self.learner_mu, self.learner_sigma = float(mu), float(sigma)
        self.learner_games = int(games)
        self.rng.bit_generator.state = state["rng"]

    # -- helpers -----------------------------------------------------------------
    def _rating_model(self) -> Any:
        if self._model is None:
            self._model = _openskill_model()
        return self._model

    def _check_not_empty(self) -> None:
        if not self._learner_ids():
            raise ParllelError(
                "the opponent pool is empty: add a snapshot of the learner first"
            )

    def _unknown(self, snapshot_id: Any) -> str:
        return (
            f"no snapshot {snapshot_id!r} in the opponent pool (it holds "
            f"{self.ids}; ids are never reused, evicted ones are gone)"
        )
