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
 * Im2col maps (cuTensorMapEncodeIm2col, equally pure) are keyed the same way on their own
 * arguments (corners, channels per pixel and pixels per column in place of the box) in a table
 * of their own: a tiled and an im2col map over the same memory are different maps, and no
 * lookup of one kind can return the other.
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

struct Im2colParamsHash {
  size_t operator()(const Im2colParams& p) const;
};

struct Im2colParamsEqual {
  bool operator()(const Im2colParams& a, const Im2colParams& b) const;
};

class DescriptorCache {
 public:
  // More distinct maps than this in one process is unusual (each is a tensor x layout); the
  // cache then starts over rather than growing without bound. Tiled and im2col maps count
  // together.
  static constexpr size_t kCapacity = 4096;

  // On a hit, copies the encoded map to `map` and the resolved dtype to `dtype`.
  bool Lookup(const TiledParams& params, cu::TensorMap* map, DtypeInfo* dtype);
  bool Lookup(const Im2colParams& params, cu::TensorMap* map, DtypeInfo* dtype);
  void Insert(const TiledParams& params, const cu::TensorMap& map, const DtypeInfo& dtype);
  void Insert(const Im2colParams& params, const cu::TensorMap& map, const DtypeInfo& dtype);

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
  template <typename Params, typename Hash, typename Equal>
  using Table = std::unordered_map<Params, Entry, Hash, Equal>;

  template <typename TableT, typename Params>
  bool LookupIn(TableT* table, const Params& params, cu::TensorMap* map, DtypeInfo* dtype);
  template <typename TableT, typename Params>
  void InsertIn(TableT* table, const Params& params, const cu::TensorMap& map,
                const DtypeInfo& dtype);
  size_t EntryCount() const { return tiled_.size() + im2col_.size(); }  // mutex_ held

  std::mutex mutex_;
  bool enabled_ = true;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
  Table<TiledParams, TiledParamsHash, TiledParamsEqual> tiled_;
  Table<Im2colParams, Im2colParamsHash, Im2colParamsEqual> im2col_;
};

// The process-wide cache used by tvm_tma.encode_tiled and tvm_tma.encode_im2col.
DescriptorCache& GlobalDescriptorCache();

}  // namespace tvm_tma

#endif  // TVM_TMA_DESCRIPTOR_CACHE_H_
