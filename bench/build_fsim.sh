#!/usr/bin/env bash
# Build TVM's VTA fsim (libvta_fsim.so and the libtvm_runtime.so it needs) for bench/fsim_ratio.py.
#
#   bench/build_fsim.sh TVM_SOURCE_DIR [CONFIG_JSON]
#
# TVM_SOURCE_DIR: a TVM source tree that still has VTA (v0.14.0, or any commit before VTA was phased
# out), with the submodules 3rdparty/vta-hw, 3rdparty/dlpack and 3rdparty/dmlc-core, e.g.
#   git clone --recursive --branch v0.14.0 https://github.com/apache/tvm TVM_SOURCE_DIR
# CONFIG_JSON: the VTA config fsim is built for (default: this checkout's config/vta_config.json).
# Needs cmake, a C++17 compiler and ninja or make.  Builds into TVM_SOURCE_DIR/build-vtasim-fsim-NAME
# (NAME: the config file's name without .json) and prints that directory (pass it to
# bench/fsim_ratio.py or bench/fsim_fuzz.py as --fsim); nothing outside it is written.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 TVM_SOURCE_DIR [CONFIG_JSON]" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
config=${2:-$here/config/vta_config.json}
for need in CMakeLists.txt cmake/config.cmake cmake/modules/VTA.cmake 3rdparty/vta-hw/src/sim/sim_driver.cc \
            3rdparty/dlpack/include/dlpack/dlpack.h 3rdparty/dmlc-core/include/dmlc/logging.h; do
  if [ ! -f "$src/$need" ]; then
    echo "$0: $src/$need is missing: TVM_SOURCE_DIR must be a TVM tree with VTA and its submodules" >&2
    exit 2
  fi
done
if [ ! -f "$config" ]; then
  echo "$0: config $config is missing" >&2
  exit 2
fi
out=$src/build-vtasim-fsim-$(basename "$config" .json)
mkdir -p "$out"
cp "$src/cmake/config.cmake" "$out/config.cmake"
cat >> "$out/config.cmake" <<'EOF'
# bench/build_fsim.sh: the VTA fast simulator and the runtime only
set(USE_LLVM OFF)
set(USE_VTA_FSIM ON)
set(USE_LIBBACKTRACE OFF)
set(USE_CUDA OFF)
set(USE_OPENCL OFF)
set(USE_VULKAN OFF)
set(USE_MICRO OFF)
set(USE_GTEST OFF)
set(USE_PROFILER OFF)
set(SUMMARIZE OFF)
EOF
cp "$config" "$out/vta_config.json"     # VTA.cmake reads the config from the build directory
gen=()
if command -v ninja >/dev/null; then gen=(-G Ninja); fi
cmake -S "$src" -B "$out" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log"
cmake --build "$out" --target tvm_runtime vta_fsim --parallel "$(nproc)"
echo "$out"
