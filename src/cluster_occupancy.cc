/*
 * tvm_tma.max_active_clusters: how many clusters of a given shape a GPU runs at once.
 *
 * Why: a cluster's CTAs run on one GPC, so a GPU holds fewer CTAs in clusters than it has SMs
 * where its GPCs do not divide into whole clusters (an H200's 132 SMs hold 66 clusters of 2
 * CTAs of one SM each, but only 30 of 4), and which SMs are enabled differs from chip to chip.
 * A persistent kernel whose CTAs wait on each other (stream-K, ordered K parts) hangs if some
 * of its CTAs are never scheduled, so python/tvm_tma/kernels/residency.py asks the driver
 * rather than trusting a table: the occupancy calculator answers for a kernel, a launch shape
 * and a shared memory size. A trivial probe kernel, JIT-compiled from PTX once per device,
 * stands in for the real one: with the same threads and dynamic shared memory a CTA (what
 * limits a TMA kernel to one CTA an SM), the driver's answer is the real kernel's.
 */
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "cuda_driver.h"
#include "tensormap_rules.h"

namespace tvm_tma {
namespace {

// An empty kernel for sm_90 (cluster launches need it): the calculator needs a function, and
// an empty one limits occupancy by nothing but the launch shape and shared memory given.
constexpr const char* kProbePtx =
    ".version 7.8\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry tvm_tma_cluster_probe()\n"
    "{\n"
    "  ret;\n"
    "}\n";
constexpr const char* kProbeName = "tvm_tma_cluster_probe";

void Check(const CudaDriver& driver, cu::Result rc, const char* call) {
  if (rc == cu::kSuccess) return;
  std::ostringstream os;
  os << call << " returned " << DescribeCudaResult(driver, rc)
     << " while asking how many clusters the GPU holds";
  FailRule("driver", os.str());
}

// The device's primary context (the one the CUDA runtime, and so TVM and torch, use) and the
// probe kernel loaded into it, once per device. The context stays retained for the life of
// the process, as the module in it does: releasing it could destroy it (where no one else
// holds it yet) and with it the module, leaving a stale handle for the next query.
struct Probe {
  cu::Context context = nullptr;
  cu::Function function = nullptr;
};

// Makes `context` current for the guard's lifetime, leaving the caller's thread as it was.
class CurrentContext {
 public:
  CurrentContext(const CudaDriver& driver, cu::Context context) : driver_(driver) {
    Check(driver, driver.ctx_push_current(context), "cuCtxPushCurrent");
  }
  ~CurrentContext() {
    cu::Context popped = nullptr;
    driver_.ctx_pop_current(&popped);
  }
  CurrentContext(const CurrentContext&) = delete;
  CurrentContext& operator=(const CurrentContext&) = delete;

 private:
  const CudaDriver& driver_;
};

Probe ProbeOf(const CudaDriver& driver, int ordinal) {
  static std::mutex mutex;
  static std::map<int, Probe> probes;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = probes.find(ordinal);
  if (found != probes.end()) return found->second;
  Probe probe;
  cu::Device device = 0;
  Check(driver, driver.device_get(&device, ordinal), "cuDeviceGet");
  Check(driver, driver.primary_ctx_retain(&probe.context, device), "cuDevicePrimaryCtxRetain");
  CurrentContext current(driver, probe.context);
  cu::Module module = nullptr;
  Check(driver, driver.module_load_data(&module, kProbePtx), "cuModuleLoadData");
  Check(driver, driver.module_get_function(&probe.function, module, kProbeName),
        "cuModuleGetFunction");
  probes.emplace(ordinal, probe);
  return probe;
}

int64_t MaxActiveClusters(int64_t ordinal, int64_t cluster_size, int64_t threads,
                          int64_t shared_bytes) {
  if (cluster_size < 1 || cluster_size > 16 || threads < 1 || threads > 1024 ||
      shared_bytes < 0 || shared_bytes > (1 << 20)) {
    std::ostringstream os;
    os << "max_active_clusters(cluster_size=" << cluster_size << ", threads=" << threads
       << ", shared_bytes=" << shared_bytes
       << "): 1..16 CTAs a cluster, 1..1024 threads a CTA, 0..1 MiB of shared memory";
    FailRule("cluster-size", os.str());
  }
  const CudaDriver& driver = GetCudaDriver();
  if (!driver.available) {
    FailRule("driver", "the CUDA driver is unavailable: " + driver.unavailable_reason);
  }
  if (driver.device_get == nullptr || driver.primary_ctx_retain == nullptr ||
      driver.ctx_push_current == nullptr ||
      driver.ctx_pop_current == nullptr || driver.module_load_data == nullptr ||
      driver.module_get_function == nullptr || driver.func_set_attribute == nullptr ||
      driver.occupancy_max_active_clusters == nullptr) {
    FailRule("driver",
             "the CUDA driver has no cuOccupancyMaxActiveClusters (or the module and context "
             "calls it needs): a driver of CUDA 12.0 or newer answers how many clusters fit");
  }
  const Probe found = ProbeOf(driver, static_cast<int>(ordinal));
  CurrentContext current(driver, found.context);
  cu::Function probe = found.function;
  Check(driver,
        driver.func_set_attribute(probe, cu::kFuncAttributeMaxDynamicSharedSizeBytes,
                                  static_cast<int>(shared_bytes)),
        "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  if (cluster_size > 8) {
    Check(driver,
          driver.func_set_attribute(probe, cu::kFuncAttributeNonPortableClusterSizeAllowed, 1),
          "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)");
  }
  cu::LaunchAttribute attribute{};
  attribute.id = cu::kLaunchAttributeClusterDimension;
  attribute.value.cluster_dim.x = static_cast<unsigned int>(cluster_size);
  attribute.value.cluster_dim.y = 1;
  attribute.value.cluster_dim.z = 1;
  cu::LaunchConfig config{};
  config.grid_dim_x = static_cast<unsigned int>(cluster_size);
  config.grid_dim_y = config.grid_dim_z = 1;
  config.block_dim_x = static_cast<unsigned int>(threads);
  config.block_dim_y = config.block_dim_z = 1;
  config.shared_mem_bytes = static_cast<unsigned int>(shared_bytes);
  config.attrs = &attribute;
  config.num_attrs = 1;
  int clusters = 0;
  Check(driver, driver.occupancy_max_active_clusters(&clusters, probe, &config),
        "cuOccupancyMaxActiveClusters");
  return clusters;
}

}  // namespace
}  // namespace tvm_tma

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = ::tvm::ffi::reflection;
  refl::GlobalDef().def("tvm_tma.max_active_clusters", tvm_tma::MaxActiveClusters);
}
