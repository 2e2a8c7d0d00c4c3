"""Policy files shared by both backends, and a JAX run's policy playing in numpy.

Backend-free (neither torch nor JAX is imported here):

- the plain-data pieces of every export: spaces (:mod:`~parllel.export.spaces`),
  the observation normalizer (:mod:`~parllel.export.normalizer`), the env
  factory reference (:mod:`~parllel.export.factory`), the header
  (:mod:`~parllel.export.header`), a run's ``policy_spec.json`` and
  checkpoints (:mod:`~parllel.export.spec`, :mod:`~parllel.export.checkpoints`),
  what a run exports (:class:`~parllel.export.run_export.PolicyExporter`);
- a JAX run's ``policy.npz`` (:mod:`~parllel.export.npz`, written by
  :func:`parllel.jax.export.export_policy`) and
  :func:`~parllel.export.numpy_policy.load_numpy_policy`, which plays it in
  numpy (:mod:`~parllel.export.network`, :mod:`~parllel.export.actions`).

A torch run's ``policy.pt`` is :mod:`parllel.torch.export`'s;
``python -m parllel.enjoy`` plays either.
"""

from parllel.export.numpy_policy import load_numpy_policy

__all__ = ["load_numpy_policy"]
