"""Learner speed: µs per PPO minibatch and per SAC gradient step, five implementations.

**PPO** (CleanRL's MuJoCo settings, HalfCheetah shapes: 17 observations, 6
actions): separate 64x64 tanh actor and critic, a batch of 8 envs x 256
steps, 10 epochs of 32 minibatches of 64 samples, clipped surrogate and
clipped value loss (0.2), advantages normalized per minibatch, gradient norm
clipped at 0.5, Adam (eps 1e-5). One timed call is one whole update as each
library runs it; the figure is its time divided by its 320 minibatches.

**SAC** (HalfCheetah shapes): 256x256 ReLU actor and twin critics, batch 256,
a learned entropy coefficient, polyak target update, Adam. The figure is the
time of one gradient step (critic, actor, alpha and target). parllel's
contenders update on a batch already sampled; SB3's and SBX's ``train`` sample
their replay buffer inside the step, as they run it (``sac_replay_sample_us_sb3``
says how much of their step that is).

Contenders, interleaved round by round, each figure the median over rounds:

- ``torch_eager``: ``parllel.torch`` PPO / SAC;
- ``torch_compiled``: PPO with ``compile=True`` (``torch.compile`` of each
  minibatch's loss, backward and clipping, and of the optimizer step); SAC
  with its actor, critics and optimizer step compiled (SAC has no option:
  it did not measure 1.2x faster);
- ``jax``: ``parllel.jax`` PPO (the whole update one compiled program) / SAC
  (one compiled gradient step per call); SAC also as ``jax_scan8``: eight
  steps in one call (``lax.scan`` over eight stacked batches, what
  ``SAC.optimize`` runs for eight updates), per step;
- ``sb3``: Stable-Baselines3's ``PPO.train`` / ``SAC.train`` on a filled
  rollout / replay buffer (``sb3_no_validation``: the same with
  ``torch.distributions``' argument validation off, which SB3 leaves on;
  parllel's distributions do not use ``torch.distributions``, so there is
  nothing to switch off on its side);
- ``sbx``: SBX (``sbx-rl``, SB3 in JAX) the same way. SBX's PPO has no value
  clipping and steps actor and critic with separate optimizers.

One thread per learner: torch pinned to one thread, XLA to one
(``XLA_FLAGS``, set here before JAX is imported). A contender whose library
is missing is skipped with the reason, its keys null.

``sac_update_vs_flop_floor``: the fastest parllel JAX SAC step divided by
the same step's matmuls alone (:func:`sac_step_matmuls`), each ``[m, k] @
[k, n]`` row-major (no transposed operand: the layout XLA multiplies fastest),
as one compiled XLA program with the contenders' flags, timed in a round among
the SAC rounds: the update against its own matmuls in its own library (XLA's
CPU dot, mostly YNNPACK kernels in jax 0.10). Both in process time
(``sac_step_cpu_us``; both are one thread): on a machine shared with other
jobs a round's wall time counts the time the process waited for a core, and
rounds of different lengths (the floor's 0.05 s, the SAC rounds' seconds)
catch different loads; process time counts only its own running. Reverse-mode
differentiation runs, per dense layer ``fan_in -> fan_out`` and sample, a
forward ``x @ W`` (``2 * fan_in * fan_out`` FLOPs), a weight gradient
``x.T @ dy`` and an input gradient ``dy @ W.T`` (each as many), the last only
where the input needs a gradient (not for the observation). One step
(``policy_delay`` 1): the target (actor on s', twin target critics forward);
the critic loss (twin critics forward, weight gradients, input gradients but
the first layer's); the actor loss (actor forward, twin critics forward and
input gradients, their weights held, then the actor's weight and input
gradients): 582 MFLOP at batch 256 (XLA's cost analysis of the compiled step
counts 591 MFLOP with Adam's and the activations' elementwise work).
``sac_update_vs_torch_rate``: the same step against its FLOPs at torch's
single-thread 256x256 ``torch.mm`` rate (``matmul_256_gflops``, MKL/oneDNN),
the machine's rate for square products in another library.

Last line: one JSON object with ``ppo_minibatch_us_{contender}`` and
``sac_step_us_{contender}`` for the five contenders,
``{algo}_compile_s_{contender}`` (the first call's seconds, compilation
included; SB3 and SBX: their ``learn`` that fills the buffer and trains
once), ``sac_update_vs_flop_floor``, ``sac_update_vs_torch_rate`` and the
figures behind them (``sac_update_mflop``, ``sac_flop_floor_us``,
``matmul_gflops_xla``, ``matmul_256_gflops``).
``--quick``: tiny shapes, one round, torch.compile tracing only (its ``eager``
backend), for the test that runs every benchmark's quick mode.
Usage: python benchmarks/learner_speed.py [--quick] [--repeats N] [--algos ppo,sac]
"""

