#!/usr/bin/env bash
# Installs everything Ridgeline needs on a fresh Debian 12 machine (as root), idempotently:
# bubblewrap and python3-venv from Debian, a virtual environment in .venv with the package and the
# extras named in $RIDGELINE_EXTRAS (default: dev), and the default sandbox image.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="${RIDGELINE_EXTRAS:-dev}"
need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
/usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: please install ${need_apt[*]} (apt-get install -y ${need_apt[*]})" >&2
    exit 1
  fi
  echo "bootstrap: installing ${need_apt[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

py="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $py"
  "$py" -m venv .venv
fi
stamp=".venv/.ridgeline-installed-$(cat pyproject.toml | sha256sum | cut -c1-12)-${extras//,/_}"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: installing ridgeline[$extras] into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[$extras]"
  rm -f .venv/.ridgeline-installed-*
  touch "$stamp"
fi
# The default environment image: a Python with pytest & co. layered on Debian's /usr/bin/python3.
.venv/bin/ridgeline image build --quiet
