/*
 * The descriptor cache (see descriptor_cache.h for why) and its inspection functions:
 *
 *   tvm_tma.descriptor_cache_enable(bool)   on by default; off encodes on every call
 *   tvm_tma.descriptor_cache_stats()        [hits, misses, entries]
 *   tvm_tma.descriptor_cache_clear()
 */
#include "descriptor_cache.h"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>

#include <functional>

namespace tvm_tma {

namespace {

// boost::hash_combine's mixing step.
void Mix(size_t* seed, uint64_t value) {
  *seed ^= std::hash<uint64_t>()(value) + 0x9e3779b97f4a7c15ULL + (*seed << 6) + (*seed >> 2);
}

}  // namespace

size_t TiledParamsHash::operator()(const TiledParams& p) const {
  size_t seed = std::hash<std::string>()(p.dtype);
  Mix(&seed, static_cast<uint64_t>(p.rank));
  Mix(&seed, p.global_address);
  for (int64_t i = 0; i < p.rank && i < kMaxRank; ++i) {
    Mix(&seed, static_cast<uint64_t>(p.dims[i]));
    Mix(&seed, static_cast<uint64_t>(p.box[i]));
    Mix(&seed, static_cast<uint64_t>(p.element_strides[i]));
    if (i + 1 < p.rank) Mix(&seed, static_cast<uint64_t>(p.strides[i]));
  }
  Mix(&seed, static_cast<uint64_t>(p.interleave));
  Mix(&seed, static_cast<uint64_t>(p.swizzle));
  Mix(&seed, static_cast<uint64_t>(p.l2_promotion));
  Mix(&seed, static_cast<uint64_t>(p.oob_fill));
  return seed;
}

// Whole arrays are compared, not just the first `rank` entries: ParseTiled leaves the unused
// tail zero, so equal ranks imply equal tails.
bool TiledParamsEqual::operator()(const TiledParams& a, const TiledParams& b) const {
  return a.rank == b.rank && a.global_address == b.global_address && a.dims == b.dims &&
         a.strides == b.strides && a.box == b.box && a.element_strides == b.element_strides &&
         a.interleave == b.interleave && a.swizzle == b.swizzle &&
         a.l2_promotion == b.l2_promotion && a.oob_fill == b.oob_fill && a.dtype == b.dtype;
}

bool DescriptorCache::Lookup(const TiledParams& params, cu::TensorMap* map, DtypeInfo* dtype) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_) return false;
  auto it = entries_.find(params);
  if (it == entries_.end()) {
    ++misses_;
    return false;
  }
  ++hits_;
  *map = it->second.map;
  *dtype = it->second.dtype;
  return true;
}

void DescriptorCache::Insert(const TiledParams& params, const cu::TensorMap& map,
                             const DtypeInfo& dtype) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_) return;
  if (entries_.size() >= kCapacity) entries_.clear();
  entries_[params] = Entry{map, dtype};
}

void DescriptorCache::SetEnabled(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  enabled_ = enabled;
  if (!enabled) entries_.clear();
}

bool DescriptorCache::enabled() {
  std::lock_guard<std::mutex> lock(mutex_);
  return enabled_;
}

int64_t DescriptorCache::hits() {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

int64_t DescriptorCache::misses() {
  std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}

int64_t DescriptorCache::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(entries_.size());
}

void DescriptorCache::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  hits_ = 0;
  misses_ = 0;
}

DescriptorCache& GlobalDescriptorCache() {
  static DescriptorCache* cache = new DescriptorCache();  // never destroyed: see cuda_driver.h
  return *cache;
}

}  // namespace tvm_tma

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = ::tvm::ffi::reflection;
  refl::GlobalDef()
      .def("tvm_tma.descriptor_cache_enable",
           [](bool enabled) { tvm_tma::GlobalDescriptorCache().SetEnabled(enabled); })
      .def("tvm_tma.descriptor_cache_stats",
           []() -> ::tvm::ffi::Array<int64_t> {
             auto& cache = tvm_tma::GlobalDescriptorCache();
             return {cache.hits(), cache.misses(), cache.size()};
           })
      .def("tvm_tma.descriptor_cache_clear", []() { tvm_tma::GlobalDescriptorCache().Clear(); });
}