from __future__ import annotations

import argparse  # noqa: E402
import contextlib  # noqa: E402
import importlib  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from _common import have, interleaved_medians, pin_threads, print_result  # noqa: E402

pin_threads()
if have("jax"):  # XLA's pool of one thread, as torch's, before JAX computes
    from parllel.jax.cpu_backend import configure_cpu_backend

    configure_cpu_backend(threads=1)

import torch  # noqa: E402

from parllel import fields  # noqa: E402
from parllel.replays.transitions import ReplayBatch  # noqa: E402

CONTENDERS = ("torch_eager", "torch_compiled", "jax", "sb3", "sbx")


@dataclass(frozen=True)
class Shapes:
    """The work measured: HalfCheetah's spaces, CleanRL's PPO and SAC sizes."""

    observation: int = 17
    action: int = 6
    ppo_hidden: int = 64
    ppo_steps: int = 256  # T
    ppo_envs: int = 8  # B
    epochs: int = 10
    minibatches: int = 32
    sac_hidden: int = 256
    sac_batch: int = 256
    sac_steps: int = 20  # gradient steps per timed round

    @property
    def ppo_minibatches(self) -> int:
        """Minibatches per PPO update."""
        return self.epochs * self.minibatches

    def spaces(self) -> tuple[gym.spaces.Box, gym.spaces.Box]:
        """Observation and action spaces (actions in [-1, 1], as HalfCheetah)."""
        return (
            gym.spaces.Box(-np.inf, np.inf, (self.observation,), np.float32),
            gym.spaces.Box(-1.0, 1.0, (self.action,), np.float32),
        )


FULL = Shapes()
QUICK = Shapes(
    ppo_steps=16, epochs=2, minibatches=2, sac_hidden=32, sac_batch=32, sac_steps=2
)


class Skip(Exception):
    """A contender that cannot run here (its library is missing), with why."""


@dataclass
class Contender:
    """One implementation's timed call."""

    run: Callable[[], Any]  # one PPO update, or one SAC gradient step
    units: int  # PPO minibatches (or SAC steps) per call
    first_call_s: float  # the first call's seconds (compilation included)


def first_call(run: Callable[[], Any], units: int) -> Contender:
    """``run`` called once (it compiles), as a :class:`Contender`."""
    start = time.perf_counter()
    run()
    return Contender(run, units, time.perf_counter() - start)


class ShapesEnv(gym.Env):
    """An env with HalfCheetah's spaces and no dynamics, to fill SB3's buffers."""

    def __init__(self, shapes: Shapes) -> None:
        self.observation_space, self.action_space = shapes.spaces()
        self._rng = np.random.default_rng(0)
        self._t = 0

    def _observation(self) -> np.ndarray:
        return self._rng.normal(size=self.observation_space.shape).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self._t = 0
        return self._observation(), {}

    def step(self, action: Any) -> Any:
        self._t += 1
        reward = float(self._rng.normal())
        return self._observation(), reward, False, self._t >= 1000, {}


@contextlib.contextmanager
def distribution_validation(on: bool) -> Iterator[None]:
    """``torch.distributions``' default argument validation set to ``on`` inside."""
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(on)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(before)


