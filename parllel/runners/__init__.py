"""Outer loops and run-time services: the on-policy runner, checkpoints,
run directories and seeding."""

from parllel.runners.checkpoint import (
    capture_rng_state,
    check_config,
    check_state_dict,
    check_state_shapes,
    latest_checkpoint,
    load_checkpoint,
    load_latest_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from parllel.runners.off_policy import OffPolicyRunner
from parllel.runners.on_policy import OnPolicyRunner
from parllel.runners.run_directory import RunDirectory
from parllel.runners.runner import Callback, Runner
from parllel.runners.seeding import Seeds, seed_everything

__all__ = [
    "Callback",
    "OffPolicyRunner",
    "OnPolicyRunner",
    "RunDirectory",
    "Runner",
    "Seeds",
    "capture_rng_state",
    "check_config",
    "check_state_dict",
    "check_state_shapes",
    "latest_checkpoint",
    "load_checkpoint",
    "load_latest_checkpoint",
    "restore_rng_state",
    "save_checkpoint",
    "seed_everything",
]
