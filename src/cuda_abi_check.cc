/*
 * Build-time cross-check of the hand-written driver ABI in cuda_driver.h against cuda.h.
 *
 * The runtime deliberately builds without CUDA (cuda_driver.h explains why), so nothing else
 * would notice if a mirrored value drifted. When CMake finds cuda.h it compiles this file with
 * TVM_TMA_HAVE_CUDA_H and the static_asserts below; otherwise the file is empty. It generates no
 * code either way.
 */
#ifdef TVM_TMA_HAVE_CUDA_H
#include <cuda.h>

#include <cstddef>
#include <type_traits>

#include "cuda_driver.h"

namespace cu = tvm_tma::cu;

namespace {

// The encode entry points are called through the function pointer types of cuda_driver.h,
// which spell the driver's enums as int: every argument must still have the width and the
// pointer-ness of cuda.h's prototype.
template <typename F>
struct Signature;
template <typename R, typename... Args>
struct Signature<R (*)(Args...)> {
  static constexpr size_t kArity = sizeof...(Args);
  template <typename... Others>
  static constexpr bool SameWidths() {
    return ((sizeof(Args) == sizeof(Others) &&
             std::is_pointer_v<Args> == std::is_pointer_v<Others>) && ...);
  }
};
template <typename Ours, typename Theirs>
struct SameAbi;
template <typename Ours, typename R, typename... Args>
struct SameAbi<Ours, R (*)(Args...)> {
  static constexpr bool value = Signature<Ours>::kArity == sizeof...(Args) &&
                                Signature<Ours>::template SameWidths<Args...>();
};

static_assert(SameAbi<cu::TensorMapEncodeTiledFn, decltype(&cuTensorMapEncodeTiled)>::value,
              "cuTensorMapEncodeTiled signature");
static_assert(SameAbi<cu::TensorMapEncodeIm2colFn, decltype(&cuTensorMapEncodeIm2col)>::value,
              "cuTensorMapEncodeIm2col signature");

static_assert(SameAbi<cu::DeviceGetFn, decltype(&cuDeviceGet)>::value, "cuDeviceGet");
static_assert(SameAbi<cu::DevicePrimaryCtxRetainFn, decltype(&cuDevicePrimaryCtxRetain)>::value,
              "cuDevicePrimaryCtxRetain");
static_assert(SameAbi<cu::ModuleLoadDataFn, decltype(&cuModuleLoadData)>::value,
              "cuModuleLoadData");
static_assert(SameAbi<cu::ModuleGetFunctionFn, decltype(&cuModuleGetFunction)>::value,
              "cuModuleGetFunction");
static_assert(SameAbi<cu::FuncSetAttributeFn, decltype(&cuFuncSetAttribute)>::value,
              "cuFuncSetAttribute");
static_assert(SameAbi<cu::OccupancyMaxActiveClustersFn,
                      decltype(&cuOccupancyMaxActiveClusters)>::value,
              "cuOccupancyMaxActiveClusters");

}  // namespace

// The launch configuration the occupancy query reads: same size and field offsets.
static_assert(sizeof(CUlaunchAttributeValue) == sizeof(cu::LaunchAttributeValue),
              "CUlaunchAttributeValue size");
static_assert(sizeof(CUlaunchAttribute) == sizeof(cu::LaunchAttribute), "CUlaunchAttribute");
static_assert(offsetof(CUlaunchAttribute, value) == offsetof(cu::LaunchAttribute, value),
              "CUlaunchAttribute.value offset");
static_assert(offsetof(CUlaunchAttributeValue, clusterDim) ==
                  offsetof(cu::LaunchAttributeValue, cluster_dim),
              "clusterDim offset");
static_assert(sizeof(CUlaunchConfig) == sizeof(cu::LaunchConfig), "CUlaunchConfig size");
static_assert(offsetof(CUlaunchConfig, sharedMemBytes) ==
                  offsetof(cu::LaunchConfig, shared_mem_bytes),
              "CUlaunchConfig.sharedMemBytes offset");
static_assert(offsetof(CUlaunchConfig, attrs) == offsetof(cu::LaunchConfig, attrs),
              "CUlaunchConfig.attrs offset");
static_assert(offsetof(CUlaunchConfig, numAttrs) == offsetof(cu::LaunchConfig, num_attrs),
              "CUlaunchConfig.numAttrs offset");
static_assert(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == cu::kLaunchAttributeClusterDimension,
              "CLUSTER_DIMENSION");
