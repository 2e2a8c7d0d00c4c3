"""The recommended layout from measurements, next to suggest_layout_for's prediction.

:func:`~parllel.cages.building.suggest_layout_for` (what ``build_cage(...,
parallel="auto")`` runs) predicts from two costs timed on their own: one env
step and one synchronization with a worker. The tool measures whole batches
of each layout. Both answer the same question, serial or processes (and
with which split); :class:`Recommendation` holds both answers and says
whether they agree.

The recommended layout is the fastest measured, except that a simpler one
within ``margin`` of it wins (differences that small are within what
repeated measurements on one machine vary by): serial first, then the layout
``suggest_layout_for`` predicts. Layouts that failed, or that the env refuses
(load balancing of envs that cannot move), are never recommended.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from parllel.bench.layouts import Layout, suggested_layout
from parllel.bench.measure import Measurement
from parllel.cages.building import suggest_layout_for
from parllel.errors import ConfigError
from parllel.validation import check_at_least

__all__ = ["DEFAULT_MARGIN", "Recommendation", "predict_layout", "recommend"]

DEFAULT_MARGIN = 0.05  # a simpler layout this close to the fastest is preferred


def predict_layout(env_factory: Callable[..., Any], n_envs: int) -> Layout:
    """suggest_layout_for's answer for ``n_envs`` envs, as a :class:`Layout`."""
    return suggested_layout(n_envs, suggest_layout_for(env_factory, n_envs))


def _percent(ratio: float) -> str:
    return f"{100 * (ratio - 1):.0f}%"


@dataclass(frozen=True)
class Recommendation:
    """The layout to use for one env count and policy, and why.

    Attributes:
        chosen: the recommended layout's measurement.
        fastest: the fastest measurement (``chosen`` unless a simpler layout
            was within ``margin`` of it).
        predicted: suggest_layout_for's layout (None if it raised).
        predicted_measurement: the measurement of that layout, if it was
            among the layouts timed (and did not fail).
        margin: the relative margin within which a simpler layout wins.
        prediction_error: what suggest_layout_for raised, if it did.
    """

    chosen: Measurement
    fastest: Measurement
    predicted: Layout | None
    predicted_measurement: Measurement | None
    margin: float
    prediction_error: str | None = None

    @property
    def n_envs(self) -> int:
        """Envs of the layouts compared."""
        return self.chosen.layout.n_envs

    @property
    def policy(self) -> str:
        """The policy they were measured with."""
        return self.chosen.policy

    @property
    def agree(self) -> bool:
        """True if the tool and suggest_layout_for choose the same stepping
        (serial, or processes); False without a prediction."""
        return (
            self.predicted is not None
            and self.chosen.layout.stepping == self.predicted.stepping
        )

    @property
    def same_layout(self) -> bool:
        """True if they also chose the very same layout."""
        return self.chosen.layout == self.predicted

    def notes(self) -> list[str]:
        """Sentences explaining the choice and comparing it with the prediction."""
        chosen, fastest = self.chosen, self.fastest
        notes = []
        if chosen is not fastest and fastest.layout != self.predicted:
            ratio = fastest.steps_per_second / chosen.steps_per_second
            notes.append(
                f"{fastest.layout.describe()} measured {_percent(ratio)} faster, "
                f"within the {self.margin:.0%} margin: the simpler layout is "
                "recommended"
            )
        if self.predicted is None:
            notes.append(f"suggest_layout_for raised {self.prediction_error}")
            return notes
        predicted = self.predicted.describe()
        if self.same_layout:
            notes.append(f"suggest_layout_for predicts the same layout ({predicted})")
            return notes
        measured = self.predicted_measurement
        seen = (
            f"measured {measured.steps_per_second:,.0f} steps/s"
            if measured is not None
            else "not measured here"
        )
        if self.agree:
            notes.append(
                f"suggest_layout_for predicts {predicted} ({seen}): it agrees on "
                f"{self.predicted.stepping} stepping, with another layout"
            )
            return notes
        notes.append(f"suggest_layout_for predicts {predicted} ({seen}): it disagrees")
        if measured is not None and measured.steps_per_second > chosen.steps_per_second:
            ratio = measured.steps_per_second / chosen.steps_per_second
            notes.append(
                f"{predicted} measured {_percent(ratio)} faster than "
                f"{chosen.layout.describe()}, within the {self.margin:.0%} margin: "
                "too close to call on this machine, so the simpler layout is "
                "recommended"
            )
        elif measured is not None:
            ratio = chosen.steps_per_second / measured.steps_per_second
            notes.append(
                f"on this machine, now, {chosen.layout.describe()} measured "
                f"{_percent(ratio)} faster than {predicted}; suggest_layout_for "
                "weighs one env step (timed alone) against three synchronizations "
                "with a worker, and sees neither the sampler's own work per step, "
                "nor inference, nor other load on the cores"
            )
        return notes

    def to_dict(self, env_factory_name: str = "make_env") -> dict[str, Any]:
        """The recommendation as plain data (for JSON)."""
        predicted = self.predicted
        return {
            "n_envs": self.n_envs,
            "policy": self.policy,
            "layout": self.chosen.layout.to_dict(),
            "steps_per_second": round(self.chosen.steps_per_second, 1),
            "call": self.chosen.layout.builder_call(env_factory_name),
            "fastest": self.fastest.layout.name,
            "predicted": None if predicted is None else predicted.to_dict(),
            "predicted_call": (
                None if predicted is None else predicted.builder_call(env_factory_name)
            ),
            "agree": self.agree,
            "same_layout": self.same_layout,
            "notes": self.notes(),
        }


def recommend(
    measurements: Sequence[Measurement],
    predicted: Layout | None,
    margin: float = DEFAULT_MARGIN,
    prediction_error: str | None = None,
) -> Recommendation | None:
    """The layout to recommend among ``measurements`` (one env count, one policy).

    Only :attr:`~parllel.bench.measure.Measurement.eligible` ones compete
    (timed, not refused by the env); None if there is none.

    Raises:
        ConfigError: no measurements, or ones of different env counts or
            policies, or a negative margin.
    """
    if not measurements:
        raise ConfigError("recommend needs at least one measurement")
    groups = {(m.layout.n_envs, m.policy) for m in measurements}
    if len(groups) != 1:
        raise ConfigError(
            f"recommend compares one env count and policy at a time, got {sorted(groups)}"
        )
    check_at_least("margin", margin, minimum=0)
    eligible = [m for m in measurements if m.eligible]
    if not eligible:
        return None
    fastest = max(eligible, key=lambda m: m.steps_per_second)
    by_layout = {m.layout: m for m in eligible}
    chosen = fastest
    serial = [m for m in eligible if m.layout.name == "serial"]
    predicted_measurement = None if predicted is None else by_layout.get(predicted)
    for preferred in [*serial, predicted_measurement]:
        if preferred is not None and (
            preferred.steps_per_second * (1 + margin) >= fastest.steps_per_second
        ):
            chosen = preferred
            break
    return Recommendation(
        chosen, fastest, predicted, predicted_measurement, margin, prediction_error
    )
