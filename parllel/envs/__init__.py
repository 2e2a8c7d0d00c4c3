"""Env construction for common benchmarks (:mod:`parllel.envs.atari`: the Atari stack)."""
