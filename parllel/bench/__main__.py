"""Command line: ``python -m parllel.bench MODULE:FACTORY|ENV_ID [--envs 8,64] [--seconds S] ...``.

Prints the table of measurements, then the recommended layout per env count
(and policy) with the code that builds it and how it compares with
``suggest_layout_for``; ``--json`` adds one JSON object as the last line,
``--png PATH`` a bar chart. A layout or policy that raises is a row with its
error (in the table and the JSON); the others are still measured and
recommended. Exit status 2, with a message naming the problem, for bad
arguments, a factory that does not import, is not callable or raises, a
missing optional package, or when no layout ran at all (the table still
shows each one's error).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from parllel.bench.layouts import LAYOUT_NAMES
from parllel.bench.policies import POLICIES
from parllel.bench.recommend import DEFAULT_MARGIN
from parllel.bench.report import (
    format_recommendations,
    format_table,
    require_png,
    write_png,
)
from parllel.bench.run import run_bench
from parllel.errors import EnvError, ParllelError

PROG = "python -m parllel.bench"


def _env_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(
            f"env counts must be integers >= 1 separated by commas (e.g. 8,64), "
            f"got {text!r}"
        )
    return counts


def _positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
        return value

    return parse


def _names(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [part.strip() for part in text.split(",") if part.strip()]
        unknown = [name for name in names if name not in choices]
        if not names or unknown:
            raise argparse.ArgumentTypeError(
                f"choose from {', '.join(choices)} (comma-separated), got {text!r}"
            )
        return list(dict.fromkeys(names))  # each once, in the order given

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The tool's argument parser."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Time your env under each layout parllel offers (serial, process with "
            "a main-process share, workers only, rebalancing, alternating) and "
            "recommend one, with the call that builds it."
        ),
    )
    parser.add_argument(
        "factory",
        help="MODULE:FACTORY, a zero-argument callable returning a gymnasium env "
        "(e.g. gymnasium.envs.classic_control.cartpole:CartPoleEnv, "
        "mypkg.envs:make_env), or a registered gymnasium env id (Hopper-v5)",
    )
    parser.add_argument(
        "--envs",
        type=_env_counts,
        default=[8, 64],
        metavar="N[,N...]",
        help="env counts (default 8,64)",
    )
    parser.add_argument(
        "--seconds",
        type=_positive(float),
        default=1.0,
        metavar="S",
        help="timed seconds per measurement (default 1; a warm-up of a quarter "
        "of it comes first)",
    )
    parser.add_argument(
        "--policy",
        type=_names(POLICIES),
        default=["random"],
        metavar="random|mlp",
        help="random actions, a small torch MLP (needs torch), or both: random,mlp "
        "(default random)",
    )
    parser.add_argument(
        "--layouts",
        type=_names(LAYOUT_NAMES),
        default=None,
        metavar="NAME[,NAME...]",
        help=f"layouts to try, comma-separated (default: all of {', '.join(LAYOUT_NAMES)})",
    )
    parser.add_argument(
        "--batch-T",
        dest="batch_T",
        type=_positive(int),
        default=64,
        metavar="T",
        help="time steps per batch (default 64)",
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=DEFAULT_MARGIN,
        metavar="FRACTION",
        help="a simpler layout within this fraction of the fastest is recommended "
        f"(default {DEFAULT_MARGIN})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="also print one JSON object as the last line",
    )
    parser.add_argument(
        "--png", default=None, metavar="PATH", help="write a bar chart to this PNG file"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; return the exit status (0 if a layout ran; 2 with a
    message on stderr; 130 on Ctrl-C)."""
    args = build_parser().parse_args(argv)
    try:
        if args.png is not None:
            require_png()  # before minutes of measuring
        report = run_bench(
            args.factory,
            args.envs,
            seconds=args.seconds,
            policies=args.policy,
            batch_T=int(args.batch_T),
            layouts=args.layouts,
            margin=args.margin,
        )
        print(format_table(report))
        print()
        print(format_recommendations(report))
        if args.png is not None and report.anything_ran:
            print(f"\nwrote {write_png(report, args.png)}")
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (every cage closed)", file=sys.stderr)
        return 130
    except ParllelError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        if isinstance(error, EnvError) and error.worker_traceback:
            print(error.worker_traceback, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict()))
    if not report.anything_ran:
        first = report.measurements[0]
        print(
            f"{PROG}: error: no layout ran; {first.layout.describe()} "
            f"({first.policy} policy) raised {first.error}",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