def without_validation(run: Callable[[], Any]) -> Callable[[], Any]:
    """``run`` with ``torch.distributions``' argument validation off."""

    def wrapped() -> Any:
        with distribution_validation(False):
            return run()

    return wrapped


def compile_backend(quick: bool) -> str:
    """inductor (generated kernels); ``--quick`` traces only (seconds, not minutes)."""
    return "eager" if quick else "inductor"


# -- PPO ---------------------------------------------------------------------------


def ppo_batch(shapes: Shapes) -> dict[str, Any]:
    """A PPO batch ``[T, B]`` as a sampler's tree gives it (numpy arrays)."""
    rng = np.random.default_rng(0)
    T, B = shapes.ppo_steps, shapes.ppo_envs

    def normal(*shape: int) -> np.ndarray:
        return rng.normal(size=(T, B, *shape)).astype(np.float32)

    return {
        fields.OBSERVATION: normal(shapes.observation),
        fields.ACTION: np.tanh(normal(shapes.action)),
        fields.ADVANTAGE: normal(),
        fields.RETURN: normal(),
        fields.AGENT_INFO: {
            fields.LOG_PROB: normal() - shapes.action,  # about a unit Gaussian's
            fields.VALUE: normal(),
        },
    }


def ppo_torch(shapes: Shapes, quick: bool, compiled: bool) -> Contender:
    """parllel.torch PPO (``compiled``: ``compile=True``)."""
    from parllel.schedules import linear_schedule
    from parllel.torch.algos import PPO, ActorCriticEvaluator
    from parllel.torch.models import build_actor_critic

    torch.manual_seed(0)
    model, distribution = build_actor_critic(
        *shapes.spaces(),
        hidden_sizes=(shapes.ppo_hidden,) * 2,
        shared_trunk=False,
        init_log_std=0.0,
        orthogonal_init=True,
    )
    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        torch.optim.Adam(model.parameters(), lr=3e-4, eps=1e-5),
        learning_rate=linear_schedule(3e-4, 0.0),
        total_updates=1_000_000,
        clip_range=0.2,
        value_clip_range=0.2,
        value_loss_coef=0.5,  # x parllel's 0.5 x MSE: CleanRL's 0.5 x (0.5 x MSE)
        max_grad_norm=0.5,
        epochs=shapes.epochs,
        minibatches=shapes.minibatches,
        normalize_advantage=True,
        compile=compile_backend(quick) if compiled else False,
    )
    batch = ppo_batch(shapes)
    return first_call(lambda: ppo.optimize(batch), shapes.ppo_minibatches)


def ppo_jax(shapes: Shapes, quick: bool) -> Contender:
    """parllel.jax PPO: the whole update one compiled call."""
    if not have("parllel.jax.algos.ppo"):
        raise Skip("parllel.jax PPO does not import here (the jax extra)")
    import jax

    from parllel.jax.agents import ActorCriticAgent
    from parllel.jax.algos import PPO, adam
    from parllel.jax.models import build_actor_critic

    observation_space, action_space = shapes.spaces()
    network, distribution = build_actor_critic(
        observation_space,
        action_space,
        hidden_sizes=(shapes.ppo_hidden,) * 2,
        shared_trunk=False,
        init_log_std=0.0,
        orthogonal_init=True,
    )
    agent = ActorCriticAgent(
        network,
        distribution,
        example_observation=np.zeros((1, shapes.observation), np.float32),
        key=jax.random.key(0),
    )
    ppo = PPO(
        agent,
        adam(3e-4, eps=1e-5),
        learning_rate=lambda progress: 3e-4 * (1.0 - progress),
        total_updates=1_000_000,
        clip_range=0.2,
        value_clip_range=0.2,
        value_loss_coef=0.5,
        max_grad_norm=0.5,
        epochs=shapes.epochs,
        minibatches=shapes.minibatches,
        normalize_advantage=True,
    )
    batch = ppo_batch(shapes)
    return first_call(lambda: ppo.optimize(batch), shapes.ppo_minibatches)


