#!/usr/bin/env bash
# Creates (or reuses) a separate Python environment for benchmarks that compare speechkit with a peer library
# that must be built for the exact torch it runs on (torchaudio), and prints the path of its python.
#
# torchaudio releases are built against one torch minor version each; when the project's own environment has
# a newer torch than the newest torchaudio, the comparison runs here instead: torch and torchaudio of one
# release, speechkit's runtime dependencies, and speechkit itself from this checkout (--no-deps, editable, so
# the benchmark measures the code in the working tree).
#
#   PEER_TORCH=2.11 bash benchmarks/peer_env.sh                    # default 2.11: torch 2.11.*, torchaudio 2.11.*
#   PEER_TORCH_INDEX=https://download.pytorch.org/whl/cpu bash benchmarks/peer_env.sh   # CPU-only wheels
#   $(bash benchmarks/peer_env.sh) benchmarks/separation.py --presets small
#
# Without PEER_TORCH_INDEX the wheels come from the default package index (on Linux x86-64 these are the CUDA
# builds, which run on CPU too but download more). The environment lives in
# ${XDG_CACHE_HOME:-~/.cache}/speechkit/peer-torch<version>; set SPEECHKIT_PEER_VENV to choose the folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

version=${PEER_TORCH:-2.11}
venv=${SPEECHKIT_PEER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/speechkit/peer-torch$version}
log() { echo "[peer_env] $*" >&2; }
pip_install() { "$venv/bin/python" -m pip install -q "$@" 2>&1 | { grep -v '^WARNING: Location' || true; } >&2; }

if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  log "creating $venv with torch $version.* and torchaudio $version.*"
  rm -rf "$venv"
  python3 -m venv "$venv"
  pip_install --upgrade pip
  index=()
  if [ -n "${PEER_TORCH_INDEX:-}" ]; then index=(--index-url "$PEER_TORCH_INDEX"); fi
  # torch and torchaudio first, alone, so that nothing later can move torch to another version.
  pip_install "${index[@]}" "torch==$version.*" "torchaudio==$version.*"
  # speechkit's runtime dependencies (torch pinned above) and the separation extra.
  deps=$("$venv/bin/python" - <<'PY'
import re
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
names = project["dependencies"] + project["optional-dependencies"]["separation"]
print(" ".join(n for n in names if re.split(r"[<>=!~ \[]", n)[0] != "torch"))
PY
)
  # shellcheck disable=SC2086
  pip_install $deps "setuptools>=70.1" "torch==$version.*"  # 70.1+: editable installs without wheel
  "$venv/bin/python" - "$version" <<'PY'
import sys

import torch
import torchaudio

for name, module in (("torch", torch), ("torchaudio", torchaudio)):
    if not module.__version__.startswith(sys.argv[1] + "."):
        sys.exit(f"[peer_env] {name} {module.__version__} installed, {sys.argv[1]}.* expected")
PY
  touch "$venv/.complete"
fi
"$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || pip_install --no-deps -e .
echo "$venv/bin/python"
