#!/usr/bin/env bash
# Wheels for the GPU machine, which runs Python 3.12 with torch, numpy and numba
# (and cloudpickle, opencv-python-headless, typing-extensions, packaging,
# protobuf) but reaches no package registry: what benchmarks/device_check.py
# needs beyond them, as py3.12 manylinux x86_64 wheels, in .whl/
# (git-ignored). parllel itself is not built into a wheel: the device command
# puts the repository's root on PYTHONPATH (the working tree travels with
# every call). Needs only pip (no wheel or setuptools). docs/gpu.md gives the
# one command that installs the wheels there and runs the check.
#
# Usage (from any directory): bash benchmarks/device_wheels.sh
# DEVICE_PYTHON=3.11 bash benchmarks/device_wheels.sh: wheels for another
# Python (e.g. to rehearse the device command in a local venv).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
rm -f .whl/*.whl

download() {
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --python-version "${DEVICE_PYTHON:-3.12}" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d .whl "$@"
}

# gymnasium and its one dependency the machine lacks; ale-py (ROMs bundled)
download gymnasium==1.4.0 farama-notifications==0.0.6
download ale-py==0.12.1
# EnvPool is not carried: its cp312 wheel (1.2.7) alone is 61 MiB, and it
# needs envpool-assets (several packages), dm-env, optree, glfw and matplotlib
# besides: over the 64 MiB a call carries with the working tree. The GPU
# machine's EnvPool rows print "skipped: envpool is not installed".
ls -l .whl
du -ch .whl/*.whl | tail -1