def ppo_peer(shapes: Shapes, library: str, validate: bool = True) -> Contender:
    """SB3's or SBX's ``PPO.train`` on a rollout buffer it filled itself."""
    if not have(library):
        raise Skip(f"{library} is not installed (the bench extra)")
    from stable_baselines3.common.vec_env import DummyVecEnv

    PPO: Any = importlib.import_module(library).PPO
    if library == "sbx":
        import flax.linen

        activation: Any = flax.linen.tanh
        optimizer_kwargs: dict[str, Any] = {}  # SBX's Adam: eps 1e-5 already
    else:
        activation = torch.nn.Tanh
        optimizer_kwargs = {"eps": 1e-5}
    venv = DummyVecEnv([lambda: ShapesEnv(shapes)] * shapes.ppo_envs)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=shapes.ppo_steps,
        batch_size=shapes.ppo_steps * shapes.ppo_envs // shapes.minibatches,
        n_epochs=shapes.epochs,
        learning_rate=lambda remaining: 3e-4 * remaining,
        clip_range=0.2,
        clip_range_vf=0.2,  # SBX ignores it (no value clipping)
        ent_coef=0.0,
        vf_coef=0.25,  # CleanRL's 0.5 x (0.5 x MSE); SB3's value loss is the MSE
        max_grad_norm=0.5,
        policy_kwargs=dict(
            net_arch=dict(pi=[shapes.ppo_hidden] * 2, vf=[shapes.ppo_hidden] * 2),
            activation_fn=activation,
            log_std_init=0.0,
            ortho_init=True,
            optimizer_kwargs=optimizer_kwargs,
        ),
        seed=0,
        device="cpu",
        verbose=0,
    )
    start = time.perf_counter()
    model.learn(shapes.ppo_steps * shapes.ppo_envs)  # fills the buffer, trains once
    run = model.train if validate else without_validation(model.train)
    return Contender(run, shapes.ppo_minibatches, time.perf_counter() - start)


# -- SAC ---------------------------------------------------------------------------


def sac_arrays(shapes: Shapes) -> dict[str, np.ndarray]:
    """One SAC batch's fields (numpy)."""
    rng = np.random.default_rng(0)
    n = shapes.sac_batch
    return {
        "observation": rng.normal(size=(n, shapes.observation)).astype(np.float32),
        "action": rng.uniform(-1, 1, (n, shapes.action)).astype(np.float32),
        "reward": rng.normal(size=n).astype(np.float32),
        "next_observation": rng.normal(size=(n, shapes.observation)).astype(np.float32),
    }


def sac_replay_batch(shapes: Shapes, to_torch: bool) -> ReplayBatch:
    """A ``ReplayBatch`` of ``sac_batch`` random transitions (torch or numpy)."""
    n = shapes.sac_batch
    batch = ReplayBatch(
        **sac_arrays(shapes),
        terminated=np.zeros(n, bool),
        truncated=np.zeros(n, bool),
        discount=np.full(n, 0.99, np.float32),
        n_steps=np.ones(n, np.int64),
        indices=np.arange(n),
        weights=np.ones(n, np.float32),
    )
    if not to_torch:
        return batch
    leaves: list[Any] = [torch.as_tensor(leaf) for leaf in batch]
    return ReplayBatch(*leaves)


