"""Each public module works with the core dependencies plus its declared extras.

The declaration is ``[tool.parllel.module-extras]`` in ``pyproject.toml`` (a
module takes its nearest listed parent's entry); the packages of each extra
are ``[project.optional-dependencies]``. For every group of modules sharing
extras, a subprocess refuses every installed package outside the core
dependencies and those extras (and their own requirements), imports each
module and makes the documented calls below: all must work. Then, for each
listed module and each extra it lists, the same run without that extra must
fail, either at import (a module-level import of one of the extra's packages)
or with a ``MissingDependencyError`` naming the extra: so no extra is listed
for nothing, the calls exercise every need, and lazy needs say what to
install. The needs in ``LAZY`` must be lazy: the module imports without the
extra and the call raises ``MissingDependencyError``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
requirements = pytest.importorskip("packaging.requirements")

ROOT = Path(__file__).resolve().parents[2]
GUARD = ROOT / "tests" / "helpers" / "import_guard.py"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# the documented calls of each listed module, cheap enough for a test; ``tmp``
# is a scratch directory
CALLS = {
    "parllel.jax": """
import gymnasium as gym
import numpy as np
from parllel.jax import JaxHandler
from parllel.jax.agents import build_actor_critic_agent
from parllel.jax.algos import PPO, adam
agent = build_actor_critic_agent(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), seed=0)
PPO(agent, adam(1e-3))
JaxHandler(agent, n_envs=2, seed=0).example_outputs(np.zeros(3, np.float32))
""",
    "parllel.torch": """
from parllel.torch.algos import PPO, ActorCriticEvaluator
from parllel.torch.models import build_actor_critic
import gymnasium as gym
import torch
model, distribution = build_actor_critic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2))
PPO(ActorCriticEvaluator(model, distribution), torch.optim.Adam(model.parameters()))
""",
    "parllel.logging": """
from parllel.logging import CsvSink, MultiLogger, ProgressBar, StdoutTable, TensorBoardSink
logger = MultiLogger([StdoutTable(every=1), CsvSink(tmp / "progress.csv")])
logger.log(5, {"train/return_mean": 1.0})
logger.close()
TensorBoardSink(tmp / "tensorboard").close()
ProgressBar(total=10, disable=False).close()
from parllel.logging import Dashboard
board = Dashboard(10, live=True)
board.log(5, {"train/return_mean": 1.0})
board.close()
""",
    "parllel.checkpoints": """
from parllel.runners import RunDirectory
from parllel.seeding import Seeds, seed_everything
from parllel.checkpoints import load_checkpoint, save_checkpoint
from parllel.checkpoints.checkpoint import capture_rng_state
seeds = Seeds.from_master(0, n_envs=2)
seed_everything(seeds)
run = RunDirectory.create(tmp / "runs", name="extras", config={"lr": 1e-3}, seeds=seeds)
save_checkpoint(run.checkpoints_dir, {"rng": capture_rng_state()}, step=1)
load_checkpoint(run.path)
""",
    "parllel.runners.cli": """
import dataclasses
from parllel.runners.cli import parse_config

@dataclasses.dataclass
class Config:
    seed: int = 0

config, resume = parse_config(Config, argv=["--seed", "3"])
assert config.seed == 3 and resume is None
""",
    "parllel.runners": """
from parllel.runners import Callback, OffPolicyRunner, OnPolicyRunner
""",
    "parllel.plot": """
from parllel.logging import CsvSink
from parllel.plot import plot_learning_curve
sink = CsvSink(tmp / "logs" / "progress.csv")
sink.log(0, {"train/return_mean": 1.0})
sink.log(10, {"train/return_mean": 2.0})
sink.close()
assert plot_learning_curve(tmp).is_file()
""",
    "parllel.interop": """
import gymnasium as gym
from parllel.interop import make_vec
envs = make_vec(lambda: gym.make("CartPole-v1"), 2, parallel=False, seed=0)
envs.reset()
envs.step(envs.action_space.sample())
envs.close()
""",
    "parllel.envs.atari": """
from parllel.envs.atari import make_atari_env
env = make_atari_env("ALE/Pong-v5")
assert env.reset(seed=0)[0].shape == (4, 84, 84)
env.close()
""",
    "parllel.interop.sb3_vec_env": """
import gymnasium as gym
from parllel.interop.sb3_vec_env import make_sb3_vec_env
venv = make_sb3_vec_env(lambda: gym.make("CartPole-v1"), 2, parallel=False, seed=0)
venv.reset()
venv.close()
""",
    "parllel.interop.envpool_cage": """
