#!/usr/bin/env bash
# Creates .venv with Python 3.10, installs the pinned requirements, and the
# project itself, editable (pyproject.toml: `agents` importable from anywhere).
# Re-runs an install only when what it installs changed.
#   scripts/setup_venv.sh          the local set (requirements.txt)
#   scripts/setup_venv.sh --cloud  also what launching on Google Cloud needs
#                                  (requirements-cloud.txt)
#   scripts/setup_venv.sh --which-python
#                                  only says which Python 3.10 it would make
#                                  .venv with (the line shown below), exits: 0
#                                  if it found one, 1 (and how to install
#                                  one) if not; installs nothing
# The Python 3.10 that makes .venv: `python3.10` on PATH (an activated conda
# environment's too), else pyenv's, else the one `uv python find` gives (uv's
# own, `uv python install 3.10`; the script never lets uv download one). The
# first line it prints says which, e.g.
#   setup_venv: using Python 3.10 at <path> (uv)
# or that there is none, followed by how to install one.
set -euo pipefail
cd "$(dirname "$0")/.."

# A pyenv shim may exist for a version that is not selected: run it to check.
works() { "$1" -c 'import sys, venv; assert sys.version_info[:2] == (3, 10)' >/dev/null 2>&1; }

# Sets `python` and `found_by` (where it was found); else `searched` says where
# it looked.
find_python310() {
  local candidate root
  if command -v python3.10 >/dev/null 2>&1 && works python3.10; then
    python=$(command -v python3.10) found_by=PATH
    return
  fi
  if command -v python3.10 >/dev/null 2>&1; then
    searched="python3.10 on PATH: not a working 3.10"
  else
    searched="python3.10 on PATH: none"
  fi
  if command -v pyenv >/dev/null 2>&1; then
    root=$(pyenv root)
    for candidate in "$root"/versions/3.10*/bin/python; do
      if [ -x "$candidate" ] && works "$candidate"; then
        python=$candidate found_by=pyenv
        return
      fi
    done
    searched="$searched; pyenv: no 3.10 among its versions"
  else
    searched="$searched; pyenv: not installed"
  fi
  if command -v uv >/dev/null 2>&1; then
    # --system: not a virtual environment's Python; UV_PYTHON_DOWNLOADS=never:
    # uv only looks, downloads nothing.
    if candidate=$(UV_PYTHON_DOWNLOADS=never uv python find --system 3.10 \
                     2>/dev/null) && [ -n "$candidate" ] && works "$candidate"
    then
      python=$candidate found_by=uv
      return
    fi
    searched="$searched; uv: found no 3.10"
  else
    searched="$searched; uv: not installed"
  fi
  return 1
}

no_python310() {
  echo "setup_venv: no Python 3.10 found ($searched)"
  echo "(TensorFlow 2.8, Reverb 0.7 and Launchpad 0.5 publish wheels for Python"
  echo "<= 3.10 only)."
  if command -v uv >/dev/null 2>&1; then
    cat <<'MSG'
uv is installed: `uv python install 3.10` installs one (a standalone CPython
build, in your home directory), which this script then finds by itself. Run
the command again after it.
MSG
    return
  fi
  cat <<'MSG'
Install one, then run the command again. Ubuntu 24.04 and Debian 12/13 package
no Python 3.10; what works there (and elsewhere):
  - uv (a standalone CPython build in your home directory, which this script
    then finds by itself):
      pipx install uv            (Ubuntu/Debian: sudo apt-get install pipx;
                                  or pip install --user uv where pip allows it)
      uv python install 3.10
  - conda (Miniforge or Miniconda):
      conda create -n apex python=3.10
      conda activate apex        (its python3.10 on PATH), then make venv
  - pyenv (builds it from source; its 3.10 is found by this script):
      pyenv install 3.10
  - Ubuntu 22.04 only, which still packages it:
      sudo apt-get install python3.10 python3.10-venv
MSG
}

cloud=no which_only=no
for argument in "$@"; do
  case "$argument" in
    --cloud) cloud=yes ;;
    --which-python) which_only=yes ;;
    *) echo "usage: scripts/setup_venv.sh [--cloud | --which-python]" >&2
       exit 2 ;;
  esac
done

if [ "$which_only" = yes ]; then
  if ! find_python310; then
    no_python310 >&2
    exit 1
  fi
  echo "setup_venv: using Python 3.10 at $python ($found_by)"
  exit 0
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
  if ! find_python310; then
    no_python310 >&2
    exit 1
  fi
  echo "setup_venv: using Python 3.10 at $python ($found_by)"
  echo "Creating .venv with it"
  "$python" -m venv .venv || { rm -rf .venv; exit 1; }
else
  echo "setup_venv: using the existing .venv; installing requirements.txt"
fi
.venv/bin/python -m pip install --quiet "pip==24.3.1"
.venv/bin/python -m pip install --quiet -r requirements.txt
echo "$wanted" > "$stamp"
install_project
if [ "$cloud" = yes ]; then
  install_cloud
fi
