"""The sections of benchmarks/device_check.py that run an agent: sync, race,
collect, ppo.

Each ``*_section`` returns ``run(box, out)``, which fills ``out`` as it
measures and leaves what no longer fits in the box (``box.fits``; see
``_sections``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from _sections import Box, Section, absent, attempt, skipped

from parllel import fields
from parllel.builders import (
    add_advantage_estimation,
    build_alternating_cages,
    build_sample_tree,
)
from parllel.cages import CageOptions, ProcessCage, ProcessLayout
from parllel.samplers import AlternatingSampler, FeedForwardSampler
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator, adam
from parllel.torch.models import build_actor_critic
from parllel.torch.transfer import Transfer, copy_into
from parllel.torch.utils import tree_to_device
from parllel.transforms import Compose


class BlockingTransfer(Transfer):
    """The path before page-locked copies: blocking copies from pageable
    memory, so every leaf waits for its own copy."""

    def __init__(self, device: str) -> None:
        super().__init__(device, pin_memory=False)

    def to_device(self, tensors: Any) -> Any:
        """Blocking copies to the device."""
        return tree_to_device(tensors, self.device) if self.copy_inputs else tensors

    def to_host(self, out: Any, value: Any) -> None:
        """Blocking copies back."""
        copy_into(out, value, non_blocking=False)


class NoWaitTransfer(Transfer):
    """The CUDA path with its one wait per step removed: the race check's
    broken variant (the host may read an action before its copy lands)."""

    def wait(self) -> None:
        """No wait."""


def _transfer(kind: str, device: str | None) -> tuple[str, Transfer]:
    """The device and transfer of a handler kind."""
    if kind == "cpu":
        return "cpu", Transfer("cpu")
    if kind == "cpu_staged":  # the CUDA path's copies and waits, on the CPU
        return "cpu", Transfer("cpu", copy_inputs=True)
    assert device is not None
    if kind == "cuda_blocking":
        return device, BlockingTransfer(device)
    return device, Transfer(device)


def _agent(spaces: Any, device: str) -> ActorCriticAgent:
    torch.manual_seed(0)
    model, distribution = build_actor_critic(spaces.observation, spaces.action)
    return ActorCriticAgent(model, distribution, device=device)


def _cages(factory: Callable, n: int, alternating: bool) -> list[Any]:
    if alternating:
        return list(build_alternating_cages(factory, n, options=CageOptions(seed=0)))
    return [
        ProcessCage(
            factory,
            n,
            options=CageOptions(seed=0),
            layout=ProcessLayout(main_process_envs=0),
        )
    ]


def delay_steps(agent: ActorCriticAgent, device: str) -> None:
    """Make every agent step finish late on the device: a sleep kernel
    queued after the step's outputs, before the handler's copies back (on
    CUDA; elsewhere copies are synchronous and nothing is delayed)."""
    if torch.device(device).type != "cuda":
        return
    step = agent.step

    def late_step(*args: Any) -> Any:
        out = step(*args)
        torch.cuda._sleep(20_000_000)  # about 10 ms of GPU cycles
        return out

    agent.step = late_step  # type: ignore[method-assign]


@contextmanager
def _handled(
    cages: list[Any], n: int, T: int, device: str, transfer: Transfer | None = None,
    delay: bool = False,
) -> Iterator[tuple[ActorCriticAgent, TorchHandler, Any]]:  # fmt: skip
    """The agent, handler and ``[T, n]`` sample tree of ``cages``; the
    handler (which releases the page-locked tree), the tree and the
    cages are closed afterwards, in that order."""
    try:
        agent = _agent(cages[0].spaces, device)
        if delay:
            delay_steps(agent, device)
        handler = TorchHandler(agent, n, device=device, seed=0, transfer=transfer)
        tree = build_sample_tree(cages, handler, T)
        try:
            yield agent, handler, tree
        finally:
            handler.close()  # unregisters the page-locked tree first
            tree.close()
    finally:
        for cage in cages:
            cage.close()


def measure_collect(
    factory: Callable, n: int, T: int, kind: str, device: str | None,
    alternating: bool, seconds: float,
) -> dict[str, Any]:  # fmt: skip
    """Steps/s of ``collect_batch`` (after one warm-up batch) and the share
    of the batch time spent in inference."""
    where, transfer = _transfer(kind, device)
    cages = _cages(factory, n, alternating)
    with _handled(cages, n, T, where, transfer) as (_, handler, tree):
        sampler_type = AlternatingSampler if alternating else FeedForwardSampler
        sampler = sampler_type(cages, handler, tree)
        sampler.collect_batch()
        sampler.phase_times.take()
        batches, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds or batches < 2:
            sampler.collect_batch()
            batches += 1
        elapsed = time.perf_counter() - start
        taken = sampler.phase_times.take()["seconds"]
        pinned = transfer.locked_nbytes  # before close releases it
    return {
        "sps": batches * T * n / elapsed,
        "inference_share": taken.get("inference", 0.0) / taken["batch"],
        "batch_ms": 1000 * elapsed / batches,
        "pinned_mib": pinned / 2**20,
    }


def _ratio(top: Any, bottom: Any, key: str = "sps") -> float | None:
    if not isinstance(top, dict) or not isinstance(bottom, dict):
        return None
    if key not in top or key not in bottom:
        return None
    return top[key] / bottom[key]


def collect_section(
    device: str | None, quick: bool, make_mlp_env: Callable, make_cnn_env: Callable
) -> Section:
    """``collect_batch`` with CPU and CUDA handlers, blocking and pinned,
    feed-forward and alternating, for an MLP and the Nature CNN."""
    kinds = [("cpu", False), ("cpu_staged", False), ("cpu", True)]
    if device is not None:
        kinds += [
            ("cuda_blocking", False), ("cuda_pinned", False),
            ("cuda_blocking", True), ("cuda_pinned", True),
        ]  # fmt: skip
    else:
        skipped("collect with a CUDA handler: no CUDA device")
    each = 0.3 if quick else 2.0

    def run(box: Box, out: dict) -> None:
        for model, factory, T in (("mlp", make_mlp_env, 64), ("cnn", make_cnn_env, 32)):
            if factory is None:
                absent(out, model, f"collect {model}: ale_py or cv2 is not installed")
                continue
            n, T = (4, 4) if quick else (64, T)
            rows: dict[str, Any] = out.setdefault(model, {})
            for kind, alternating in kinds:
                if quick and model == "cnn" and (kind, alternating) != ("cpu", False):
                    continue  # quick: the CNN once
                name = f"{kind}_{'alternating' if alternating else 'ff'}"
                if not box.fits(each + 8):
                    absent(rows, name, f"collect {model} {name}: time box")
                    continue
                rows[name] = attempt(
                    f"collect {model} {name}",
                    measure_collect, factory, n, T, kind, device, alternating, each,
                )  # fmt: skip
            rows["pinned_vs_blocking"] = _ratio(
                rows.get("cuda_pinned_ff"), rows.get("cuda_blocking_ff")
            )
            best = "cuda_pinned" if device is not None else "cpu"
            rows["alternating_vs_ff"] = _ratio(
                rows.get(f"{best}_alternating"), rows.get(f"{best}_ff")
            )
            ff = rows.get(f"{best}_ff")
            alt = rows.get(f"{best}_alternating")
            if (
                ff
                and alt
                and "error" not in ff
                and "error" not in alt
                and ff["inference_share"] > 0
            ):
                # inference time per batch that alternating took off the batch
                saved = ff["batch_ms"] - alt["batch_ms"]
                rows["inference_hidden"] = saved / (
                    ff["batch_ms"] * ff["inference_share"]
                )
        for key in ("pinned_vs_blocking", "alternating_vs_ff"):
            values = [
                rows[key]
                for rows in (out.get("cnn"), out.get("mlp"))
                if isinstance(rows, dict) and rows.get(key) is not None
            ]
            out[key] = values[0] if values else None

    return run


def ppo_run(
    factory: Callable, n: int, T: int, device: str, seconds: float
) -> dict[str, Any]:
    """PPO (4 epochs of 4 minibatches per batch) for ``seconds``: env steps/s
    end to end and ms per batch of every phase."""
    cages = [
        ProcessCage(
            factory,
            n,
            options=CageOptions(seed=0),
            layout=ProcessLayout(main_process_envs=0),
        )
    ]
    with _handled(cages, n, T, device) as (agent, handler, tree):
        transform = Compose(add_advantage_estimation(tree, 0.99, 0.95))
        sampler = FeedForwardSampler(cages, handler, tree, transform=transform)
        evaluator = ActorCriticEvaluator(agent.model, agent.distribution)
        ppo = PPO(evaluator, adam(agent.model.parameters(), 2.5e-4), device=device)
        sample = learn = 0.0
        batches, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds or batches < 2:
            t0 = time.perf_counter()
            batch, _ = sampler.collect_batch()
            t1 = time.perf_counter()
            ppo.optimize(batch)
            sample += t1 - t0
            learn += time.perf_counter() - t1
            batches += 1
        wall = time.perf_counter() - start
        phases = sampler.phase_times.per_record_ms()
    ms = {phase: round(value, 2) for phase, value in phases.items()}
    ms.update(
        sample=round(1000 * sample / batches, 2), learn=round(1000 * learn / batches, 2)
    )
    return {"env_sps": batches * n * T / wall, "batches": batches, "ms": ms}


def ppo_section(
    device: str | None, quick: bool, make_mlp_env: Callable, make_cnn_env: Callable
) -> Section:
    """PPO on CartPole and Pong for a fixed wall time each."""
    where = device or "cpu"
    plan = [
        ("cartpole", make_mlp_env, (4, 16) if quick else (64, 128), 1.0 if quick else 40.0),
        ("pong", make_cnn_env, (2, 8) if quick else (64, 128), 1.0 if quick else 80.0),
    ]  # fmt: skip

    def run(box: Box, out: dict) -> None:
        for name, factory, (n, T), seconds in plan:
            if factory is None:
                absent(out, name, f"ppo {name}: ale_py or cv2 is not installed")
            elif quick and name == "pong":
                absent(
                    out,
                    name,
                    "ppo pong: not in --quick (minutes of CNN updates on a CPU)",
                )
            elif not box.fits(seconds + 5):
                absent(out, name, f"ppo {name}: time box")
            else:
                out[name] = attempt(
                    f"ppo {name}", ppo_run, factory, n, T, where, seconds
                )
                out[name]["device"] = where

    return run


def _batches(
    make_env: Callable, transfer: Transfer, device: str, delay: bool = False
) -> tuple[list, Any]:
    """Three batches (observations, actions, values) from a process cage,
    and whether the tree's observations were page-locked (None off CUDA)."""
    n, T = 4, 8
    cages = [
        ProcessCage(
            make_env,
            n,
            options=CageOptions(seed=0),
            layout=ProcessLayout(n_workers=1, main_process_envs=0),
        )
    ]
    with _handled(cages, n, T, device, transfer, delay) as (_, handler, tree):
        sampler = FeedForwardSampler(cages, handler, tree)
        copies = []
        for _ in range(3):
            batch, _ = sampler.collect_batch()
            copies.append(
                [
                    np.array(batch[key].to_ndarray())
                    for key in (fields.OBSERVATION, fields.ACTION)
                ]
                + [np.array(batch[fields.AGENT_INFO][fields.VALUE].to_ndarray())]
            )
        pinned = None
        if torch.device(device).type == "cuda":
            observation = tree[fields.OBSERVATION].to_ndarray()[0]
            pinned = bool(torch.from_numpy(observation).is_pinned())
    return copies, pinned