import numpy as np
from parllel.cages import CageOptions
from parllel.interop import make_envpool_cage
with make_envpool_cage("CartPole-v1", 2, options=CageOptions(seed=0)) as cage:
    observation = np.zeros((2, 4), np.float32)
    cage.reset(observation)
""",
    "parllel.distributed": """
from parllel.cages import CageOptions, SerialCage
from parllel.distributed import RaySampler
from parllel.builders import build_sample_tree
from parllel.samplers import FeedForwardSampler
from parllel.torch.handler import TorchHandler
from parllel.torch.models import build_actor_critic
from parllel.torch.agents import ActorCriticAgent
import gymnasium as gym

def build(actor_index):
    cage = SerialCage(
        lambda: gym.make("CartPole-v1"), 2,
        options=CageOptions(seed=0, env_offset=2 * actor_index),
    )
    model, distribution = build_actor_critic(cage.spaces.observation, cage.spaces.action)
    handler = TorchHandler(ActorCriticAgent(model, distribution), 2)
    return FeedForwardSampler(cage, handler, build_sample_tree(cage, handler, 4))

build.__module__ = "__main__"  # this call's module exists only here: pickle by value
with RaySampler(build, n_actors=1, num_cpus_per_actor=0) as sampler:
    assert sampler.collect_batch().sample_tree["reward"].shape == (4, 2)
""",
    "parllel.logging.wandb_sink": """
import os
os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=str(tmp))
from parllel.logging.wandb_sink import WandbSink
sink = WandbSink("extras", tmp, config={"lr": 1e-3})
sink.log(5, {"train/return_mean": 1.0})
sink.close()
""",
    "parllel.enjoy": """
import gymnasium as gym
from parllel.enjoy import evaluate, make_env
from parllel.torch import export_policy, load_policy
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.models import build_actor_critic
spaces = gym.make("CartPole-v1")
agent = ActorCriticAgent(*build_actor_critic(spaces.observation_space, spaces.action_space))
policy = load_policy(export_policy(tmp, agent, env_id="CartPole-v1"))
env = make_env("CartPole-v1", video_dir=str(tmp / "video"))
evaluate(policy, env, 1, seed=0, max_steps=5)
env.close()
assert list((tmp / "video").glob("*.mp4"))
""",
    "parllel.runners.training": """
from parllel.runners import build_run_logger, run_training
from parllel.runners import RunDirectory
from parllel.runners.outcome import report_outcome

class Runner:  # the little of a runner run_training uses
    finished = interrupted = False
    env_steps = total_steps = 10
    last_checkpoint = config = None
    stop_signals = []

    def run(self):
        self.logger.log(10, {"train/return_mean": 1.0, "eval/return_mean": 2.0})
        return {"eval/return_mean": 2.0}

run = RunDirectory.create(tmp / "runs", name="extras")
runner = Runner()
runner.logger = build_run_logger(run, total_steps=10)
report_outcome(run_training(runner, run))
assert (run.path / "learning_curve.png").is_file()
""",
    "parllel.multiagent": """
import gymnasium as gym
import numpy as np
from parllel.cages import CageOptions, SerialCage
from parllel.multiagent import MultiAgentTrajInfo, make_parallel_env_factory

