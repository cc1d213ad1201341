# Shared by scripts/demo, scripts/test, scripts/test-sanitize, scripts/bench: install missing Debian
# packages, build, run the suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FRAGSIM_BUILD_DIR:-$ROOT/build}"
PACKAGES=(cmake g++ make pkg-config libboost-program-options-dev nlohmann-json3-dev libfmt-dev catch2 libzstd-dev zlib1g-dev
  libsimdjson-dev clang-format libprotobuf-dev protobuf-compiler python3 python3-dev pybind11-dev)

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
# build: the build scripts/test and scripts/demo share (build/), without link-time optimisation:
# with it each program linked (fragsim, the Python module, the test binary) generates the code of
# every library it uses again at link time, minutes on 2 cores for a 4 % faster replay that only
# scripts/bench measures (it builds build-bench/ with it, as installs from CMake's default do).
build() { build_in "$BUILD" -DFRAGSIM_LTO=OFF "$@"; }

# What the test suite needs besides the build: the HTML report test runs the viewer in headless
# Chromium; the batch test a local Slurm; the memory bounds are measured with GNU time; the snapshot
# export is read back by PyTorch's own torch.cuda._memory_viz (Debian's python3-torch, on CPU).
TEST_PACKAGES=(chromium slurm-wlm munge time python3-torch)

# Every Catch2 TEST_CASE must be one ctest test under its own name: a name that test discovery splits
# (at ';') or loses would leave a case that never runs while the count still looks whole. So must
# every test method of tests/python (tests/CMakeLists.txt registers them line by line: a method it
# does not see, one indented otherwise, would never run); those are read from the files' syntax
# trees, without importing them.
same_tests() {
  local dir=$1
  if ! diff <("$dir/tests/fragsim_tests" --list-test-names-only | sed '/^$/d' | sort) \
    <(cd "$dir" && ctest -N -LE python | sed -n 's/^ *Test *#[0-9]*: //p' | sort); then
    echo "$(basename "$0"): ctest's tests in $dir differ from the Catch2 test cases (above)" >&2
    exit 1
  fi
  if grep -q '^FRAGSIM_PYTHON:BOOL=ON' "$dir/CMakeCache.txt" 2>/dev/null &&
    ! diff <( (python3 - "$ROOT/tests/python" <<'PY'
import ast, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("test_*.py")):
    for c in ast.parse(f.read_text()).body:
        if isinstance(c, ast.ClassDef):
            for m in ast.walk(c):
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test"):
                    print(f"python.{f.stem}.{c.name}.{m.name}")
PY
    ) | sort) <(cd "$dir" && ctest -N -L python | sed -n 's/^ *Test *#[0-9]*: //p' | sort); then
    echo "$(basename "$0"): ctest's tests in $dir differ from the test methods of tests/python (above)" >&2
    exit 1
  fi
}
# suite DIR [CTEST-ARGS...]: a build's ctest suite, every test once, on every core; CTEST-ARGS pick
# a part by label (scripts/test: -LE integration; scripts/test-integration: -L integration). A
# selection that finds no test fails (--no-tests=error).
suite() {
  local dir=$1
  shift
  same_tests "$dir"
  (cd "$dir" && ctest --output-on-failure --no-tests=error -j"$(nproc)" "$@")
}
# The build with AddressSanitizer + UndefinedBehaviorSanitizer (UB is fatal) and the suite under it.
# -O1 (assertions on): the suite runs in half the time it takes at -O0, and the sanitizers still see
# every access (clang's AddressSanitizer documentation: "To get a reasonable performance add -O1 or
# higher").
sanitized_suite() {
  local dir="${FRAGSIM_ASAN_BUILD_DIR:-$ROOT/build-asan}"
  build_in "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DFRAGSIM_SANITIZE=ON
  suite "$dir"
}
