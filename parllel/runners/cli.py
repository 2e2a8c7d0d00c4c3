"""Moved to :mod:`parllel.runtime.cli`; this path keeps working, with a
:class:`DeprecationWarning`, for one release."""

from parllel._deprecation import moved_module

__getattr__ = moved_module(__name__, "parllel.runtime.cli")
