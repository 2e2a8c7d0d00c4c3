"""CleanRL-style single-file PPO on CartPole-v1, over parllel's gymnasium vector env.

Everything here is ordinary single-file PPO (actor and critic MLPs, rollout
storage tensors, GAE, clipped objective, value loss, entropy bonus, minibatch
epochs, annealed learning rate). The only parllel line creates the vector
env: ``make_vec`` returns a gymnasium ``VectorEnv`` with ``SyncVectorEnv``'s
semantics, its envs stepped in worker processes or in this process.

    python examples/interop/cleanrl_ppo.py           # solves CartPole-v1
    python examples/interop/cleanrl_ppo.py --quick   # a few updates, seconds
    python examples/interop/cleanrl_ppo.py --help    # every Config field is a flag

Autoreset: the vector env uses gymnasium's ``NEXT_STEP`` mode. After a step
that ends an episode, the observation returned is the episode's final one;
the next ``step`` ignores its action, resets the env and returns the new
episode's first observation with reward 0. That reset step is no transition
of either episode: it is masked out of the loss, and GAE stops at the step
before it. A truncated episode is bootstrapped from the value of its final
observation, a terminated one is not.

Prints a line every ``log_interval_steps`` and, last, one JSON object:
``final_mean_return`` (mean of the last ``solved_window`` training
episodes), ``solved``, ``env_steps`` (``n_envs`` x vector steps, reset steps
included), ``seconds``, ``episodes``, and the steps and seconds at which the
mean of the last ``solved_window`` episodes first reached ``solved_return``.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time

import gymnasium as gym
import numpy as np
import torch
import tyro
from torch import nn
from torch.distributions import Categorical

from parllel.interop import make_vec


@dataclasses.dataclass
class Config:
    seed: int = 0
    """seed of python, numpy, torch and the envs"""
    n_envs: int = 8
    """environments stepped side by side"""
    batch_T: int = 32
    """steps per env per rollout (8 x 32 = 256 samples per update)"""
    total_steps: int = 102_400
    """env steps to train for (n_envs x vector steps; 400 updates)"""
    learning_rate: float = 1e-3
    """initial Adam learning rate"""
    anneal: bool = True
    """decay the learning rate and the clip coefficient linearly to 0"""
    gamma: float = 0.98
    """discount factor"""
    gae_lambda: float = 0.8
    """GAE lambda"""
    minibatches: int = 1
    """minibatches per epoch"""
    epochs: int = 20
    """passes over each rollout"""
    normalize_advantages: bool = True
    """normalize advantages per minibatch"""
    clip_coef: float = 0.2
    """initial PPO clip coefficient of the policy ratio"""
    clip_value_loss: bool = False
    """clip the value loss around the rollout's values"""
    entropy_coef: float = 0.0
    """weight of the entropy bonus"""
    value_coef: float = 0.5
    """weight of the value loss"""
    max_grad_norm: float = 0.5
    """gradient norm clipping"""
    target_kl: float | None = None
    """stop an update's epochs early when the approximate KL exceeds this"""
    hidden_size: int = 64
    """width of the two hidden layers of the actor and of the critic"""
    solved_return: float = 475.0
    """mean episodic return that counts as solved"""
    solved_window: int = 20
    """the last this many training episodes make the final mean return"""
    log_interval_steps: int = 10_240
    """env steps between progress lines"""


QUICK = dict(total_steps=1024, epochs=2, log_interval_steps=256)
"""the --quick preset: 4 updates of 2 epochs"""


def parse_args(argv: list[str] | None = None) -> Config:
    """The config from the command line; ``--quick`` starts from :data:`QUICK`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    quick = "--quick" in argv
    default = Config(**QUICK) if quick else Config()
    args = [arg for arg in argv if arg != "--quick"]
    description = f"{__doc__}\n--quick: a tiny run ({QUICK})"
    return tyro.cli(Config, args=args, default=default, description=description)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias: float = 0.0):
    """Orthogonal weights with gain ``std``, constant bias."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


class Agent(nn.Module):
    """Separate actor and critic MLPs (tanh), categorical policy."""

    def __init__(self, obs_size: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_size, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_size, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, n_actions), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def get_action_and_value(self, x: torch.Tensor, action=None):
        """Sampled (or given) action, its log-prob, the entropy and the value."""
        distribution = Categorical(logits=self.actor(x))
        if action is None:
            action = distribution.sample()
        return (
            action,
            distribution.log_prob(action),
            distribution.entropy(),
            self.get_value(x),
        )