def sac_torch(shapes: Shapes, quick: bool, compiled: bool) -> Contender:
    """parllel.torch SAC (``compiled``: actor, critics and Adam's step compiled)."""
    from parllel.torch.agents import build_sac_agent
    from parllel.torch.algos import SAC
    from parllel.torch.algos.sac_setup import EntropyCoefficient

    torch.manual_seed(0)
    agent = build_sac_agent(*shapes.spaces(), hidden_sizes=(shapes.sac_hidden,) * 2)
    alpha = EntropyCoefficient(1.0)
    groups: list[dict[str, Any]] = [
        {"params": list(agent.actor.parameters()), "lr": 3e-4},
        {"params": list(agent.critic.parameters())},
        {"params": [alpha.log_alpha]},
    ]
    optimizer = torch.optim.Adam(groups, lr=1e-3)
    sac = SAC(agent, optimizer, alpha, tau=0.005)
    if compiled:
        backend = compile_backend(quick)
        agent.actor = torch.compile(agent.actor, backend=backend)  # type: ignore[assignment]
        agent.critic = torch.compile(agent.critic, backend=backend)  # type: ignore[assignment]
        sac.target_critic = torch.compile(sac.target_critic, backend=backend)
        optimizer.step = torch.compile(optimizer.step, backend=backend)  # type: ignore[method-assign]
    batch = sac_replay_batch(shapes, to_torch=True)
    return first_call(lambda: sac.update(batch), 1)


def sac_jax(shapes: Shapes, quick: bool, steps: int = 1) -> Contender:
    """parllel.jax SAC: ``steps`` compiled gradient steps per call (one
    ``lax.scan``)."""
    if not have("parllel.jax.algos.sac"):
        raise Skip("parllel.jax SAC does not import here (the jax extra)")

    from parllel.jax.agents import build_sac_agent
    from parllel.jax.algos import SAC, EntropyCoefficient, build_sac_optimizers
    from parllel.jax.algos.replay_updates import ReplayArrays

    agent = build_sac_agent(
        *shapes.spaces(), seed=0, hidden_sizes=(shapes.sac_hidden,) * 2
    )
    sac = SAC(
        agent,
        build_sac_optimizers(1e-3, actor_learning_rate=3e-4),
        EntropyCoefficient(1.0),
        seed=0,
        tau=0.005,
    )
    batches = ReplayArrays.stack(
        [sac_replay_batch(shapes, to_torch=False)] * steps, np.float32
    )
    return first_call(lambda: sac.update_batches(batches), steps)


def sac_peer(shapes: Shapes, library: str, validate: bool = True) -> Contender:
    """SB3's or SBX's ``SAC.train`` (one gradient step) on a filled replay buffer."""
    if not have(library):
        raise Skip(f"{library} is not installed (the bench extra)")
    from stable_baselines3.common.vec_env import DummyVecEnv

    SAC: Any = importlib.import_module(library).SAC
    extra = {"qf_learning_rate": 1e-3} if library == "sbx" else {}
    starts = 2 * shapes.sac_batch
    model = SAC(
        "MlpPolicy",
        DummyVecEnv([lambda: ShapesEnv(shapes)]),
        learning_rate=3e-4,
        buffer_size=10 * starts,
        learning_starts=starts,
        batch_size=shapes.sac_batch,
        tau=0.005,
        gamma=0.99,
        train_freq=1,
        gradient_steps=1,
        ent_coef="auto_1.0",
        policy_kwargs=dict(net_arch=[shapes.sac_hidden] * 2),
        seed=0,
        device="cpu",
        verbose=0,
        **extra,
    )
    start = time.perf_counter()
    model.learn(starts + 2)  # random steps fill the replay, then two updates

    def step() -> None:
        model.train(gradient_steps=1, batch_size=shapes.sac_batch)

    run = step if validate else without_validation(step)
    return Contender(run, 1, time.perf_counter() - start)


def sb3_replay_sample_us(shapes: Shapes, repeats: int) -> float | None:
    """µs of SB3's ``replay_buffer.sample(batch)`` (part of its SAC step)."""
    if not have("stable_baselines3"):
        return None
    from stable_baselines3.common.buffers import ReplayBuffer

    observation_space, action_space = shapes.spaces()
    buffer = ReplayBuffer(10_000, observation_space, action_space, device="cpu")
    rng = np.random.default_rng(0)
    for _ in range(2 * shapes.sac_batch):
        buffer.add(
            rng.normal(size=(1, shapes.observation)),
            rng.normal(size=(1, shapes.observation)),
            rng.uniform(-1, 1, (1, shapes.action)),
            np.zeros(1),
            np.zeros(1),
            [{}],
        )
    start = time.perf_counter()
    for _ in range(repeats * 20):
        buffer.sample(shapes.sac_batch)
    return (time.perf_counter() - start) / (repeats * 20) * 1e6


