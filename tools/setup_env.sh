#!/usr/bin/env bash
# Creates (or reuses) the Python environment speechkit runs in, and prints the path of its python.
#
# The environment lives outside the clone, keyed by a hash of the install files, so a second clone or a
# second run reuses it; set SPEECHKIT_VENV to choose the folder yourself. The speech engines the built-in
# corpus uses (flite, festival, espeak-ng) come from the system's package manager when they are missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

log() { echo "[setup] $*" >&2; }
# pip, quiet: only real problems reach the terminal.
pip_install() { "$venv/bin/python" -m pip install -q "$@" 2>&1 | { grep -v '^WARNING: Location' || true; } >&2; }

install_speech_engines() {
  command -v flite >/dev/null && command -v text2wave >/dev/null && command -v espeak-ng >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing the speech engines (flite, festival, espeak-ng) with apt-get"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      flite festival festvox-kdlpc16k espeak-ng >/dev/null) \
      || log "could not install flite/festival/espeak-ng; corpus tests will be skipped"
  else
    log "speech engines missing and not root: install them (apt-get install flite festival festvox-kdlpc16k espeak-ng)"
  fi
}

# Headless Chromium drives the page of `speechkit serve` in its tests (they are skipped without it).
install_browser() {
  command -v chromium >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing chromium with apt-get (for the web page tests of speechkit serve)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || log "could not install chromium; the web page tests will be skipped"
  else
    log "chromium missing and not root: install it (apt-get install chromium) to run the web page tests"
  fi
}

key=$(cat pyproject.toml tools/setup_env.sh | sha256sum | cut -c1-16)
venv=${SPEECHKIT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/speechkit/venv-$key}
mkdir -p "$(dirname "$venv")"
# Two set-ups at once (two clones, the demo beside the tests) would build the same folder over each other:
# the second waits for the first and then finds the environment complete. The lock is held to the end (the
# package link and apt-get would collide too) and released when this script exits.
exec 9>"$venv.lock"
flock 9
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  log "creating $venv (first run: installs torch and the other dependencies, a few minutes)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  pip_install --upgrade pip
  # Dependencies only; the package itself is linked below so that any clone can reuse this environment.
  deps=$("$venv/bin/python" - <<'PY'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print(" ".join(project["dependencies"] + project["optional-dependencies"]["dev"]))
PY
)
  # shellcheck disable=SC2086
  pip_install $deps
  touch "$venv/.complete"
fi
"$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || pip_install --no-deps -e .
install_speech_engines
install_browser
echo "$venv/bin/python"
