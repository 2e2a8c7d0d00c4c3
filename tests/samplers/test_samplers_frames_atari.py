"""One stored frame per step on real ALE games (ale-py's bundled ROMs).

``make_atari_env``'s stack (gymnasium's ``AtariPreprocessing`` and
``FrameStackObservation(4)``, episodic life, episodes cut by ALE's frame
limit so truncations occur too), and EnvPool's own (``stack_num=4``): a few
hundred steps per env, sampled with whole stacks and with ``frame_stack=4``,
must agree bit for bit. EnvPool's episodic life keeps its stack across lost
lives: refused with a clear error.
"""

from __future__ import annotations

from functools import partial

import pytest

from parllel.cages import CageOptions
from parllel.envs.atari import make_atari_env
from parllel.errors import EnvError
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


def envpool_pair(**kwargs):
    """Whole stacks and frame_stack=4 over two EnvPools of Breakout (2 envs)."""
    pytest.importorskip("envpool", reason="needs the envpool extra")
    from parllel.interop import make_envpool_cage

    def make_cage(n_envs, env_offset):
        return make_envpool_cage(
            "Breakout-v5", n_envs, options=CageOptions(seed=7, env_offset=env_offset), num_threads=1,
            **kwargs,
        )  # fmt: skip

    return build_pair(None, 2, 32, 4, make_cage=make_cage)


@pytest.mark.timeout(180)
def test_envpool_frame_tree_equals_whole_stacks():
    plain, frame = envpool_pair(episodic_life=False, max_episode_steps=70)
    try:
        terminated, truncated = run_pair(plain, frame, 4, 6)
        assert truncated  # its resets repeat the reset frame too
    finally:
        close_side(plain)
        close_side(frame)


@pytest.mark.timeout(180)
def test_envpool_episodic_life_is_refused():
    _, frame = envpool_pair(episodic_life=True)
    try:
        with pytest.raises(EnvError, match="episodic_life=False"):
            for _ in range(12):
                frame[0].collect_batch()
    finally:
        close_side(frame)