# -- the FLOP floor ------------------------------------------------------------------

FORWARD, INPUT_GRAD, WEIGHT_GRAD = "forward", "input_grad", "weight_grad"


@dataclass(frozen=True)
class Matmul:
    """One matmul of a SAC step, for ``batch`` samples through a dense layer
    ``fan_in -> fan_out`` of ``networks`` stacked networks (2: the twin critics):
    the layer's ``forward`` ``x @ W``, its ``input_grad`` ``dy @ W.T`` or its
    ``weight_grad`` ``x.T @ dy``."""

    kind: str
    networks: int
    fan_in: int
    fan_out: int

    def flops(self, batch: int) -> int:
        """``2 * batch * fan_in * fan_out`` per network."""
        return 2 * batch * self.networks * self.fan_in * self.fan_out

    def mkn(self, batch: int) -> tuple[int, int, int]:
        """``(m, k, n)`` of the product ``[m, k] @ [k, n]`` (per network)."""
        return {
            FORWARD: (batch, self.fan_in, self.fan_out),
            INPUT_GRAD: (batch, self.fan_out, self.fan_in),
            WEIGHT_GRAD: (self.fan_in, batch, self.fan_out),
        }[self.kind]


def sac_step_matmuls(shapes: Shapes) -> list[Matmul]:
    """The matmuls of one SAC gradient step (``policy_delay`` 1), as reverse-mode
    differentiation runs them (see the module docstring)."""
    hidden, observation, action = shapes.sac_hidden, shapes.observation, shapes.action
    # actor: trunk, then the mean and log-std heads; each critic: (s, a) -> Q
    actor = [
        (observation, hidden),
        (hidden, hidden),
        (hidden, action),
        (hidden, action),
    ]
    critic = [(observation + action, hidden), (hidden, hidden), (hidden, 1)]

    def passes(kind: str, layers: list[tuple[int, int]], networks: int) -> list[Matmul]:
        return [Matmul(kind, networks, fan_in, fan_out) for fan_in, fan_out in layers]

    return [
        # the target: the actor on s', the twin target critics at (s', a')
        *passes(FORWARD, actor, 1),
        *passes(FORWARD, critic, 2),
        # the critic loss: forward; backward to every weight, to the inputs of all
        # layers but the first (the data needs no gradient)
        *passes(FORWARD, critic, 2),
        *passes(WEIGHT_GRAD, critic, 2),
        *passes(INPUT_GRAD, critic[1:], 2),
        # the actor loss: the actor and the critics (their weights held) forward,
        # backward through the critics' inputs (the first layer's whole input, as
        # XLA computes it, of which the action's columns are kept), then the
        # actor's weights and inputs (not the observation's)
        *passes(FORWARD, actor, 1),
        *passes(FORWARD, critic, 2),
        *passes(INPUT_GRAD, critic, 2),
        *passes(WEIGHT_GRAD, actor, 1),
        *passes(INPUT_GRAD, actor[1:], 1),
    ]


def sac_update_flops(shapes: Shapes) -> float:
    """Matmul FLOPs of one SAC gradient step: the sum over :func:`sac_step_matmuls`."""
    return float(sum(m.flops(shapes.sac_batch) for m in sac_step_matmuls(shapes)))