static_assert(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ==
                  cu::kFuncAttributeMaxDynamicSharedSizeBytes,
              "MAX_DYNAMIC_SHARED_SIZE_BYTES");
static_assert(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED ==
                  cu::kFuncAttributeNonPortableClusterSizeAllowed,
              "NON_PORTABLE_CLUSTER_SIZE_ALLOWED");
static_assert(sizeof(CUdevice) == sizeof(cu::Device), "CUdevice size");

static_assert(sizeof(CUtensorMap) == sizeof(cu::TensorMap), "CUtensorMap size");
static_assert(sizeof(CUdeviceptr) == sizeof(cu::DevicePtr), "CUdeviceptr size");
static_assert(sizeof(CUresult) == sizeof(cu::Result), "CUresult size");
static_assert(sizeof(CUcontext) == sizeof(cu::Context), "CUcontext size");
static_assert(CU_POINTER_ATTRIBUTE_CONTEXT == cu::kPointerAttributeContext, "POINTER_ATTRIBUTE");
static_assert(sizeof(CUtensorMapDataType) == sizeof(int), "driver enums are int-sized");

static_assert(CUDA_SUCCESS == cu::kSuccess, "CUDA_SUCCESS");
static_assert(CUDA_ERROR_INVALID_VALUE == cu::kErrorInvalidValue, "INVALID_VALUE");
static_assert(CUDA_ERROR_NOT_INITIALIZED == cu::kErrorNotInitialized, "NOT_INITIALIZED");
static_assert(CUDA_ERROR_INVALID_CONTEXT == cu::kErrorInvalidContext, "INVALID_CONTEXT");

static_assert(static_cast<int>(CU_TENSOR_MAP_DATA_TYPE_UINT8) == cu::kUInt8, "UINT8");
static_assert(static_cast<int>(CU_TENSOR_MAP_DATA_TYPE_UINT16) == cu::kUInt16, "UINT16");
static_assert(static_cast<int>(CU_TENSOR_MAP_DATA_TYPE_UINT32) == cu::kUInt32, "UINT32");
static_assert(static_cast<int>(CU_TENSOR_MAP_DATA_TYPE_INT32) == cu::kInt32, "INT32");
static_assert(static_cast<int>(CU_TENSOR_MAP_DATA_TYPE_UINT64) == cu::kUInt64, "UINT64");
static_assert(static_cast<int>(CU_TENSOR_MAP_DATA_TYPE_INT64) == cu::kInt64, "INT64");
static_assert(static_cast<int>(CU_TENSOR_MAP_DATA_TYPE_FLOAT16) == cu::kFloat16, "FLOAT16");
static_assert(static_cast<int>(CU_TENSOR_MAP_DATA_TYPE_FLOAT32) == cu::kFloat32, "FLOAT32");
static_assert(static_cast<int>(CU_TENSOR_MAP_DATA_TYPE_FLOAT64) == cu::kFloat64, "FLOAT64");
static_assert(static_cast<int>(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) == cu::kBFloat16, "BFLOAT16");

static_assert(CU_TENSOR_MAP_INTERLEAVE_NONE == cu::kInterleaveNone, "INTERLEAVE_NONE");
static_assert(CU_TENSOR_MAP_INTERLEAVE_16B == cu::kInterleave16B, "INTERLEAVE_16B");
static_assert(CU_TENSOR_MAP_INTERLEAVE_32B == cu::kInterleave32B, "INTERLEAVE_32B");
static_assert(CU_TENSOR_MAP_SWIZZLE_NONE == cu::kSwizzleNone, "SWIZZLE_NONE");
static_assert(CU_TENSOR_MAP_SWIZZLE_32B == cu::kSwizzle32B, "SWIZZLE_32B");
static_assert(CU_TENSOR_MAP_SWIZZLE_64B == cu::kSwizzle64B, "SWIZZLE_64B");
static_assert(CU_TENSOR_MAP_SWIZZLE_128B == cu::kSwizzle128B, "SWIZZLE_128B");
static_assert(CU_TENSOR_MAP_L2_PROMOTION_L2_256B == cu::kL2PromotionMax, "L2_PROMOTION_L2_256B");
static_assert(CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA == cu::kOobFillNanRequest,
              "OOB_FILL_NAN_REQUEST_ZERO_FMA");
#endif  // TVM_TMA_HAVE_CUDA_H
