"""Policy files shared by both backends, and a JAX run's policy playing in numpy.

Backend-free (neither torch nor JAX is imported): the plain-data pieces of
every export (spaces, normalizer, env factory reference, header,
``policy_spec.json``, checkpoints, :class:`~parllel.export.run_export.PolicyExporter`),
and a JAX run's ``policy.npz`` with
:func:`~parllel.export.numpy_policy.load_numpy_policy`, which plays it in
numpy. A torch run's ``policy.pt`` is :mod:`parllel.torch.export`'s.
"""

from parllel.export.numpy_policy import load_numpy_policy

__all__ = ["load_numpy_policy"]
