# Shared by scripts/demo, scripts/test, scripts/bench: install missing Debian packages, build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FRAGSIM_BUILD_DIR:-$ROOT/build}"
PACKAGES=(cmake g++ make pkg-config libboost-program-options-dev nlohmann-json3-dev libfmt-dev catch2 libzstd-dev
  libsimdjson-dev clang-format libprotobuf-dev protobuf-compiler python3 python3-dev pybind11-dev zlib1g-dev)

install_deps() {
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# Debian's python3 (the one python3-dev and pybind11-dev are for), whatever else is first on PATH.
PYTHON=/usr/bin/python3

# build [DIR] [cmake args...]: configure and build (Release, warnings as errors by default; the
# Python module always: a missing pybind11 fails here instead of leaving the module out).
# FRAGSIM_BUILD=product builds only what is installed (fragsim, the Python module and, with a
# CUDA toolkit, fragsim-cuda-replay), not the tests.
build_in() {
  local dir="$1"
  shift
  cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DFRAGSIM_WERROR=ON -DFRAGSIM_PYTHON=ON \
    -DPython3_EXECUTABLE="$PYTHON" "$@" >/dev/null
  if [ "${FRAGSIM_BUILD:-all}" = product ]; then
    local targets=(fragsim _fragsim)
    cmake --build "$dir" --target help | grep ' fragsim-cuda-replay$' >/dev/null && targets+=(fragsim-cuda-replay)  # no -q: pipefail
    cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}"
  else
    cmake --build "$dir" -j"$(nproc)"
  fi
}
build() { build_in "$BUILD" "$@"; }
