/*
 * The slice of the CUDA driver API that tvm_tma needs, declared by hand and bound at run time.
 *
 * Why not include <cuda.h> and link libcuda: the package must build on machines without a CUDA
 * toolkit (CI, source installs) and import on machines without a GPU, where only the rule checks
 * are wanted. So the runtime has no link-time CUDA dependency: the few entry points are looked up
 * in libcuda.so.1 with dlopen/dlsym on first use, and the types below mirror the driver ABI
 * (values from cuda.h, CUDA 12/13). src/cuda_abi_check.cc compares them with cuda.h whenever
 * the header is present at build time.
 */
#ifndef TVM_TMA_CUDA_DRIVER_H_
#define TVM_TMA_CUDA_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace tvm_tma {
namespace cu {

// CUresult. Only the codes we branch on are named; everything else is reported through
// cuGetErrorName/cuGetErrorString.
using Result = int;
constexpr Result kSuccess = 0;
constexpr Result kErrorInvalidValue = 1;
constexpr Result kErrorNotInitialized = 3;
constexpr Result kErrorInvalidContext = 201;

// CUdeviceptr on 64-bit hosts.
using DevicePtr = unsigned long long;  // NOLINT(runtime/int): must match the driver typedef
// CUcontext: an opaque handle.
using Context = void*;

// CUpointer_attribute value used to find the context that owns an allocation.
constexpr int kPointerAttributeContext = 1;

// CUtensorMapDataType (the non-packed subset tvm_tma emits).
enum TensorMapDataType : int {
  kUInt8 = 0,
  kUInt16 = 1,
  kUInt32 = 2,
  kInt32 = 3,
  kUInt64 = 4,
  kInt64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBFloat16 = 9,
};

// CUtensorMapInterleave / CUtensorMapSwizzle / CUtensorMapL2promotion / CUtensorMapFloatOOBfill.
// The driver passes C enums, which are int-sized in the SysV ABI, so plain ints are used for the
// calls and these constants name the values we reason about.
constexpr int kInterleaveNone = 0;
constexpr int kInterleave16B = 1;
constexpr int kInterleave32B = 2;
constexpr int kSwizzleNone = 0;
constexpr int kSwizzle32B = 1;
constexpr int kSwizzle64B = 2;
constexpr int kSwizzle128B = 3;
constexpr int kL2PromotionMax = 3;     // none / 64B / 128B / 256B
constexpr int kOobFillNanRequest = 1;  // OOB_FILL_NAN_REQUEST_ZERO_FMA

// CUtensorMap: 128 opaque bytes. The driver documents 64-byte alignment for the encode output
// (all that TVM's host stack slot for a map guarantees), so the type is declared with 64; the
// encoder still stages through 128-aligned storage (see EncodeIntoMap in tensormap_encode.cc).
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};
static_assert(sizeof(TensorMap) == 128, "CUtensorMap is 128 bytes");

using InitFn = Result (*)(unsigned int flags);
using GetErrorStringFn = Result (*)(Result error, const char** str);
using MemGetAddressRangeFn = Result (*)(DevicePtr* base, size_t* size, DevicePtr ptr);
using PointerGetAttributeFn = Result (*)(void* data, int attribute, DevicePtr ptr);
using CtxGetCurrentFn = Result (*)(Context* ctx);
using CtxPushCurrentFn = Result (*)(Context ctx);
using CtxPopCurrentFn = Result (*)(Context* ctx);
using TensorMapEncodeTiledFn = Result (*)(TensorMap* map, int data_type, uint32_t rank,
                                          void* global_address, const uint64_t* global_dim,
                                          const uint64_t* global_strides, const uint32_t* box_dim,
                                          const uint32_t* element_strides, int interleave,
                                          int swizzle, int l2_promotion, int oob_fill);
// cuTensorMapEncodeIm2col: the corners are plain ints (rank - 2 of each, W first), the box is
// channels_per_pixel x pixels_per_column.
using TensorMapEncodeIm2colFn = Result (*)(TensorMap* map, int data_type, uint32_t rank,
                                           void* global_address, const uint64_t* global_dim,
                                           const uint64_t* global_strides,
                                           const int* pixel_box_lower_corner,
                                           const int* pixel_box_upper_corner,
                                           uint32_t channels_per_pixel,
                                           uint32_t pixels_per_column,
                                           const uint32_t* element_strides, int interleave,
                                           int swizzle, int l2_promotion, int oob_fill);

// Cluster residency (src/cluster_occupancy.cc): a probe kernel is loaded from PTX and the
// driver's occupancy calculator is asked how many clusters of it fit at once.
using Device = int;
using Module = void*;
using Function = void*;
// CUfunction_attribute values.
constexpr int kFuncAttributeMaxDynamicSharedSizeBytes = 8;
constexpr int kFuncAttributeNonPortableClusterSizeAllowed = 14;
// CUlaunchAttributeID of the cluster shape.
constexpr int kLaunchAttributeClusterDimension = 4;