def main(config: Config) -> dict:
    torch.set_num_threads(1)
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    T, B = config.batch_T, config.n_envs
    n_updates = config.total_steps // (T * B)

    # env setup: the one parllel line
    envs = make_vec(lambda: gym.make("CartPole-v1"), config.n_envs, seed=config.seed)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(
        envs, buffer_length=config.solved_window
    )
    assert isinstance(envs.single_action_space, gym.spaces.Discrete)
    obs_shape = envs.single_observation_space.shape

    agent = Agent(
        int(np.prod(obs_shape)), int(envs.single_action_space.n), config.hidden_size
    )
    optimizer = torch.optim.Adam(agent.parameters(), lr=config.learning_rate, eps=1e-5)

    # rollout storage
    obs = torch.zeros((T, B) + obs_shape)  # [T, B, 4]
    actions = torch.zeros((T, B), dtype=torch.long)  # [T, B]
    logprobs = torch.zeros((T, B))
    rewards = torch.zeros((T, B))
    terminations = torch.zeros((T, B))  # the step ended its episode by termination
    dones = torch.zeros((T, B))  # ... by termination or truncation
    values = torch.zeros((T, B))
    valid = torch.zeros((T, B), dtype=torch.bool)  # False: an autoreset step

    global_step, episodes = 0, 0
    solved_at: tuple[int, float] | None = None
    start = time.perf_counter()
    observation, _ = envs.reset()  # env i seeded with seed + i by make_vec
    next_obs = torch.as_tensor(observation, dtype=torch.float32)
    next_autoreset = torch.zeros(B, dtype=torch.bool)  # the next step resets the env
    next_log = config.log_interval_steps

    for update in range(n_updates):
        # anneal the learning rate and the clip coefficient
        fraction = 1.0 - update / n_updates if config.anneal else 1.0
        optimizer.param_groups[0]["lr"] = fraction * config.learning_rate
        clip_coef = fraction * config.clip_coef

        # rollout
        for t in range(T):
            global_step += B
            obs[t] = next_obs
            valid[t] = ~next_autoreset
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            actions[t], logprobs[t], values[t] = action, logprob, value
            observation, reward, terminated, truncated, infos = envs.step(
                action.numpy()
            )
            rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
            terminations[t] = torch.as_tensor(terminated, dtype=torch.float32)
            done = np.logical_or(terminated, truncated)
            dones[t] = torch.as_tensor(done, dtype=torch.float32)
            next_obs = torch.as_tensor(observation, dtype=torch.float32)
            next_autoreset = torch.as_tensor(done)
            if "_episode" in infos:
                episodes += int(infos["_episode"].sum())
                recent = envs.return_queue
                if (
                    solved_at is None
                    and len(recent) == config.solved_window
                    and np.mean(recent) >= config.solved_return
                ):
                    solved_at = (global_step, time.perf_counter() - start)

        # bootstrap and GAE (obs[t + 1] after a truncation is the final
        # observation, so values[t + 1] bootstraps it; an autoreset step's
        # advantage is never used: dones[t] = 1 before it stops the recursion)
        with torch.no_grad():
            next_value = agent.get_value(next_obs)
            advantages = torch.zeros_like(rewards)
            last_advantage = torch.zeros(B)
            for t in reversed(range(T)):
                following = next_value if t == T - 1 else values[t + 1]
                delta = (
                    rewards[t]
                    + config.gamma * following * (1.0 - terminations[t])
                    - values[t]
                )
                last_advantage = (
                    delta
                    + config.gamma
                    * config.gae_lambda
                    * (1.0 - dones[t])
                    * last_advantage
                )
                advantages[t] = last_advantage
            returns = advantages + values

        # flatten the batch, keeping real transitions only
        keep = valid.reshape(-1)
        b_obs = obs.reshape((-1,) + obs_shape)[keep]
        b_actions = actions.reshape(-1)[keep]
        b_logprobs = logprobs.reshape(-1)[keep]
        b_advantages = advantages.reshape(-1)[keep]
        b_returns = returns.reshape(-1)[keep]
        b_values = values.reshape(-1)[keep]
        batch_size = len(b_obs)
        minibatch_size = -(-batch_size // config.minibatches)

        # optimize the policy and value network
        for _ in range(config.epochs):
            order = torch.randperm(batch_size)
            for first in range(0, batch_size, minibatch_size):
                mb = order[first : first + minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb], b_actions[mb]
                )
                logratio = newlogprob - b_logprobs[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()

                mb_advantages = b_advantages[mb]
                if config.normalize_advantages and len(mb) > 1:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (
                        mb_advantages.std() + 1e-8
                    )

                # clipped policy objective
                pg_loss = torch.max(
                    -mb_advantages * ratio,
                    -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef),
                ).mean()

                # value loss
                if config.clip_value_loss:
                    clipped = b_values[mb] + torch.clamp(
                        newvalue - b_values[mb], -clip_coef, clip_coef
                    )
                    v_loss = (
                        0.5
                        * torch.max(
                            (newvalue - b_returns[mb]) ** 2,
                            (clipped - b_returns[mb]) ** 2,
                        ).mean()
                    )
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()

                loss = (
                    pg_loss
                    - config.entropy_coef * entropy.mean()
                    + config.value_coef * v_loss
                )
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), config.max_grad_norm)
                optimizer.step()
            if config.target_kl is not None and approx_kl > config.target_kl:
                break

        # log
        if global_step >= next_log or update == n_updates - 1:
            next_log += config.log_interval_steps
            recent = envs.return_queue
            mean_return = float(np.mean(recent)) if recent else float("nan")
            seconds = time.perf_counter() - start
            print(
                f"step {global_step:>7}  episodes {episodes:>5}  "
                f"return (last {len(recent)}) {mean_return:6.1f}  "
                f"value loss {v_loss.item():8.3f}  SPS {global_step / seconds:6.0f}",
                flush=True,
            )

    envs.close()
    recent = envs.return_queue
    final = float(np.mean(recent)) if recent else None
    summary = {
        "final_mean_return": final,
        "solved": final is not None
        and len(recent) == config.solved_window
        and final >= config.solved_return,
        "env_steps": global_step,
        "seconds": round(time.perf_counter() - start, 2),
        "episodes": episodes,
        "steps_to_solved": None if solved_at is None else solved_at[0],
        "seconds_to_solved": None if solved_at is None else round(solved_at[1], 2),
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main(parse_args())
