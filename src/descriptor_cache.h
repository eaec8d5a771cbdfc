/*
 * Encoded tensor maps, kept so that a repeated launch does not pay the driver's encode again.
 *
 * Generated host code encodes every tensor map of a kernel before each launch, because the
 * map holds the tensor's address, which is only known at launch time. Most launches repeat
 * the previous one's tensors, though, and cuTensorMapEncodeTiled is a pure function of its
 * arguments: the same arguments give the same 128 bytes. So the encoder keys the result on
 * every argument (dtype, rank, address, dims, strides, box, element strides and the four
 * enums) and replays it on a match. Anything that changes (a new pointer, a new shape or
 * stride) is a different key and is encoded afresh.
 *
 * What a hit does not skip: the footprint check against the allocation that holds the
 * address (tensormap_encode.cc). A freed and re-used address can hold a smaller allocation
 * today, and catching that is the point of the check.
 */
#ifndef TVM_TMA_DESCRIPTOR_CACHE_H_
#define TVM_TMA_DESCRIPTOR_CACHE_H_

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "cuda_driver.h"
#include "tensormap_rules.h"

namespace tvm_tma {

struct TiledParamsHash {
  size_t operator()(const TiledParams& p) const;
};

struct TiledParamsEqual {
  bool operator()(const TiledParams& a, const TiledParams& b) const;
};

class DescriptorCache {
 public:
  // More distinct maps than this in one process is unusual (each is a tensor x layout); the
  // cache then starts over rather than growing without bound.
  static constexpr size_t kCapacity = 4096;

  // On a hit, copies the encoded map to `map` and the resolved dtype to `dtype`.
  bool Lookup(const TiledParams& params, cu::TensorMap* map, DtypeInfo* dtype);
  void Insert(const TiledParams& params, const cu::TensorMap& map, const DtypeInfo& dtype);

  void SetEnabled(bool enabled);
  bool enabled();
  int64_t hits();
  int64_t misses();
  int64_t size();
  void Clear();

 private:
  struct Entry {
    cu::TensorMap map;
    DtypeInfo dtype;
  };

  std::mutex mutex_;
  bool enabled_ = true;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
  std::unordered_map<TiledParams, Entry, TiledParamsHash, TiledParamsEqual> entries_;
};

// The process-wide cache used by tvm_tma.encode_tiled.
DescriptorCache& GlobalDescriptorCache();

}  // namespace tvm_tma

#endif  // TVM_TMA_DESCRIPTOR_CACHE_H_
