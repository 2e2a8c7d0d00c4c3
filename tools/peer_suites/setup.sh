#!/usr/bin/env bash
# Recreates /tmp/interop-peer (or $1): copies of gymnasium's and SB3's tests with only
# the vector-env construction swapped to parllel's adapters (parllel_shim.py), plus run.sh.
# Then: /tmp/interop-peer/run.sh [CODE_DIR] [OUT_DIR]   (see run.sh)
# The peers' tests are not part of parllel: check out gymnasium's and SB3's repositories
# (the versions installed) and point GYM_TESTS at gymnasium's tests/ and SB3_TESTS at
# SB3's tests/.
set -eu
: "${GYM_TESTS:?set GYM_TESTS to a checkout of gymnasium's tests/ directory}"
: "${SB3_TESTS:?set SB3_TESTS to a checkout of stable-baselines3's tests/ directory}"
DEST=${1:-/tmp/interop-peer}
SRC=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DEST" && cd "$DEST"
rm -rf gym_tests sb3_tests
cp -r "$GYM_TESTS" gym_tests && chmod -R u+w gym_tests
# the copied package is gym_tests, not tests
grep -rl "tests\." gym_tests | xargs sed -i 's/^from tests\./from gym_tests./; s/^import tests\./import gym_tests./; s/"tests\./"gym_tests./g'
for f in test_async_vector_env test_autoreset_mode test_observation_mode test_sync_vector_env test_vector_env test_vector_env_info; do
  sed -i '/^from gymnasium.vector import/a from parllel_shim import AsyncVectorEnv, SyncVectorEnv  # noqa: F811  (parllel peer run)' "gym_tests/vector/$f.py"
done
mkdir -p sb3_tests && cp "$SB3_TESTS/test_vec_envs.py" sb3_tests/ && chmod u+w sb3_tests/test_vec_envs.py
python - <<'PY'
p = "sb3_tests/test_vec_envs.py"
s = open(p).read()
old = "VEC_ENV_CLASSES = [DummyVecEnv, SubprocVecEnv]\n"
assert old in s
s = s.replace(old, "from parllel_shim import ParllelProcessVecEnv, ParllelSerialVecEnv  # parllel peer run\n\n"
              "VEC_ENV_CLASSES = [DummyVecEnv, SubprocVecEnv, ParllelSerialVecEnv, ParllelProcessVecEnv]\n", 1)
open(p, "w").write(s)
PY
cp "$SRC/parllel_shim.py" "$SRC/run.sh" . && chmod +x run.sh
echo "ready: $DEST/run.sh [CODE_DIR] [OUT_DIR]"