def _equal(first: list, second: list) -> bool:
    return all(
        np.array_equal(a, b)
        for batch_a, batch_b in zip(first, second)
        for a, b in zip(batch_a, batch_b)
    )


def race_check(
    make_env: Callable,
    device: str,
    make_transfer: Callable[[bool], Transfer] | None = None,
) -> dict[str, Any]:
    """Batches with every agent step finishing late on the device
    (:func:`delay_steps`): with the wait they equal the blocking path's;
    without it the host reads actions before their copies land.

    ``make_transfer(wait)`` builds the transfer (default: the CUDA path, or
    :class:`NoWaitTransfer` without the wait); tests pass one over a fake
    CUDA runtime that delivers copies into locked memory only at a wait.
    """
    if make_transfer is None:

        def make_transfer(wait: bool) -> Transfer:
            kind = Transfer if wait else NoWaitTransfer
            return kind(device, copy_inputs=True)

    reference, _ = _batches(make_env, BlockingTransfer(device), device)
    waited, _ = _batches(make_env, make_transfer(True), device, delay=True)
    unwaited, _ = _batches(make_env, make_transfer(False), device, delay=True)
    return {
        "equal_with_wait": _equal(reference, waited),
        "corrupt_without_wait": not _equal(reference, unwaited),
    }


def race_section(device: str | None, make_env: Callable) -> Section:
    """The race a missing wait would open, shown on the device (module
    :func:`race_check`); on a CPU copies are synchronous: nothing to show."""

    def run(box: Box, out: dict) -> None:
        if device is None:
            absent(out, "corrupt_without_wait", "race: no CUDA device")
            out["equal_with_wait"] = None
            return
        out.update(race_check(make_env, device))
        out["shown"] = out["equal_with_wait"] and out["corrupt_without_wait"]

    return run


def sync_section(device: str | None, make_env: Callable) -> Section:
    """The non-blocking path collects the blocking path's batches, bit for bit."""
    where = device or "cpu"

    def run(box: Box, out: dict) -> None:
        reference, _ = _batches(make_env, BlockingTransfer(where), where)
        staged = Transfer(where, copy_inputs=True)
        candidate, pinned = _batches(make_env, staged, where)
        out["equal"] = _equal(reference, candidate)
        out["pinned"] = pinned
        out["device"] = where

    return run
