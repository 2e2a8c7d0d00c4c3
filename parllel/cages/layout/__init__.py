"""The layout policy of a process cage: which process steps which envs.

:class:`ProcessLayout` (``policy``: the split and whether envs move),
:class:`LoadBalancer` (``balance``: the moves) and :func:`suggest_layout`
(``choice``: the cost model behind ``build_cage(parallel="auto")``). Users
import the names from :mod:`parllel.cages`.
"""

__all__: list[str] = []
