"""Peer-test shim: gymnasium's / SB3's vector env constructors -> parllel's adapters.

SyncVectorEnv(...)  -> make_vec(..., parallel=False)
AsyncVectorEnv(...) -> make_vec(..., parallel=True, n_workers=2)  (all envs in workers)
ParllelSerialVecEnv / ParllelProcessVecEnv: the same for SB3 (make_sb3_vec_env).
Only construction changes; arguments that only gymnasium's AsyncVectorEnv knows
(shared_memory, daemon) are dropped, others pass through (and fail loudly).
"""

from __future__ import annotations

from gymnasium.vector import AutoresetMode

from parllel.interop import make_sb3_vec_env, make_vec


def _fns(env_fns):
    return env_fns if isinstance(env_fns, (list, tuple)) else list(env_fns)


def _process_kwargs(n, context=None):
    kwargs = {"n_workers": min(2, n), "main_process_envs": 0}
    if context is not None:
        kwargs["start_method"] = context
    return kwargs


def SyncVectorEnv(
    env_fns,
    copy=True,
    observation_mode="same",
    autoreset_mode=AutoresetMode.NEXT_STEP,
    **kwargs,
):
    if observation_mode != "same":
        kwargs["observation_mode"] = observation_mode
    env_fns = _fns(env_fns)
    return make_vec(
        env_fns,
        len(env_fns),
        parallel=False,
        copy=copy,
        autoreset_mode=autoreset_mode,
        **kwargs,
    )


def AsyncVectorEnv(
    env_fns,
    shared_memory=True,
    copy=True,
    context=None,
    daemon=True,
    worker=None,
    observation_mode="same",
    autoreset_mode=AutoresetMode.NEXT_STEP,
    **kwargs,
):
    if observation_mode != "same":
        kwargs["observation_mode"] = observation_mode
    if worker is not None:
        kwargs["worker"] = worker
    env_fns = _fns(env_fns)
    return make_vec(
        env_fns,
        len(env_fns),
        parallel=True,
        copy=copy,
        autoreset_mode=autoreset_mode,
        **_process_kwargs(len(env_fns), context),
        **kwargs,
    )


def ParllelSerialVecEnv(env_fns, **kwargs):
    env_fns = _fns(env_fns)
    return make_sb3_vec_env(env_fns, len(env_fns), parallel=False, **kwargs)


def ParllelProcessVecEnv(env_fns, start_method=None, **kwargs):
    env_fns = _fns(env_fns)
    return make_sb3_vec_env(
        env_fns,
        len(env_fns),
        parallel=True,
        **_process_kwargs(len(env_fns), start_method),
        **kwargs,
    )
