#!/usr/bin/env bash
# One run on a GPU machine that proves every CUDA path and measures speed: the tests of tests/gpu, then the
# GPU rows of the ASR, separation, wav2vec 2.0 and batch-inference benchmarks. Sized to finish in under 8
# minutes on one H100, installation included.
#
# Usage:
#   benchmarks/gpu_suite.sh OUT_DIR [--dry-run] [--only STEP[,STEP...]] [--wheels DIR] [--python PY]
#
#   OUT_DIR     gets one log per step (tests.log, asr.log, ...) and table.md: the machine, each step's
#               status and time, and every benchmark's table.
#   --dry-run   on CPU with tiny sizes (seconds): the same steps and scripts, so the suite never rots (the
#               test suite runs it). The CUDA tests are skipped there.
#   --only      rerun some steps, e.g. the ones a first run marked FAILED: tests, asr, separation,
#               wav2vec2, infer.
#   --wheels    install the wheels in DIR first (pip --no-index --no-deps into OUT_DIR/site): for a machine
#               without a package registry whose Python lacks some of speechkit's dependencies.
#   --python    the interpreter (default: python3).
#
# A failing step is marked FAILED in the table and the suite goes on; the exit code is the number of
# failed steps (0: everything passed).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

out=""; dry_run=0; only=""; wheels=""; py=python3
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --only) only="$2"; shift ;;
    --wheels) wheels="$2"; shift ;;
    --python) py="$2"; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_suite.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) if [ -n "$out" ]; then echo "gpu_suite.sh: one OUT_DIR only (got $out and $1)" >&2; exit 2; fi
       out="$1" ;;
  esac
  shift
done
[ -n "$out" ] || { echo "usage: benchmarks/gpu_suite.sh OUT_DIR [--dry-run] [--only STEPS] [--wheels DIR]" >&2
                   exit 2; }
mkdir -p "$out" && out=$(cd "$out" && pwd)
steps=(tests asr separation wav2vec2 infer)
if [ -n "$only" ]; then
  for step in ${only//,/ }; do
    [[ " ${steps[*]} " == *" $step "* ]] || { echo "gpu_suite.sh: unknown step '$step' (${steps[*]})" >&2; exit 2; }
  done
  steps=(${only//,/ })
fi

export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ -n "$wheels" ]; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$out/site" "$wheels"/*.whl \
    || { echo "gpu_suite.sh: could not install the wheels of $wheels" >&2; exit 2; }
  export PYTHONPATH="$repo:$out/site${PYTHONPATH#"$repo"}"
fi
cd "$repo"

if [ "$dry_run" = 1 ]; then
  device=cpu
  tests_args=(tests/gpu tests/unit/engine/test_device_speed.py)
  asr_tiny=(--device cpu --d-models 16 --layers 1 --heads 2 --kernel-size 3 --vocab-size 8 --batch-seconds 4
            --bounds 1 2 --steps 2 --warmup 1 --profile)
  asr_runs=("${asr_tiny[*]}" "${asr_tiny[*]} --dtypes fp32 --loader real --loader-workers 1")
  separation_runs=("--device cpu --presets tiny --batch 1 --seconds 0.2 --steps 1 --dtypes fp32 --no-conv1d")
  wav2vec2_runs=("--device cpu --tiny --configs small --dtypes fp32 --batch-seconds 1 --utterance-seconds 0.5
                  --steps 1 --warmup 1")
  infer_runs=("--device cpu --items 6 --repeats 1 --workers 0 --d-model 32 --layers 1")
else
  device=cuda
  tests_args=(-v tests/gpu tests/unit/engine/test_device_speed.py)
  asr_runs=("--device cuda --d-models 256 --dtypes fp32 bf16 --compile --steps 10 --profile"
            "--device cuda --d-models 256 --dtypes bf16 --loader real --loader-workers 8 --steps 10 --profile")
  separation_runs=("--device cuda --presets small paper --dtypes fp32 bf16 --batch 8 --seconds 4 --steps 10")
  wav2vec2_runs=("--device cuda --configs small,base --dtypes fp32,bf16 --batch-seconds 60 --steps 5")
  infer_runs=("--device cuda:0 --items 200 --repeats 2 --workers 2 --d-model 256 --layers 6")
fi

table="$out/table.md"
{
  echo "# speechkit GPU suite ($([ "$dry_run" = 1 ] && echo "dry run on CPU" || echo "$device"), $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  "$py" - <<'PY'
import platform, torch
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
print(f"machine: {gpu}; CPU {platform.processor() or platform.machine()} x {__import__('os').cpu_count()}; "
      f"torch {torch.__version__}, CUDA {torch.version.cuda}; commit of speechkit below")
PY
  echo "commit: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "| step | status | seconds | log |"
  echo "| --- | --- | --- | --- |"
} >"$table"

failed=0
declare -A status seconds
run_step() {  # run_step NAME COMMAND...: one line of output per command in NAME.log
  local name=$1; shift
  local log="$out/$name.log" started rc=0
  started=$(date +%s)
  : >"$log"
  for command in "$@"; do
    echo "\$ $command" >>"$log"
    # shellcheck disable=SC2086 # each command is a word list by design
    bash -c "$command" >>"$log" 2>&1 || rc=$?
    echo >>"$log"
  done
  seconds[$name]=$(( $(date +%s) - started ))
  if [ "$rc" = 0 ]; then status[$name]=ok; else status[$name]="FAILED (rc $rc)"; failed=$((failed + 1)); fi
  echo "[gpu suite] $name: ${status[$name]} in ${seconds[$name]} s (log: $log)" >&2
}

commands_of() {  # commands_of SCRIPT RUNS...: "python benchmarks/SCRIPT.py RUN" for each run
  local script=$1; shift
  for run in "$@"; do printf '%s\n' "$py benchmarks/$script.py $(echo $run)"; done
}

for step in "${steps[@]}"; do
  case "$step" in
    tests) run_step tests "$py -m pytest -rA -p no:cacheprovider ${tests_args[*]}" ;;
    asr) mapfile -t cmds < <(commands_of asr_train "${asr_runs[@]}"); run_step asr "${cmds[@]}" ;;
    separation)
      mapfile -t cmds < <(commands_of separation "${separation_runs[@]}"); run_step separation "${cmds[@]}" ;;
    wav2vec2) mapfile -t cmds < <(commands_of wav2vec2 "${wav2vec2_runs[@]}"); run_step wav2vec2 "${cmds[@]}" ;;
    infer) mapfile -t cmds < <(commands_of infer "${infer_runs[@]}"); run_step infer "${cmds[@]}" ;;
  esac
done

for step in "${steps[@]}"; do
  echo "| $step | ${status[$step]} | ${seconds[$step]} | $step.log |" >>"$table"
done
for step in "${steps[@]}"; do
  {
    echo
    echo "## $step"
    echo
    if [ "$step" = tests ]; then
      grep -E "^(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) |^=+ .*(passed|failed|skipped|error)" "$out/tests.log"
    else
      # Each command, then the lines of its tables and its "device:" line.
      grep -E '^\$ |^\| |^device:|^machine:' "$out/$step.log"
    fi
  } >>"$table"
done
cat "$table"
exit "$failed"
