"""Names of the sample-tree fields, defined once.

Samplers write these fields, transforms read and add to them, algorithms
consume them; a typo in a constant is an ``AttributeError`` at import time.
``T`` is the batch length and ``B`` the number of envs: ``OBSERVATION`` is
``[T + 1, B, ...]`` (row ``T``: the bootstrap observation), most others are
``[T, B]``. Every field's shape and meaning: docs/samplers.md ("Buffer
layout"); the multi-agent ones: docs/multiagent.md.
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
