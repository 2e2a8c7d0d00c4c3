"""Self-play PPO on PettingZoo's tic-tac-toe, against a pool of its own past selves.

    python examples/selfplay/train_tictactoe.py            # the full run
    python examples/selfplay/train_tictactoe.py --quick    # a tiny smoke run
    python examples/selfplay/train_tictactoe.py --strategy rating
    python examples/selfplay/train_tictactoe.py --resume runs/tictactoe-selfplay-...

Games run in worker processes (``tictactoe_v3`` through
:class:`~parllel.multiagent.aec_env.AECEnvAdapter`: one env step is one move, the
two seats are the agent dimension of the sample tree). In a share of the
games (``mirror_share``) the learner plays both seats. In the others it takes
a random seat; the other seat plays a frozen snapshot of the learner drawn
from an :class:`~parllel.multiagent.OpponentPool` (a snapshot joins every
``snapshot_interval`` updates), and, in a share of those games (one share
per seat of the learner), a player that moves uniformly at random.
Snapshots play their first move at random. Half the games start from 1 to
4 random moves already made (``RandomStart``), so both seats train from
every opening and many middle games. The learner's moves are masked to the
free squares; PPO trains on the learner's rows only, with per-seat advantages (a
loss arrives on the opponent's move and is credited to the learner's last
move).

Every ``--eval-interval-steps`` moves (``--eval-episodes`` games per seat and
opponent) and at the end (``--final-eval-games``), the greedy policy plays
tic-tac-toe in both seats against a uniformly random player and against a
perfect minimax player (``tictactoe_players.py``): played games, and the
exact fractions over every game the opponent's random choices lead to
(``*_exact``); the final figures go to ``results.json`` in the run
directory. The team return (``train/return_mean``)
of a zero-sum game is 0 by construction: the self-play rates
(``selfplay/*``) and the evaluations (``eval/*``) are the figures to watch,
and ``learning_curve.png`` plots them.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pettingzoo.classic import tictactoe_v3
from pettingzoo.utils.wrappers import BaseWrapper

from parllel.agents import NumpyHandler
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, build_cage
from parllel.logging.csv_sink import read_progress
from parllel.multiagent import (
    MultiAgentTrajInfo,
    OpponentPool,
    SelfPlay,
    make_aec_env_factory,
    unstack_space,
)
from parllel.plot import find_progress_csv, plot_learning_curve
from parllel.runners import Callback, OnPolicyRunner, RunSettings, SelfPlayCallback
from parllel.runners.cli import parse_config, run_main
from parllel.samplers import FeedForwardSampler
from parllel.schedules import linear_schedule
from parllel.seeding import Seeds
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator, FlattenAgents, adam
from parllel.torch.models import build_actor_critic
from parllel.torch.selfplay import frozen_opponent, snapshot_state
from parllel.transforms import MultiAgentGAE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tictactoe_players import (  # noqa: E402
    MinimaxPlayer,
    RandomPlayer,
    exact_results,
    play_matches,
)

RANDOM_PLAYER = "random"
"""The pool snapshot that stands for a player moving uniformly at random."""

PLOTTED = (
    "selfplay/win_rate",
    "selfplay/loss_rate",
    "eval/minimax_seat0_loss",
    "eval/minimax_seat1_loss",
    "eval/random_seat0_win",
    "eval/random_seat1_win",
)
"""The curves of learning_curve.png (the team return is 0 in a zero-sum game)."""


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed (python, numpy, torch and every env)"""
    n_envs: int = 128
    """games played side by side"""
    batch_T: int = 32
    """moves per env per batch"""
    total_steps: int = 10_240_000
    """moves (env steps, both seats) to train for"""
    gamma: float = 1.0
    """discount per decision"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    learning_rate: float = 3e-4
    """initial Adam learning rate (decays linearly to 0)"""
    epochs: int = 8
    """passes over each batch"""
    minibatches: int = 8
    """minibatches per epoch"""
    entropy_coef: float = 0.01
    """weight of the entropy bonus"""
    hidden_sizes: tuple[int, ...] = (128, 128)
    """hidden layer widths of the actor-critic MLP"""
    shared_trunk: bool = False
    """one MLP trunk for the policy and value heads (else one each)"""
    pool_size: int = 10
    """snapshots the opponent pool keeps (the oldest leaves first)"""
    strategy: Literal["mostly_latest", "latest", "uniform", "rating"] = "mostly_latest"
    """how the opponent of each game is drawn from the pool"""
    p_latest: float = 0.8
    """mostly_latest: the share of games against the newest snapshot"""
    snapshot_interval: int = 20
    """updates between snapshots of the learner joining the pool"""
    mirror_share: float = 0.0
    """share of games the learner plays against itself in both seats (all its rows are trained on; off: in the measured runs they made the first seat lose to minimax)"""
    random_share: tuple[float, float] = (0.9, 0.3)
    """per seat of the learner (first mover, second mover): share of its games drawn from the pool (not mirror games) played by a uniformly random player instead of a snapshot"""
    opponent_epsilon: float = 0.1
    """snapshots play a random legal move with this probability (varied games whose mistakes the snapshot's other moves still punish)"""
    random_start_share: float = 0.5
    """share of the games that start from random moves already made (the learner then meets, and plays on from, every opening in either seat)"""
    random_start_moves: int = 4
    """most random moves such a game starts with (1 to 4, uniformly)"""
    random_openings: int = 1
    """snapshots play their first this many moves of a game at random (every opening, then the snapshot's own play, as a perfect player's random choice among equally good first moves)"""
    final_eval_games: int = 1000
    """games per seat and opponent in the final evaluation"""
    parallel: Literal["process", "serial"] = "process"
    """where the games run: worker processes or this process"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=1_024_000,
        eval_episodes=100,
        log_interval_steps=256_000,
        checkpoint_interval_steps=2_000_000,
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(
    n_envs=8,
    total_steps=2048,
    eval_interval_steps=1024,
    eval_episodes=4,
    log_interval_steps=256,
    final_eval_games=10,
    snapshot_interval=2,
    epochs=1,
)
"""the --quick preset: a tiny smoke run"""


class RandomStart(BaseWrapper):
    """A PettingZoo AEC wrapper: ``share`` of the games start from random moves.

    Those games start with 1 to ``max_moves`` (uniformly) random moves
    already made, so both seats train from every opening and from many
    middle-game positions: blocks and forks the learner's own games rarely
    reach. A perfect player picks among all nine first moves (each is
    optimal), so the learner must answer all of them. At most 4 moves: no
    game is over before it starts. The moves' rng is seeded by
    ``reset(seed=...)``.
    """

    def __init__(self, env: Any, share: float, max_moves: int = 1) -> None:
        if not 1 <= max_moves <= 4:
            raise ValueError(f"max_moves must be in [1, 4], got {max_moves}")
        super().__init__(env)
        self.share, self.max_moves = share, max_moves
        self.rng = np.random.default_rng()

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        super().reset(seed=seed, options=options)
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        if self.rng.random() < self.share:
            for _ in range(self.rng.integers(1, self.max_moves + 1)):
                mask = self.observe(self.agent_selection)["action_mask"]
                self.step(int(self.rng.choice(np.flatnonzero(mask))))


def tictactoe_env(random_start_share: float = 0.0, random_start_moves: int = 1) -> Any:
    """PettingZoo's ``tictactoe_v3`` AEC env, with :class:`RandomStart` if asked."""
    env = tictactoe_v3.env()
    if random_start_share > 0:
        return RandomStart(env, random_start_share, random_start_moves)
    return env


class RandomMoves:
    """An :class:`~parllel.agents.Agent` moving uniformly at random among legal squares."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n_envs: int) -> None:
        return None

    def step(self, observation: Any, prev_action: Any, prev_reward: Any, state: Any):
        from parllel.agents import AgentStep

        mask = np.asarray(observation["action_mask"], dtype=bool)
        # rows with no legal square (not this seat's turn) play square 0: padding
        scores = self.rng.random(mask.shape) + mask
        return AgentStep(scores.argmax(-1).astype(np.int64), {})

    def value(self, observation: Any, prev_action: Any, prev_reward: Any, state: Any):
        return np.zeros(len(observation["action_mask"]), np.float32)

    def set_mode(self, mode: str) -> None:
        pass


class ExploringOpponent:
    """A frozen opponent agent that plays some moves at random.

    Its first ``random_openings`` moves of a game (counted from its marks on
    the board) are uniformly random legal moves, and every later one is with
    probability ``epsilon``. Without it, snapshots of a converged learner
    replay the same few games; a perfect player then finds the openings and
    lines the learner never had to defend.
    """

    def __init__(
        self, agent: Any, epsilon: float, seed: int, random_openings: int = 0
    ) -> None:
        self.agent, self.epsilon = agent, epsilon
        self.random_openings = random_openings
        self.generator = torch.Generator().manual_seed(seed)

    def initial_state(self, n_envs: int) -> Any:
        return self.agent.initial_state(n_envs)

    def step(self, observation: Any, prev_action: Any, prev_reward: Any, state: Any):
        step = self.agent.step(observation, prev_action, prev_reward, state)
        mask = observation["action_mask"].to(torch.float32)
        scores = torch.rand(mask.shape, generator=self.generator) + mask
        explore = torch.rand(len(mask), generator=self.generator) < self.epsilon
        moves_made = observation["observation"][..., 0].flatten(1).sum(-1)
        explore |= moves_made < self.random_openings
        action = torch.where(explore, scores.argmax(-1), step.action)
        return step._replace(action=action)  # opponents' log-probs are not trained on

    def value(self, observation: Any, prev_action: Any, prev_reward: Any, state: Any):
        return self.agent.value(observation, prev_action, prev_reward, state)

    def set_mode(self, mode: str) -> None:
        self.agent.set_mode(mode)


def greedy_policy(agent: ActorCriticAgent):
    """A PettingZoo-observation -> move function: the agent's most likely legal move."""
    frozen = copy.deepcopy(agent)
    frozen.set_mode("eval")

    def move(observation: dict[str, np.ndarray]) -> int:
        batch = {
            key: torch.as_tensor(value)[None] for key, value in observation.items()
        }
        with torch.no_grad():
            return int(frozen.step(batch, None, None, None).action[0])

    return move


def evaluate(agent: ActorCriticAgent, games: int, seed: int) -> dict[str, float]:
    """Win/draw/loss fractions of the greedy policy, per seat, against random and minimax.

    ``eval/<opponent>_seat<s>_<outcome>`` counts ``games`` played games;
    ``eval/<opponent>_seat<s>_<outcome>_exact`` is the exact fraction over
    every game the opponent's random choices can lead to (no sampling noise).
    """
    policy = greedy_policy(agent)
    metrics: dict[str, float] = {}
    for seat in (0, 1):
        for name, opponent in (
            ("random", RandomPlayer(seed + seat)),
            ("minimax", MinimaxPlayer(seed + seat)),
        ):
            played = play_matches(policy, opponent, games, seat, seed=seed)
            exact = exact_results(policy, name, seat)
            for outcome in ("win", "draw", "loss"):
                metrics[f"eval/{name}_seat{seat}_{outcome}"] = played[outcome]
                metrics[f"eval/{name}_seat{seat}_{outcome}_exact"] = exact[outcome]
    return metrics


class MatchEvaluation(Callback):
    """Adds :func:`evaluate`'s figures to the logged metrics every ``interval_steps``.

    Not after the last update: the final evaluation (``final_eval_games``
    games, in ``results.json``) follows it.
    """

    def __init__(
        self, agent: ActorCriticAgent, interval_steps: int, games: int
    ) -> None:
        self.agent, self.interval_steps, self.games = agent, interval_steps, games
        self.next_step = interval_steps

    def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
        if runner.env_steps >= runner.total_steps:
            return
        if runner.env_steps >= self.next_step:
            self.next_step += self.interval_steps
            metrics.update(evaluate(self.agent, self.games, seed=runner.env_steps))


def main(config: Config, resume: str | None = None) -> dict:
    torch.set_num_threads(1)
    seeds = Seeds.from_master(config.seed, n_envs=config.n_envs, n_eval_envs=1)
    run = config.run.start("tictactoe-selfplay", config, seeds, resume)
    cages = build_cage(
        make_aec_env_factory(
            tictactoe_env,
            random_start_share=config.random_start_share,
            random_start_moves=config.random_start_moves,
        ),
        config.n_envs,
        parallel=config.parallel,
        options=CageOptions(seed=seeds.envs, traj_info_type=MultiAgentTrajInfo),
    )
    n_agents = cages.spaces.action.shape[0]
    agent = ActorCriticAgent(
        *build_actor_critic(
            unstack_space(cages.spaces.observation),
            unstack_space(cages.spaces.action),
            hidden_sizes=config.hidden_sizes,
            shared_trunk=config.shared_trunk,
        )
    )

    # the learner plays one seat of every game; the pool supplies the other
    n_rows = config.n_envs * n_agents

    def build_opponent(snapshot: Any, rows: int):
        if isinstance(snapshot, str) and snapshot == RANDOM_PLAYER:
            return NumpyHandler(RandomMoves(config.seed), rows)
        frozen = frozen_opponent(agent, snapshot)
        return TorchHandler(
            ExploringOpponent(
                frozen, config.opponent_epsilon, config.seed, config.random_openings
            ),
            rows,
        )

    pool = OpponentPool(
        config.pool_size,
        strategy=config.strategy,
        p_latest=config.p_latest,
        seed=config.seed,
    )
    if max(config.random_share) > 0:
        pool.add_fixed(RANDOM_PLAYER, share=config.random_share)
    selfplay = SelfPlay(
        TorchHandler(agent, n_envs=n_rows, seed=seeds.actions),
        build_opponent,
        pool,
        n_envs=config.n_envs,
        n_agents=n_agents,
        snapshot_learner=lambda: snapshot_state(agent),
        mirror_share=config.mirror_share,
        seed=config.seed,
    )
    sample_tree = build_sample_tree(cages, selfplay, config.batch_T)
    transform = MultiAgentGAE(
        sample_tree, gamma=config.gamma, gae_lambda=config.gae_lambda
    )
    sampler = FeedForwardSampler(cages, selfplay, sample_tree, transform=transform)

    model, distribution = agent.model, agent.distribution
    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        adam(model.parameters(), config.learning_rate),
        learning_rate=linear_schedule(config.learning_rate, 0.0),
        epochs=config.epochs,
        minibatches=config.minibatches,
        entropy_coef=config.entropy_coef,
        normalize_advantage=True,
    )
    learner_only = FlattenAgents(ppo, policy_index=0)  # train on the learner's rows

    runner = OnPolicyRunner(
        sampler,
        learner_only,
        config.total_steps,
        checkpoint_objects={"model": model, "ppo": ppo, "selfplay": selfplay},
        config_keys=["n_envs", "batch_T", "hidden_sizes", "shared_trunk"],
        callbacks=[
            SelfPlayCallback(selfplay, snapshot_interval=config.snapshot_interval),
            MatchEvaluation(
                agent, config.run.eval_interval_steps, config.run.eval_episodes
            ),
        ],
        **run.runner_options(config.total_steps),  # evaluation by MatchEvaluation
    )
    result = run.train(runner, close=(cages, sample_tree))
    final = evaluate(agent, config.final_eval_games, seed=10**6)
    (run.path / "results.json").write_text(json.dumps(final, indent=2))
    logged = read_progress(find_progress_csv(run.path))
    plot_learning_curve(run.path, [name for name in PLOTTED if name in logged])
    if "selfplay/win_rate" in result:
        print(
            "self-play, last games: "
            + " ".join(
                f"{o} {result[f'selfplay/{o}_rate']:.3f}"
                for o in ("win", "draw", "loss")
            )
        )
    for seat in (0, 1):
        print(
            f"seat {seat}: vs random "
            + " ".join(
                f"{o} {final[f'eval/random_seat{seat}_{o}']:.3f}"
                for o in ("win", "draw", "loss")
            )
            + " | vs minimax "
            + " ".join(
                f"{o} {final[f'eval/minimax_seat{seat}_{o}']:.3f}"
                for o in ("win", "draw", "loss")
            )
            + f" | exact loss: vs random {final[f'eval/random_seat{seat}_loss_exact']:.3f}"
            + f", vs minimax {final[f'eval/minimax_seat{seat}_loss_exact']:.3f}"
        )
    return {**result, **final}


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
