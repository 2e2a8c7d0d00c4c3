"""Names of the sample-tree fields, defined once.

Samplers write these fields, transforms read and add to them, algorithms
consume them. Using these constants instead of string literals means a typo is
an ``AttributeError`` at import time rather than a silent miss.

Layout (``T`` = batch length, ``B`` = number of envs):

- ``OBSERVATION``: ``[T + 1, B, ...]``; index ``T`` holds the observation after
  the last step (the bootstrap observation).
- ``ACTION``, ``REWARD``, ``TERMINATED``, ``TRUNCATED``, ``DONE``: ``[T, B]``.
- ``FINAL_OBSERVATION``: ``[T, B, ...]``; at a step that ended an episode, the
  episode's last observation (the slot ``OBSERVATION[t + 1]`` then holds the
  reset observation of the next episode).
- With ``frame_stack=k`` (one stored frame per step, see
  :mod:`parllel.frame_stacks.sample_tree`): ``OBSERVATION`` and
  ``FINAL_OBSERVATION`` are ``[B, k, ...]`` staging slots of the current
  stacks; ``FRAMES``: ``[k + T, B, ...]`` the newest frame of each
  observation (row ``k - 1 + t`` for step ``t``, ``0 .. T``; rows before:
  the older frames of step 0's stack); ``FRAME_DEPTH``: ``[T, B]`` int8,
  how many earlier frames of its episode step ``t``'s stack holds.
- ``ENV_INFO``: ``[T, B]`` tree of preallocated info keys.
- ``AGENT_INFO``: ``[T, B]`` tree written by the agent (e.g. ``value``,
  ``log_prob``).
- ``PREV_ACTION``, ``PREV_REWARD``: zero at the first step of every episode.
- ``VALID``: ``[T, B]`` bool, False for steps after an env finished and before
  it was reset (wait-reset sampling).
- ``BOOTSTRAP_VALUE``: ``[B]`` value of ``OBSERVATION[T]``.
- ``FINAL_VALUE``: ``[T, B]`` value of ``FINAL_OBSERVATION`` where truncated.
- ``ADVANTAGE``, ``RETURN``: written by advantage estimation.
- ``INITIAL_STATE``: ``[B, ...]`` agent recurrent state at the batch start.
- ``POLICY_VERSION``: ``[T, B]`` int64 in ``AGENT_INFO``: version of the
  shared weights that chose each action (recorded by a handler that follows
  a learner's weights in another process).
- ``TARGET_LOG_PROB``: ``[T, B]`` log-probabilities of the recorded actions
  under the policy being trained (off-policy corrections such as V-trace).

Multi-agent envs (``A`` = number of agents, see docs/multiagent.md):

- ``AGENT_REWARD``: ``[T, B, A]`` float32 in ``ENV_INFO``: each agent's reward.
- ``AGENT_TERMINATED``: ``[T, B, A]`` bool in ``ENV_INFO``: the agent terminated.
- ``AGENT_TRUNCATED``: ``[T, B, A]`` bool in ``ENV_INFO``: the agent was truncated.
- ``AGENT_MASK``: ``[T, B, A]`` bool in ``ENV_INFO``: the agent acted at this step.
- ``POLICY_INDEX``: ``[T, B, A]`` int16 in ``AGENT_INFO``: the policy that acted.
"""

from __future__ import annotations

OBSERVATION = "observation"
ACTION = "action"
REWARD = "reward"
TERMINATED = "terminated"
TRUNCATED = "truncated"
DONE = "done"
FINAL_OBSERVATION = "final_observation"
FRAMES = "frames"
FRAME_DEPTH = "frame_depth"
ENV_INFO = "env_info"
AGENT_INFO = "agent_info"
VALUE = "value"
PREV_ACTION = "prev_action"
PREV_REWARD = "prev_reward"
VALID = "valid"
BOOTSTRAP_VALUE = "bootstrap_value"
FINAL_VALUE = "final_value"
ADVANTAGE = "advantage"
RETURN = "return_"
INITIAL_STATE = "initial_state"
LOG_PROB = "log_prob"
TARGET_LOG_PROB = "target_log_prob"
POLICY_VERSION = "policy_version"
AGENT_REWARD = "agent_reward"
AGENT_TERMINATED = "agent_terminated"
AGENT_TRUNCATED = "agent_truncated"
AGENT_MASK = "agent_mask"
POLICY_INDEX = "policy_index"

# the fields a replay tree holds (its final observations kept sparsely)
REPLAY_FIELDS = (OBSERVATION, ACTION, REWARD, TERMINATED, TRUNCATED, FINAL_OBSERVATION)
