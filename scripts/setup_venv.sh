#!/usr/bin/env bash
# Creates .venv with Python 3.10, installs the pinned requirements, and the
# project itself, editable (pyproject.toml: `agents` importable from anywhere).
# Re-runs an install only when what it installs changed.
#   scripts/setup_venv.sh          the local set (requirements.txt)
#   scripts/setup_venv.sh --cloud  also what launching on Google Cloud needs
#                                  (requirements-cloud.txt)
set -euo pipefail
cd "$(dirname "$0")/.."

# A pyenv shim may exist for a version that is not selected: run it to check.
works() { "$1" -c 'import sys, venv; assert sys.version_info[:2] == (3, 10)' >/dev/null 2>&1; }

find_python310() {
  if command -v python3.10 >/dev/null 2>&1 && works python3.10; then
    command -v python3.10
    return
  fi
  if command -v pyenv >/dev/null 2>&1; then
    local root
    root=$(pyenv root)
    for candidate in "$root"/versions/3.10*/bin/python; do
      if [ -x "$candidate" ] && works "$candidate"; then
        echo "$candidate"
        return
      fi
    done
  fi
  return 1
}

cloud=no
if [ "${1:-}" = "--cloud" ]; then
  cloud=yes
fi

install_cloud() {
  local stamp=.venv/.requirements-cloud.sha256 wanted
  wanted=$(cat requirements.txt requirements-cloud.txt | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    return
  fi
  .venv/bin/python -m pip install --quiet -r requirements-cloud.txt -c requirements.txt
  echo "$wanted" > "$stamp"
}

# The project, editable, against this checkout (its dependencies are the ones
# just installed: --no-deps). Again when pyproject.toml changes or the
# checkout moved.
install_project() {
  local stamp=.venv/.project.sha256 wanted
  wanted=$( (cat pyproject.toml; pwd) | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    return
  fi
  .venv/bin/python -m pip install --quiet --no-deps -e .
  echo "$wanted" > "$stamp"
}

stamp=.venv/.requirements.sha256
wanted=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
  install_project
  if [ "$cloud" = yes ]; then
    install_cloud
  fi
  exit 0
fi

if [ ! -x .venv/bin/python ]; then
  if ! python=$(find_python310); then
    cat >&2 <<'MSG'
error: Python 3.10 was not found (TensorFlow 2.8, Reverb 0.7 and Launchpad 0.5
publish wheels for Python <= 3.10 only).
Install it, then run the command again, for example:
  - Debian/Ubuntu:  sudo apt-get install python3.10 python3.10-venv
  - pyenv:          pyenv install 3.10.13
  - conda:          conda create -n py310 python=3.10 && conda activate py310
MSG
    exit 1
  fi
  echo "Creating .venv with $python"
  "$python" -m venv .venv || { rm -rf .venv; exit 1; }
fi
.venv/bin/python -m pip install --quiet "pip==24.3.1"
.venv/bin/python -m pip install --quiet -r requirements.txt
echo "$wanted" > "$stamp"
install_project
if [ "$cloud" = yes ]; then
  install_cloud
fi
