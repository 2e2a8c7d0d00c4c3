"""make_vec and make_sb3_vec_env over worker processes with replies of any size.

Infos, frames and call results over a pipe's buffer (~250 KB) used to hang
the workers and the main process for good (issue 26); each test compares
with the in-process reference (SyncVectorEnv, DummyVecEnv) and hung on
that code.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv

from parllel.cages import ProcessLayout
from parllel.interop import make_sb3_vec_env, make_vec
from tests.helpers.big_reply_envs import FRAME_SHAPE, TEN_MB, BigReplyEnv, pattern
from tests.helpers.interop_envs import assert_same

N_ENVS = 4
MB = 1_000_000
ENV_FN = partial(BigReplyEnv, info_bytes=MB, final_info_bytes=MB)

# workers only, and the main process's share (env 0) next to workers
LAYOUTS = {
    "workers": {"layout": ProcessLayout(n_workers=2)},
    "main-share": {"layout": ProcessLayout(n_workers=2, main_process_envs=1)},
}


@pytest.fixture(params=list(LAYOUTS))
def layout(request):
    return {"parallel": True, "start_method": "fork", **LAYOUTS[request.param]}


@pytest.mark.timeout(60)
def test_make_vec_keeps_megabyte_infos_and_ten_mb_frames(layout):
    reference = SyncVectorEnv([ENV_FN] * N_ENVS)
    ours = make_vec(ENV_FN, N_ENVS, **layout)
    try:
        assert_same(reference.reset(seed=1), ours.reset(seed=1))
        for t in range(4):  # an episode ends at step 3: final_blob, reset_blob
            actions = np.array([t % 2] * N_ENVS)
            assert_same(reference.step(actions), ours.step(actions), f"step {t}")
        frames = ours.render()
        assert [frame.shape for frame in frames] == [FRAME_SHAPE] * N_ENVS
        for blob in ours.call("blob", TEN_MB):
            np.testing.assert_array_equal(blob, pattern(TEN_MB))
    finally:
        reference.close()
        ours.close()


@pytest.mark.timeout(60)
def test_make_sb3_vec_env_keeps_megabyte_infos_and_ten_mb_frames(layout):
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    reference = vec_env.DummyVecEnv([ENV_FN] * N_ENVS)
    ours = make_sb3_vec_env(ENV_FN, N_ENVS, **layout)
    try:
        reference.seed(1)
        ours.seed(1)
        assert_same(reference.reset(), ours.reset())
        assert_same(reference.reset_infos, ours.reset_infos)
        for t in range(4):
            actions = np.array([t % 2] * N_ENVS)
            assert_same(reference.step(actions), ours.step(actions), f"step {t}")
        frames = ours.get_images()
        assert [frame.shape for frame in frames] == [FRAME_SHAPE] * N_ENVS
        for blob in ours.env_method("blob", TEN_MB, indices=[1, 3]):
            np.testing.assert_array_equal(blob, pattern(TEN_MB))
    finally:
        reference.close()
        ours.close()
