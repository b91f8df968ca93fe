# Sourced by every Buildkite step: puts the pinned tools (.buildkite/tools.txt: nox, uv, hashed) on PATH.
# They live in a venv outside the checkout, named by the lock's hash: made once per agent and lock, kept
# across jobs and checkouts, made again when the pins change or an install was cut short.
set -euo pipefail
stackgate_lock=".buildkite/tools.txt"
stackgate_tools="${STACKGATE_TOOLS:-${HOME}/.cache/stackgate/tools}/$(sha256sum "$stackgate_lock" | cut -c1-16)"
if [ ! -e "$stackgate_tools/installed" ]; then
  rm -rf "$stackgate_tools"
  python3 -m venv "$stackgate_tools"
  "$stackgate_tools/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes \
    --no-deps -r "$stackgate_lock"
  touch "$stackgate_tools/installed"
fi
export PATH="$stackgate_tools/bin:$PATH"
echo "tools: $(nox --version 2>&1), $(uv --version) ($stackgate_tools)"
