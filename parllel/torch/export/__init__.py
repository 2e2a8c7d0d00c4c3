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

:func:`export_policy`, :func:`load_policy`, :class:`Policy` and
:class:`PolicyExport` are imported from :mod:`parllel.torch`; this package
exports :func:`register_agent_builder`; reading and describing a file
(``read_policy_file``, ``describe_policy``) are in
:mod:`parllel.torch.export.artifact`.

Example::

    export_policy(run.path, agent, observation_normalizer=normalizer,
                  algorithm="PPO", env_id="Pendulum-v1")
    policy = load_policy(run.path)
    action = policy.act(observation)
"""

from parllel.torch.export.builders import register_agent_builder

__all__ = [
    "register_agent_builder",
]
