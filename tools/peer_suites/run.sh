#!/usr/bin/env bash
# Runs gymnasium's tests/vector (top-level test files; vector/utils builds no vector env)
# and SB3's tests/test_vec_envs.py against parllel's adapters (construction swapped by
# parllel_shim.py: SyncVectorEnv -> make_vec serial, AsyncVectorEnv -> make_vec process
# with 2 workers; SB3: ParllelSerialVecEnv / ParllelProcessVecEnv added to VEC_ENV_CLASSES)
# and prints pass/fail/skip counts and every failure, one line each.
# SB3's SubprocVecEnv-only tests and parametrizations are deselected (not parllel's).
# usage: [SUITES="gym sb3"] run.sh [CODE_DIR] [OUT_DIR]
#   CODE_DIR: a directory holding the parllel package (required;
#             e.g. a `git archive HEAD parllel` snapshot, so edits do not disturb a run)
#   OUT_DIR:  where logs and junit xml go (default ./out)
set -u
CODE=${1:?give a directory holding the parllel package, e.g. a git archive of parllel/}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mkdir -p "${2:-$HERE/out}" && cd "${2:-$HERE/out}" && pwd)
cd "$HERE"
export PYTHONPATH="$CODE:$HERE"
python -c 'import parllel; print("parllel from", parllel.__file__)'
COMMON=(-v -p no:cacheprovider -p no:randomly --timeout 120 --durations=15 -rfEs --tb=line)
for suite in ${SUITES:-gym sb3}; do
  if [ "$suite" = gym ]; then
    timeout 5400 python -m pytest gym_tests/vector --ignore=gym_tests/vector/utils \
      "${COMMON[@]}" --junitxml="$OUT/results-gym.xml" > "$OUT/log-gym.txt" 2>&1
  else
    timeout 5400 python -m pytest sb3_tests/test_vec_envs.py -k "not Subproc and not subproc" \
      "${COMMON[@]}" --junitxml="$OUT/results-sb3.xml" > "$OUT/log-sb3.txt" 2>&1
  fi
  echo "== $suite: $(grep -E '^=+ .*(passed|failed).* in ' "$OUT/log-$suite.txt" | tail -n 1)"
done
# every failure/error, one line each
grep -h "^FAILED\|^ERROR" "$OUT"/log-*.txt | cut -c1-250
