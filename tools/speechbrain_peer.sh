#!/usr/bin/env bash
# Installs speechbrain and torchaudio, without their dependencies, into a folder of their own and prints it,
# for the tests that compare speechkit's ECAPA-TDNN import with SpeechBrain's model
# (tests/unit/models/test_speechbrain_import.py):
#   PYTHONPATH=$PWD:$(bash tools/speechbrain_peer.sh) python -m pytest tests/unit/models/test_speechbrain_import.py
# speechbrain imports torchaudio when it is imported, and each torchaudio release requires one torch version;
# installed with --no-deps, torchaudio's Python code runs on a newer torch for what these tests use (the
# model's layers), and the project's environment keeps its torch and stays without torchaudio.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=$(cd "$root" && tools/setup_env.sh)
target=${SPEECHBRAIN_PEER:-${XDG_CACHE_HOME:-$HOME/.cache}/speechkit/speechbrain-peer}
if [ ! -f "$target/.complete" ]; then
  "$py" -m pip install -q --no-deps --target "$target" speechbrain torchaudio >&2
  touch "$target/.complete"
fi
echo "$target"