class TwoAgents:  # the PettingZoo ParallelEnv API, without PettingZoo
    possible_agents = ["a", "b"]

    def observation_space(self, agent):
        return gym.spaces.Box(-1, 1, (2,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return {a: np.zeros(2, np.float32) for a in self.agents}, {}

    def step(self, actions):
        self.t += 1
        done = self.t >= 3
        observations = {a: np.full(2, self.t / 3, np.float32) for a in actions}
        self.agents = [] if done else self.agents
        flags = dict.fromkeys(actions, done)
        return observations, dict.fromkeys(actions, 1.0), flags, dict.fromkeys(actions, False), {}

    def close(self):
        pass

cage = SerialCage(
    make_parallel_env_factory(TwoAgents), 1,
    options=CageOptions(seed=0, traj_info_type=MultiAgentTrajInfo),
)
assert cage.spaces.observation.shape == (2, 2)
cage.close()
""",
    "parllel.bench": """
from parllel.bench import run_bench
from parllel.bench.report import format_table
from parllel.bench.report import write_png
report = run_bench(
    "gymnasium.envs.classic_control.cartpole:CartPoleEnv", [2], seconds=0.01,
    batch_T=2, policies=["mlp"], layouts=["serial"], progress=None,
)
format_table(report)
assert write_png(report, tmp / "bench.png").is_file()
""",
    "parllel.multiagent.opponent_pool": """
from parllel.multiagent import OpponentPool
pool = OpponentPool(4, strategy="rating", seed=0)
pool.add({"weights": 1}, step=0)
pool.record(0, "win")
pool.sample(2)
""",
    "parllel.multiagent.selfplay": """
import numpy as np
from parllel.agents import NumpyHandler, ScriptedAgent
from parllel.cages import TrajInfo
from parllel.multiagent import OpponentPool, SelfPlay
agent = ScriptedAgent(lambda obs, a, r: np.zeros(len(obs), np.int64))
selfplay = SelfPlay(NumpyHandler(agent, n_envs=4), lambda s, n: NumpyHandler(agent, n),
                    OpponentPool(4, seed=0), n_envs=2, n_agents=2,
                    snapshot_learner=lambda: 0, seed=0)
selfplay.reset()
info = TrajInfo(env_index=1)
info.agent_returns = np.array([1.0, -1.0])
selfplay.episodes_ended([info])
assert selfplay.metrics()["selfplay/games"] == 1
""",
}

# extras a module must need only lazily: it imports without them, and the call
# that needs one raises MissingDependencyError naming it
LAZY = {
    "parllel.logging": {"torch", "logging"},
    "parllel.plot": {"plot"},
    "parllel.runners.training": {"logging", "plot"},
    "parllel.runners.cli": {"cli"},
    "parllel.distributed": {"ray"},
    "parllel.bench": {"torch", "plot"},
    "parllel.logging.wandb_sink": {"wandb"},
    "parllel.enjoy": {"video"},
    "parllel.envs.atari": {"atari"},
    "parllel.multiagent.opponent_pool": {"multiagent"},
    "parllel.multiagent.selfplay": {"multiagent"},
}


@cache
def pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> dict[str, list[str]]:
    return pyproject()["tool"]["parllel"]["module-extras"]


def public_modules() -> list[str]:
    """Every module of the package whose dotted name has no ``_`` part."""
    found = []
    for path in sorted((ROOT / "parllel").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts[-1] == "__main__" or any(p.startswith("_") for p in parts):
            continue
        found.append(".".join(parts))
    return found


def extras_of(module: str) -> tuple[str, ...]:
    """The extras of the nearest listed parent of ``module`` (itself included)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        listed = declared().get(".".join(parts[:end]))
        if listed is not None:
            return tuple(sorted(listed))
    raise AssertionError(f"{module} has no entry in [tool.parllel.module-extras]")


def requirement_names(specs: list[str]) -> set[str]:
    """The distributions these requirement strings need (no extras' own extras)."""
    names = set()
    for spec in specs:
        requirement = requirements.Requirement(spec)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.add(canonical(requirement.name))
    return names


def closure(names: set[str]) -> set[str]:
    """``names`` and everything they require, transitively (installed ones)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += requirement_names(metadata.requires(name) or [])
        except metadata.PackageNotFoundError:
            pass
    return seen


def extra_packages(extra: str) -> set[str]:
    """The distributions ``extra`` requires, with parllel's own extras it names
    (``parllel-rl[logging,plot]``) expanded."""
    specs = pyproject()["project"]["optional-dependencies"][extra]
    own = canonical(pyproject()["project"]["name"])
    names = requirement_names(specs) - {own}
    for spec in specs:
        requirement = requirements.Requirement(spec)
        if canonical(requirement.name) == own:
            for own in requirement.extras:
                names |= extra_packages(own)
    return names


# packages a dependency imports whenever they are installed, without requiring
# them (torch's pytree and dynamo use optree if present; envpool installs it)
OPTIONAL_IMPORTS = {"torch": {"optree"}}


def blocked_names(extras: tuple[str, ...]) -> list[str]:
    """Installed top-level modules outside the core dependencies and ``extras``."""
    wanted = requirement_names(pyproject()["project"]["dependencies"])
    for extra in extras:
        wanted |= extra_packages(extra)
    allowed = closure(wanted)
    for package, optional in OPTIONAL_IMPORTS.items():
        if package in allowed:
            allowed |= closure(optional)
    blocked = {
        top
        for top, distributions in metadata.packages_distributions().items()
        if not any(canonical(d) in allowed for d in distributions)
    }
    return sorted(
        blocked
        - vendored(allowed)
        - set(sys.stdlib_module_names)
        - {"parllel", "tests"}
    )


VENDOR_DIRECTORIES = {"thirdparty_files"}  # ray puts it on sys.path


def vendored(distributions: set[str]) -> set[str]:
    """Top-level packages that ``distributions`` ship inside themselves and put
    on ``sys.path`` (ray's ``thirdparty_files``: colorama, psutil): the same
    names installed on their own must not be refused to them."""
    names: set[str] = set()
    for name in distributions:
        try:
            files = metadata.files(name) or []
        except metadata.PackageNotFoundError:
            continue
        for file in files:
            parts = file.parts
            if len(parts) >= 3 and parts[-3] in VENDOR_DIRECTORIES:
                names.add(parts[-2] if file.name == "__init__.py" else "")
    return names - {""}


def require_installed(extras: tuple[str, ...]) -> None:
    for extra in extras:
        for name in extra_packages(extra):
            try:
                metadata.distribution(name)
            except metadata.PackageNotFoundError:
                pytest.skip(f"the '{extra}' extra is not installed ({name})")


def run_guarded(extras: tuple[str, ...], modules: list[str], calls: list) -> list[dict]:
    spec = {
        "blocked": blocked_names(extras),
        "parllel_dir": str(ROOT / "parllel"),
        "modules": modules,
        "calls": calls,
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, str(GUARD), json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=240,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT: ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT: ") :])["steps"]


def describe(step: dict) -> str:
    refusals = ", ".join(
        f"{r['name']} (from {r['parllel_frame']})" for r in step["refusals"]
    )
    return (
        f"{step['kind']} {step['name']}: {step.get('error')}: {step.get('message')}"
        f"\n  refused: {refusals or 'nothing'}\n{step.get('traceback', '')}"
    )


def groups() -> dict[tuple[str, ...], list[str]]:
    by_extras: dict[tuple[str, ...], list[str]] = {}
    for module in public_modules():
        by_extras.setdefault(extras_of(module), []).append(module)
    return by_extras


def test_declaration_names_real_modules_and_extras():
    modules = set(public_modules())
    extras = set(pyproject()["project"]["optional-dependencies"])
    for module, listed in declared().items():
        assert module in modules, f"[tool.parllel.module-extras] lists {module}"
        assert set(listed) <= extras, f"{module}: unknown extras {set(listed) - extras}"
    assert set(CALLS) <= set(declared()) and set(LAZY) <= set(declared())
    # the examples extra is the union of what the examples' layers need
    examples = extra_packages("examples")
    for extra in ("logging", "plot", "cli"):
        assert extra_packages(extra) <= examples, extra


@pytest.mark.parametrize(
    "extras", sorted(groups()), ids=lambda e: "+".join(e) or "core"
)
def test_modules_work_with_their_declared_extras(extras):
    require_installed(extras)
    modules = groups()[extras]
    calls = [[m, CALLS[m]] for m in modules if m in CALLS]
    steps = run_guarded(extras, modules, calls)
    failed = [describe(step) for step in steps if not step["ok"]]
    assert not failed, f"with only the extras {extras}:\n" + "\n".join(failed)


def missing_extra_cases() -> list[tuple[str, str]]:
    return [
        (module, extra) for module, listed in declared().items() for extra in listed
    ]


def names_extra(message: str, extra: str) -> bool:
    """Whether ``message`` hints at installing ``extra`` (``pip install -e
    ".[a,b]"`` or the distribution's ``parllel-rl[a,b]``)."""
    return any(
        extra in found.split(",")
        for found in re.findall(r"(?:parllel-rl|\.)\[([\w,]+)\]", message)
    )


@pytest.mark.parametrize("module, extra", missing_extra_cases())
def test_each_declared_extra_is_needed_and_named(module, extra):
    extras = extras_of(module)
    require_installed(extras)
    fewer = tuple(e for e in extras if e != extra)
    calls = [[module, CALLS[module]]] if module in CALLS else []
    steps = run_guarded(fewer, [module], calls)
    failed = [step for step in steps if not step["ok"]]
    assert failed, f"{module} works without the '{extra}' extra it declares"
    packages = extra_packages(extra)
    if not steps[0]["ok"]:
        failed = failed[:1]  # the module did not import: its calls cannot run
    for step in failed:
        if step["error"] == "MissingDependencyError":
            assert names_extra(step["message"], extra), describe(step)
            continue
        assert module not in LAZY or extra not in LAZY[module], (
            f"{module} must need '{extra}' lazily (MissingDependencyError):\n"
            + describe(step)
        )
        # a module-level import of one of the extra's packages: a hard need
        hard = [
            r
            for r in step["refusals"]
            if r["parllel_frame"] is not None
            and not r["parllel_frame"]["lazy"]
            and any(
                canonical(d) in packages
                for d in metadata.packages_distributions().get(
                    r["name"].partition(".")[0], []
                )
            )
        ]
        assert step["error"] == "ModuleNotFoundError" and hard, (
            "a missing package must fail at import or raise MissingDependencyError "
            "naming its extra:\n" + describe(step)
        )