def xla_floor_round(shapes: Shapes, number: int = 5) -> Callable[[], float]:
    """A round timing the SAC step's matmuls alone (:func:`sac_step_matmuls`,
    each ``[m, k] @ [k, n]`` row-major: no transposed operand) as one compiled
    XLA program under the contender's flags: µs per step."""
    import jax

    rng = np.random.default_rng(0)
    operands = []
    for matmul in sac_step_matmuls(shapes):
        m, k, n = matmul.mkn(shapes.sac_batch)
        lead = (matmul.networks,) if matmul.networks > 1 else ()
        operands.append(
            tuple(
                jax.device_put(rng.normal(size=(*lead, *s)).astype(np.float32))
                for s in ((m, k), (k, n))
            )
        )

    @jax.jit
    def matmuls(operands: Any) -> Any:
        return [a @ b for a, b in operands]

    jax.block_until_ready(matmuls(operands))

    def floor_us() -> float:
        start = time.process_time()
        for _ in range(number):
            jax.block_until_ready(matmuls(operands))
        return (time.process_time() - start) / number * 1e6

    return floor_us


def torch_matmul_round(number: int = 50) -> Callable[[], float]:
    """A round timing ``number`` single-thread 256x256 float32 ``torch.mm``:
    GFLOP/s of process time (the reference rate of torch's BLAS, beside XLA's)."""
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    out = torch.empty(256, 256)
    torch.mm(a, b, out=out)

    def gflops() -> float:
        start = time.process_time()
        for _ in range(number):
            torch.mm(a, b, out=out)
        return 2 * 256**3 * number / (time.process_time() - start) / 1e9

    return gflops


# -- the run ---------------------------------------------------------------------------


def build_contenders(
    algo: str, shapes: Shapes, quick: bool
) -> tuple[dict[str, Contender], dict[str, str]]:
    """Every contender of ``algo`` that runs here, and why the others do not."""
    builders: dict[str, Callable[[], Contender]]
    if algo == "ppo":
        builders = {
            "torch_eager": lambda: ppo_torch(shapes, quick, compiled=False),
            "torch_compiled": lambda: ppo_torch(shapes, quick, compiled=True),
            "jax": lambda: ppo_jax(shapes, quick),
            "sb3": lambda: ppo_peer(shapes, "stable_baselines3"),
            "sb3_no_validation": lambda: ppo_peer(
                shapes, "stable_baselines3", validate=False
            ),
            "sbx": lambda: ppo_peer(shapes, "sbx"),
        }
    else:
        builders = {
            "torch_eager": lambda: sac_torch(shapes, quick, compiled=False),
            "torch_compiled": lambda: sac_torch(shapes, quick, compiled=True),
            "jax": lambda: sac_jax(shapes, quick),
            "jax_scan8": lambda: sac_jax(shapes, quick, steps=8),
            "sb3": lambda: sac_peer(shapes, "stable_baselines3"),
            "sb3_no_validation": lambda: sac_peer(
                shapes, "stable_baselines3", validate=False
            ),
            "sbx": lambda: sac_peer(shapes, "sbx"),
        }
    contenders, skipped = {}, {}
    for name, build in builders.items():
        try:
            contenders[name] = build()
        except Skip as reason:
            skipped[name] = str(reason)
            print(f"{algo} {name}: skipped: {reason}", flush=True)
    return contenders, skipped


def timed(contender: Contender, calls: int, cpu_us: list[float]) -> Callable[[], float]:
    """A round of ``calls`` calls: wall µs per unit (minibatch or gradient
    step); the round's process-time µs per unit is appended to ``cpu_us``."""

    def round_us() -> float:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            contender.run()
        units = calls * contender.units
        cpu_us.append((time.process_time() - cpu) / units * 1e6)
        return (time.perf_counter() - start) / units * 1e6

    return round_us


