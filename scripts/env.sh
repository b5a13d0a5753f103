# Shared settings for the scripts; sourced, not run.
SIGHTLINE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SIGHTLINE_CACHE="${SIGHTLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sightline}"
export SIGHTLINE_VENV="${SIGHTLINE_VENV:-$SIGHTLINE_CACHE/venv}"
# nvcc usually lives outside PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
SIGHTLINE_JOBS="${SIGHTLINE_JOBS:-$(nproc)}"
