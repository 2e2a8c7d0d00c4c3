"""One stored frame per step on real ALE games (ale-py's bundled ROMs).

``make_atari_env``'s stack (gymnasium's ``AtariPreprocessing`` and
``FrameStackObservation(4)``, episodic life, episodes cut by ALE's frame
limit so truncations occur too): a few hundred steps per env, sampled with
whole stacks and with ``frame_stack=4``, must agree bit for bit.
"""

from __future__ import annotations

from functools import partial

import pytest

from parllel.envs.atari import make_atari_env
from tests.helpers.frame_sampling import build_pair, close_side
from tests.samplers.test_samplers_frames import run_pair

pytest.importorskip("ale_py", reason="needs the atari extra")
pytest.importorskip("cv2", reason="needs the atari extra")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("process", [False, True])
def test_breakout_frame_tree_equals_whole_stacks(process):
    factory = partial(
        make_atari_env,
        "ALE/Breakout-v5",
        episodic_life=True,
        max_num_frames_per_episode=360,  # 90 steps: truncations as well
    )
    plain, frame = build_pair(factory, 2, 32, 4, process=process)
    try:
        terminated, truncated = run_pair(plain, frame, 4, 8)  # 256 steps per env
        assert terminated and truncated  # lost lives and cut episodes
    finally:
        close_side(plain)
        close_side(frame)
