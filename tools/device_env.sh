#!/usr/bin/env bash
# Source on the GPU machine from the repository root, after ../shared/gpu's device-setup.sh
# has installed TVM: points the package at the C++ runtime carried in .gpu/lib (built on
# this x86-64 host; libtvm_ffi is found through tvm_ffi, which the package imports first).
export TVM_TMA_RUNTIME_LIB="$PWD/.gpu/lib/libtvm_tma_runtime.so"
export PYTHONUNBUFFERED=1
python3 -c "import tvm, tvm_tma, torch; print('device:', torch.cuda.get_device_name(0), 'tvm', tvm.__version__)"
