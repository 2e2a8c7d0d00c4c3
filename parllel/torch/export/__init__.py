"""Export a trained policy to one file and load it back to act without a sampler.

:func:`export_policy` writes weights, architecture, spaces and normalizer
statistics as plain data; :func:`load_policy` reads such a file or a run
directory and returns a :class:`Policy` acting on raw observations;
:class:`PolicyExport` lets a run export itself; :func:`register_agent_builder`
makes an agent of your own exportable. See docs/training.md ("Exporting a
policy and watching it")::

    export_policy(run.path, agent, algorithm="PPO", env_id="Pendulum-v1")
    action = load_policy(run.path).act(observation)
"""

from parllel.torch.export.builders import register_agent_builder

__all__ = [
    "register_agent_builder",
]