// CUlaunchAttributeValue: a 64-byte union; only the cluster shape is written here.
union LaunchAttributeValue {
  char pad[64];
  struct {
    unsigned int x, y, z;
  } cluster_dim;
};
// CUlaunchAttribute: the id, padded to 8 bytes, then the value.
struct LaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  LaunchAttributeValue value;
};
// CUlaunchConfig.
struct LaunchConfig {
  unsigned int grid_dim_x, grid_dim_y, grid_dim_z;
  unsigned int block_dim_x, block_dim_y, block_dim_z;
  unsigned int shared_mem_bytes;
  void* stream;
  LaunchAttribute* attrs;
  unsigned int num_attrs;
};

using DeviceGetFn = Result (*)(Device* device, int ordinal);
using DevicePrimaryCtxRetainFn = Result (*)(Context* ctx, Device device);
using ModuleLoadDataFn = Result (*)(Module* module, const void* image);
using ModuleGetFunctionFn = Result (*)(Function* function, Module module, const char* name);
using FuncSetAttributeFn = Result (*)(Function function, int attribute, int value);
using OccupancyMaxActiveClustersFn = Result (*)(int* clusters, Function function,
                                                const LaunchConfig* config);

}  // namespace cu

// The driver entry points resolved from libcuda.so.1. Loaded once per process; never unloaded,
// because encoded maps and other CUDA users in the process outlive any one call.
struct CudaDriver {
  // True when libcuda loaded, cuTensorMapEncodeTiled resolved and cuInit succeeded.
  bool available = false;
  // Why `available` is false (empty when available).
  std::string unavailable_reason;

  cu::InitFn init = nullptr;
  cu::TensorMapEncodeTiledFn encode_tiled = nullptr;
  // Not required for `available` (tiled maps do not need it); an im2col encode without it is
  // refused with rule 'driver'. Every driver with cuTensorMapEncodeTiled (CUDA 12.0+) has it.
  cu::TensorMapEncodeIm2colFn encode_im2col = nullptr;
  // Optional: without it the allocation-footprint check is skipped.
  cu::MemGetAddressRangeFn mem_get_address_range = nullptr;
  // Optional: let encodes run on threads with no current context (see ScopedPointerContext).
  cu::PointerGetAttributeFn pointer_get_attribute = nullptr;
  cu::CtxGetCurrentFn ctx_get_current = nullptr;
  cu::CtxPushCurrentFn ctx_push_current = nullptr;
  cu::CtxPopCurrentFn ctx_pop_current = nullptr;
  // Optional: the cluster residency query (tvm_tma.max_active_clusters) needs all of them
  // (CUDA 12.0+ drivers have them); without them it is refused with rule 'driver'.
  cu::DeviceGetFn device_get = nullptr;
  cu::DevicePrimaryCtxRetainFn primary_ctx_retain = nullptr;
  cu::ModuleLoadDataFn module_load_data = nullptr;
  cu::ModuleGetFunctionFn module_get_function = nullptr;
  cu::FuncSetAttributeFn func_set_attribute = nullptr;
  cu::OccupancyMaxActiveClustersFn occupancy_max_active_clusters = nullptr;
  // Optional: only used to make error messages readable.
  cu::GetErrorStringFn get_error_name = nullptr;
  cu::GetErrorStringFn get_error_string = nullptr;
};

// The process-wide driver binding, loaded on first call (thread-safe).
const CudaDriver& GetCudaDriver();

// Makes the context that owns `ptr` current for the guard's lifetime when the calling thread has
// no current context; does nothing otherwise.
//
// Why: cuTensorMapEncodeTiled and cuMemGetAddressRange both fail with
// CUDA_ERROR_INVALID_CONTEXT on a thread where no context is current (checked on an H200,
// driver 580), and generated host code can run on a thread that never touched CUDA, because
// CUDA makes contexts current per thread and lazily. The pointer itself names its context
// (pointer attributes are answered from the unified address space without a current context),
// so that one is pushed and popped again, leaving the caller's thread state as it was.
class ScopedPointerContext {
 public:
  ScopedPointerContext(const CudaDriver& driver, cu::DevicePtr ptr);
  ~ScopedPointerContext();
  ScopedPointerContext(const ScopedPointerContext&) = delete;
  ScopedPointerContext& operator=(const ScopedPointerContext&) = delete;

  // CUDA_ERROR_INVALID_VALUE when the thread had no context and no context owns `ptr` (it is
  // not CUDA memory); kSuccess otherwise, including when nothing needed doing or could be done.
  cu::Result status() const { return status_; }

 private:
  const CudaDriver& driver_;
  bool pushed_ = false;
  cu::Result status_ = cu::kSuccess;
};

// "CUDA_ERROR_INVALID_VALUE (1): invalid argument", or just the number when the driver cannot
// name it.
std::string DescribeCudaResult(const CudaDriver& driver, cu::Result result);

}  // namespace tvm_tma

#endif  // TVM_TMA_CUDA_DRIVER_H_