def measure(
    algo: str,
    shapes: Shapes,
    quick: bool,
    repeats: int,
    result: dict[str, Any],
    extra: dict[str, Callable[[], float]] | None = None,
) -> dict[str, float]:
    """Time ``algo``'s contenders interleaved (with the ``extra`` rounds, whose
    medians come back too, and each contender's median process time as
    ``cpu:{name}``); their keys go into ``result``."""
    contenders, skipped = build_contenders(algo, shapes, quick)
    calls = 1 if algo == "ppo" else shapes.sac_steps
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    rounds = {name: timed(c, calls, cpu[name]) for name, c in contenders.items()}
    medians = interleaved_medians({**rounds, **(extra or {})}, repeats)
    medians.update({f"cpu:{name}": statistics.median(v) for name, v in cpu.items()})
    key = "ppo_minibatch_us" if algo == "ppo" else "sac_step_us"
    for name in (*CONTENDERS, "sb3_no_validation", "jax_scan8"):
        if name == "jax_scan8" and algo == "ppo":
            continue
        us = medians.get(name)
        result[f"{key}_{name}"] = None if us is None else round(us, 1)
        if name in contenders:
            result[f"{algo}_compile_s_{name}"] = round(contenders[name].first_call_s, 2)
            print(f"{algo:>4} {name:>18}: {us:10.1f} µs", flush=True)
    result[f"{algo}_skipped"] = skipped
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run for tests")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument(
        "--algos", default="ppo,sac", help="which to measure: ppo, sac or both"
    )
    args = parser.parse_args()
    quick = args.quick
    shapes = QUICK if quick else FULL
    repeats = args.repeats or (1 if quick else 7)
    result: dict[str, Any] = {"torch": torch.__version__, "quick": quick}
    if have("jax"):
        import jax

        result["jax"] = jax.__version__
    algos = args.algos.split(",")
    if "ppo" in algos:
        measure("ppo", shapes, quick, repeats, result)
    if "sac" not in algos:
        print_result(result)
        return
    flops = sac_update_flops(shapes)
    extra = {"torch_matmul_gflops": torch_matmul_round()}
    if have("parllel.jax.algos.sac"):
        extra["floor"] = xla_floor_round(shapes)
    sac = measure("sac", shapes, quick, repeats, result, extra)
    floor_us = sac.get("floor")
    ours: dict[str, float] = {
        k: sac[f"cpu:{k}"] for k in ("jax", "jax_scan8") if k in sac
    }
    best = min(ours, key=ours.__getitem__) if ours and floor_us else None
    result.update(
        matmul_256_gflops=round(sac["torch_matmul_gflops"], 2),
        sac_update_mflop=round(flops / 1e6, 1),
        matmul_gflops_xla=None if not floor_us else round(flops / floor_us / 1e3, 2),
        sac_flop_floor_us=None if not floor_us else round(floor_us, 1),
        sac_flop_floor_contender=best,
        sac_step_cpu_us=None if best is None else round(ours[best], 1),
        sac_update_vs_flop_floor=(
            None if best is None or not floor_us else round(ours[best] / floor_us, 3)
        ),
        sac_update_vs_torch_rate=(
            None
            if best is None
            else round(ours[best] * sac["torch_matmul_gflops"] * 1e3 / flops, 3)
        ),
        sac_replay_sample_us_sb3=(
            None
            if (us := sb3_replay_sample_us(shapes, repeats)) is None
            else round(us, 1)
        ),
    )
    for key in algos:
        unit = "ppo_minibatch_us" if key == "ppo" else "sac_step_us"
        eager = result[f"{unit}_torch_eager"]
        for name in ("torch_compiled", "jax", "sb3", "sbx"):
            theirs = result[f"{unit}_{name}"]
            if theirs:
                print(f"{key} torch_eager / {name}: {eager / theirs:.2f}x", flush=True)
    if best is not None:
        print(
            f"sac: {flops / 1e6:.0f} MFLOP, its matmuls alone in XLA {floor_us:.0f} µs "
            f"({result['matmul_gflops_xla']} GFLOP/s; torch's 256x256 "
            f"{result['matmul_256_gflops']}); {best} {ours[best]:.0f} µs = "
            f"{result['sac_update_vs_torch_rate']}x at torch's rate, "
            f"{result['sac_update_vs_flop_floor']}x the floor",
            flush=True,
        )
    print_result(result)


if __name__ == "__main__":
    main()
