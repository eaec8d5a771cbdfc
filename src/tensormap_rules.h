/*
 * The driver's rules for tiled and im2col tensor maps, checked on the actual run-time values.
 *
 * cuTensorMapEncodeTiled (and cuTensorMapEncodeIm2col) answers a bad argument with a bare CUDA_ERROR_INVALID_VALUE, and some
 * mistakes (a pointer/shape that does not match the allocation) are not caught by the driver at
 * all but fault later inside the kernel. Checking every rule ourselves first turns both into a
 * Python exception that names the rule and the offending value:
 *
 *   tvm_tma: rule 'global-address-align': global address 0x7f0000000003 is not 16-byte aligned
 *
 * The rule names are stable: tests and the compile-time planner refer to them.
 */
#ifndef TVM_TMA_TENSORMAP_RULES_H_
#define TVM_TMA_TENSORMAP_RULES_H_

#include <array>
#include <cstdint>
#include <string>

#include "cuda_driver.h"

namespace tvm_tma {

constexpr int64_t kMaxRank = 5;
// An im2col map has rank - 2 spatial dimensions (W, H, D), each with a lower and an upper
// corner offset.
constexpr int64_t kMaxSpatialRank = kMaxRank - 2;

// Which values of a parameter set are unknown: a compile-time check
// (tvm_tma.validate_tiled_static, tvm_tma.validate_im2col_static) sees some arguments only as
// run-time expressions. A rule whose inputs include an unknown value is skipped (the
// launch-time encode checks it on the actual value). Bit i of `dims` etc. is element i; the
// run-time entry points leave everything known.
struct UnknownValues {
  bool global_address = false;
  uint32_t dims = 0;
  uint32_t strides = 0;
  uint32_t box = 0;  // tiled maps only
  uint32_t element_strides = 0;
  uint32_t lower_corner = 0;  // im2col maps only, from here to pixels_per_column
  uint32_t upper_corner = 0;
  bool channels_per_pixel = false;
  bool pixels_per_column = false;
  bool interleave = false;
  bool swizzle = false;
  bool l2_promotion = false;
  bool oob_fill = false;

  static bool Has(uint32_t mask, int64_t i) { return (mask >> i) & 1u; }
};

// The arguments every tensor map has, all arrays in driver order (innermost dimension first).
// Values are kept as signed 64-bit exactly as they arrived, so a negative or oversized value is
// reported as given instead of being silently wrapped by a narrowing conversion.
struct MapParams {
  std::string dtype;
  int64_t rank = 0;
  uint64_t global_address = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank - 1> strides{};  // byte strides of dims 1..rank-1
  std::array<int64_t, kMaxRank> element_strides{};
  int64_t interleave = 0;
  int64_t swizzle = 0;
  int64_t l2_promotion = 0;
  int64_t oob_fill = 0;
  // Only the compile-time check sets any of these; the descriptor cache ignores them (it only
  // ever sees fully known arguments).
  UnknownValues unknown;
};

// Arguments of one tiled encode (cuTensorMapEncodeTiled).
struct TiledParams : MapParams {
  std::array<int64_t, kMaxRank> box{};
};

// Arguments of one im2col encode (cuTensorMapEncodeIm2col). The tensor is C, W, (H, (D,)) N in
// driver order; lower_corner[i] and upper_corner[i] belong to dims[i + 1] (W first). One load
// moves pixels_per_column pixels of channels_per_pixel channels each, the pixels taken from the
// bounding box [lower, dims - 1 + upper] of each spatial dimension.
struct Im2colParams : MapParams {
  std::array<int64_t, kMaxSpatialRank> lower_corner{};
  std::array<int64_t, kMaxSpatialRank> upper_corner{};
  int64_t channels_per_pixel = 0;
  int64_t pixels_per_column = 0;
};

// A dtype name resolved to the driver enum and its element size.
struct DtypeInfo {
  cu::TensorMapDataType code;
  int64_t bytes;
  bool is_float;  // only float types may request NaN out-of-bounds fill
};

// Throws ValueError "tvm_tma: rule '<rule>': <detail>". Every rule failure goes through here so
// the message format stays uniform.
[[noreturn]] void FailRule(const char* rule, const std::string& detail);

// Rank first and on its own: the number of packed arguments depends on it. Tiled maps: 1..5
// (rule 'rank'); im2col maps: 3..5 (rule 'im2col-rank').
void CheckRank(int64_t rank);
void CheckIm2colRank(int64_t rank);

// Every rule that depends only on the argument values (no driver, no memory queries).
// Throws on the first violation; returns the resolved dtype on success. Rules that read a value
// marked in p.unknown are skipped.
DtypeInfo CheckStaticRules(const TiledParams& p);
DtypeInfo CheckStaticRules(const Im2colParams& p);

// A global address that arrived as a negative integer is refused (rule 'global-address-align')
// before anything else looks at it: as an unsigned 64-bit value it would otherwise pass as a
// 16-byte aligned address in the kernel half of the address space.
void CheckAddressNotNegative(int64_t signed_value, bool was_negative);

// The end (exclusive) of the bytes the map can touch: base + elemsize + sum_i (dims[i]-1) *
// stride_i with stride_0 = elemsize. The same for both kinds of map: whatever the box or the
// corners, the TMA only reads and writes elements inside the tensor (out-of-bounds ones are
// filled). 128-bit because dims (2^32) times strides (2^40) overflows 64 bits. Requires
// CheckStaticRules to have passed.
unsigned __int128 FootprintEnd(const MapParams& p, const DtypeInfo& dtype);

// "0x7f00deadbeef"
std::string Hex(uint64_t value);
std::string Hex(unsigned __int128 value);

// All arguments on one line, for messages about failures that cannot be pinned on one value.
std::string DescribeParams(const TiledParams& p);
std::string DescribeParams(const Im2colParams& p);

}  // namespace tvm_tma

#endif  // TVM_TMA_TENSORMAP_RULES_H_
