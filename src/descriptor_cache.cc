/*
 * The descriptor cache (see descriptor_cache.h for why) and its inspection functions:
 *
 *   tvm_tma.descriptor_cache_enable(bool)   on by default; off encodes on every call
 *   tvm_tma.descriptor_cache_stats()        [hits, misses, entries] (tiled and im2col together)
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

// The arguments both kinds of map share.
size_t HashMapParams(const MapParams& p) {
  size_t seed = std::hash<std::string>()(p.dtype);
  Mix(&seed, static_cast<uint64_t>(p.rank));
  Mix(&seed, p.global_address);
  for (int64_t i = 0; i < p.rank && i < kMaxRank; ++i) {
    Mix(&seed, static_cast<uint64_t>(p.dims[i]));
    Mix(&seed, static_cast<uint64_t>(p.element_strides[i]));
    if (i + 1 < p.rank) Mix(&seed, static_cast<uint64_t>(p.strides[i]));
  }
  Mix(&seed, static_cast<uint64_t>(p.interleave));
  Mix(&seed, static_cast<uint64_t>(p.swizzle));
  Mix(&seed, static_cast<uint64_t>(p.l2_promotion));
  Mix(&seed, static_cast<uint64_t>(p.oob_fill));
  return seed;
}

// Whole arrays are compared, not just the first `rank` entries: the parsers leave the unused
// tail zero, so equal ranks imply equal tails.
bool EqualMapParams(const MapParams& a, const MapParams& b) {
  return a.rank == b.rank && a.global_address == b.global_address && a.dims == b.dims &&
         a.strides == b.strides && a.element_strides == b.element_strides &&
         a.interleave == b.interleave && a.swizzle == b.swizzle &&
         a.l2_promotion == b.l2_promotion && a.oob_fill == b.oob_fill && a.dtype == b.dtype;
}

}  // namespace

size_t TiledParamsHash::operator()(const TiledParams& p) const {
  size_t seed = HashMapParams(p);
  for (int64_t i = 0; i < p.rank && i < kMaxRank; ++i) Mix(&seed, static_cast<uint64_t>(p.box[i]));
  return seed;
}

bool TiledParamsEqual::operator()(const TiledParams& a, const TiledParams& b) const {
  return EqualMapParams(a, b) && a.box == b.box;
}

size_t Im2colParamsHash::operator()(const Im2colParams& p) const {
  size_t seed = HashMapParams(p);
  for (int64_t i = 0; i + 2 < p.rank && i < kMaxSpatialRank; ++i) {
    Mix(&seed, static_cast<uint64_t>(p.lower_corner[i]));
    Mix(&seed, static_cast<uint64_t>(p.upper_corner[i]));
  }
  Mix(&seed, static_cast<uint64_t>(p.channels_per_pixel));
  Mix(&seed, static_cast<uint64_t>(p.pixels_per_column));
  return seed;
}

bool Im2colParamsEqual::operator()(const Im2colParams& a, const Im2colParams& b) const {
  return EqualMapParams(a, b) && a.lower_corner == b.lower_corner &&
         a.upper_corner == b.upper_corner && a.channels_per_pixel == b.channels_per_pixel &&
         a.pixels_per_column == b.pixels_per_column;
}

template <typename TableT, typename Params>
bool DescriptorCache::LookupIn(TableT* table, const Params& params, cu::TensorMap* map,
                               DtypeInfo* dtype) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_) return false;
  auto it = table->find(params);
  if (it == table->end()) {
    ++misses_;
    return false;
  }
  ++hits_;
  *map = it->second.map;
  *dtype = it->second.dtype;
  return true;
}

template <typename TableT, typename Params>
void DescriptorCache::InsertIn(TableT* table, const Params& params, const cu::TensorMap& map,
                               const DtypeInfo& dtype) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_) return;
  if (EntryCount() >= kCapacity) {
    tiled_.clear();
    im2col_.clear();
  }
  (*table)[params] = Entry{map, dtype};
}

bool DescriptorCache::Lookup(const TiledParams& params, cu::TensorMap* map, DtypeInfo* dtype) {
  return LookupIn(&tiled_, params, map, dtype);
}

bool DescriptorCache::Lookup(const Im2colParams& params, cu::TensorMap* map, DtypeInfo* dtype) {
  return LookupIn(&im2col_, params, map, dtype);
}

void DescriptorCache::Insert(const TiledParams& params, const cu::TensorMap& map,
                             const DtypeInfo& dtype) {
  InsertIn(&tiled_, params, map, dtype);
}

void DescriptorCache::Insert(const Im2colParams& params, const cu::TensorMap& map,
                             const DtypeInfo& dtype) {
  InsertIn(&im2col_, params, map, dtype);
}

void DescriptorCache::SetEnabled(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  enabled_ = enabled;
  if (!enabled) {
    tiled_.clear();
    im2col_.clear();
  }
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
  return static_cast<int64_t>(EntryCount());
}

void DescriptorCache::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  tiled_.clear();
  im2col_.clear();
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
