/*
 * Run-time binding of the CUDA driver (see cuda_driver.h for why there is no link dependency).
 */
#include "cuda_driver.h"

#include <dlfcn.h>

#include <sstream>

namespace tvm_tma {
namespace {

// The versioned soname: the unversioned libcuda.so only exists where the toolkit's stubs or
// the development package are installed, and the stub would "load" but fail every call.
constexpr const char* kLibCuda = "libcuda.so.1";

template <typename Fn>
Fn LookupSymbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

// Resolves every entry point. Required ones that are missing leave the binding unavailable with
// a reason; optional ones simply stay null.
CudaDriver LoadCudaDriver() {
  CudaDriver driver;
  // RTLD_LOCAL: we only reach libcuda through dlsym and must not leak its symbols into the
  // global namespace of the host process. The handle is deliberately never closed.
  void* lib = dlopen(kLibCuda, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    driver.unavailable_reason = std::string("cannot load ") + kLibCuda +
                                " (no NVIDIA driver on this machine?): " + (err ? err : "unknown");
    return driver;
  }
  driver.init = LookupSymbol<cu::InitFn>(lib, "cuInit");
  driver.encode_tiled = LookupSymbol<cu::TensorMapEncodeTiledFn>(lib, "cuTensorMapEncodeTiled");
  driver.encode_im2col =
      LookupSymbol<cu::TensorMapEncodeIm2colFn>(lib, "cuTensorMapEncodeIm2col");
  // cuda.h maps cuMemGetAddressRange to the _v2 ABI (size_t size); the unsuffixed symbol is the
  // legacy 32-bit-size variant, so the suffix matters.
  driver.mem_get_address_range =
      LookupSymbol<cu::MemGetAddressRangeFn>(lib, "cuMemGetAddressRange_v2");
  driver.pointer_get_attribute =
      LookupSymbol<cu::PointerGetAttributeFn>(lib, "cuPointerGetAttribute");
  driver.ctx_get_current = LookupSymbol<cu::CtxGetCurrentFn>(lib, "cuCtxGetCurrent");
  // The _v2 entry points are what cuda.h binds cuCtxPushCurrent/cuCtxPopCurrent to.
  driver.ctx_push_current = LookupSymbol<cu::CtxPushCurrentFn>(lib, "cuCtxPushCurrent_v2");
  driver.ctx_pop_current = LookupSymbol<cu::CtxPopCurrentFn>(lib, "cuCtxPopCurrent_v2");
  driver.device_get = LookupSymbol<cu::DeviceGetFn>(lib, "cuDeviceGet");
  driver.primary_ctx_retain =
      LookupSymbol<cu::DevicePrimaryCtxRetainFn>(lib, "cuDevicePrimaryCtxRetain");
  driver.module_load_data = LookupSymbol<cu::ModuleLoadDataFn>(lib, "cuModuleLoadData");
  driver.module_get_function = LookupSymbol<cu::ModuleGetFunctionFn>(lib, "cuModuleGetFunction");
  driver.func_set_attribute = LookupSymbol<cu::FuncSetAttributeFn>(lib, "cuFuncSetAttribute");
  driver.occupancy_max_active_clusters =
      LookupSymbol<cu::OccupancyMaxActiveClustersFn>(lib, "cuOccupancyMaxActiveClusters");
  driver.get_error_name = LookupSymbol<cu::GetErrorStringFn>(lib, "cuGetErrorName");
  driver.get_error_string = LookupSymbol<cu::GetErrorStringFn>(lib, "cuGetErrorString");

  if (driver.init == nullptr || driver.encode_tiled == nullptr) {
    driver.unavailable_reason = std::string(kLibCuda) +
                                " lacks cuInit/cuTensorMapEncodeTiled (driver older than CUDA 12?)";
    return driver;
  }
  // cuInit is idempotent and cheap after the first call. The process normally initialised CUDA
  // already (it allocated the tensors), but the encoder must not depend on that ordering.
  cu::Result rc = driver.init(0);
  if (rc != cu::kSuccess) {
    driver.unavailable_reason = "cuInit failed: " + DescribeCudaResult(driver, rc);
    return driver;
  }
  driver.available = true;
  return driver;
}

}  // namespace

const CudaDriver& GetCudaDriver() {
  // Function-local static: initialised exactly once, thread-safe since C++11.
  static const CudaDriver driver = LoadCudaDriver();
  return driver;
}

ScopedPointerContext::ScopedPointerContext(const CudaDriver& driver, cu::DevicePtr ptr)
    : driver_(driver) {
  if (driver.ctx_get_current == nullptr || driver.pointer_get_attribute == nullptr ||
      driver.ctx_push_current == nullptr || driver.ctx_pop_current == nullptr) {
    return;  // cannot help; the driver calls report the missing context themselves
  }
  cu::Context current = nullptr;
  if (driver.ctx_get_current(&current) == cu::kSuccess && current != nullptr) return;
  cu::Context owner = nullptr;
  const cu::Result rc = driver.pointer_get_attribute(&owner, cu::kPointerAttributeContext, ptr);
  if (rc != cu::kSuccess || owner == nullptr) {
    status_ = rc == cu::kErrorInvalidValue ? rc : cu::kSuccess;
    return;
  }
  pushed_ = driver.ctx_push_current(owner) == cu::kSuccess;
}

ScopedPointerContext::~ScopedPointerContext() {
  if (!pushed_) return;
  cu::Context popped = nullptr;
  driver_.ctx_pop_current(&popped);
}

std::string DescribeCudaResult(const CudaDriver& driver, cu::Result result) {
  std::ostringstream os;
  const char* name = nullptr;
  const char* text = nullptr;
  if (driver.get_error_name != nullptr && driver.get_error_name(result, &name) != cu::kSuccess) {
    name = nullptr;
  }
  if (driver.get_error_string != nullptr &&
      driver.get_error_string(result, &text) != cu::kSuccess) {
    text = nullptr;
  }
  os << (name ? name : "CUresult") << " (" << result << ")";
  if (text != nullptr) os << ": " << text;
  return os.str();
}

}  // namespace tvm_tma
