"""Export a trained policy to one file and load it back to act without a sampler.

- :func:`export_policy` writes weights, the architecture arguments, the
  spaces, the observation normalizer's statistics and what the policy was
  trained with, as plain data (``torch.load(weights_only=True)`` reads it);
- :func:`load_policy` reads such a file, or a run directory (its export or
  its newest checkpoint), and returns a :class:`Policy` whose
  ``act(observation)`` takes raw gymnasium observations;
- :class:`PolicyExport` is what a training script hands to
  :func:`~parllel.patterns.run_training` so the run exports its policy;
- :func:`register_agent_builder` makes an agent of your own exportable.

Example::

    export_policy(run.path, agent, observation_normalizer=normalizer,
                  algorithm="PPO", env_id="Pendulum-v1")
    policy = load_policy(run.path)
    action = policy.act(observation)
"""

from parllel.torch.export.artifact import (
    POLICY_FILE,
    PolicyRecord,
    describe_policy,
    export_policy,
    read_policy_file,
)
from parllel.torch.export.builders import AgentBuilder, register_agent_builder
from parllel.torch.export.policy import Policy, load_policy
from parllel.torch.export.run_export import PolicyExport
from parllel.torch.export.spec import SPEC_FILE, write_policy_spec

__all__ = [
    "POLICY_FILE",
    "SPEC_FILE",
    "AgentBuilder",
    "Policy",
    "PolicyExport",
    "PolicyRecord",
    "describe_policy",
    "export_policy",
    "load_policy",
    "read_policy_file",
    "register_agent_builder",
    "write_policy_spec",
]
