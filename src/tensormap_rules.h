/*
 * The driver's rules for tiled tensor maps, checked on the actual run-time values.
 *
 * cuTensorMapEncodeTiled answers a bad argument with a bare CUDA_ERROR_INVALID_VALUE, and some
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

// Which values of a TiledParams are unknown: a compile-time check (tvm_tma.validate_tiled_static)
// sees some arguments only as run-time expressions. A rule whose inputs include an unknown value
// is skipped (the launch-time encode checks it on the actual value). Bit i of `dims` etc. is
// element i; the run-time entry points leave everything known.
struct UnknownValues {
  bool global_address = false;
  uint32_t dims = 0;
  uint32_t strides = 0;
  uint32_t box = 0;
  uint32_t element_strides = 0;
  bool interleave = false;
  bool swizzle = false;
  bool l2_promotion = false;
  bool oob_fill = false;

  static bool Has(uint32_t mask, int64_t i) { return (mask >> i) & 1u; }
};

// Arguments of one tiled encode, all arrays in driver order (innermost dimension first).
// Values are kept as signed 64-bit exactly as they arrived, so a negative or oversized value is
// reported as given instead of being silently wrapped by a narrowing conversion.
struct TiledParams {
  std::string dtype;
  int64_t rank = 0;
  uint64_t global_address = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank - 1> strides{};  // byte strides of dims 1..rank-1
  std::array<int64_t, kMaxRank> box{};
  std::array<int64_t, kMaxRank> element_strides{};
  int64_t interleave = 0;
  int64_t swizzle = 0;
  int64_t l2_promotion = 0;
  int64_t oob_fill = 0;
  // Only the compile-time check sets any of these; the descriptor cache ignores them (it only
  // ever sees fully known arguments).
  UnknownValues unknown;
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

// Rank first and on its own: the number of packed arguments depends on it.
void CheckRank(int64_t rank);

// Every rule that depends only on the argument values (no driver, no memory queries).
// Throws on the first violation; returns the resolved dtype on success. Rules that read a value
// marked in p.unknown are skipped.
DtypeInfo CheckStaticRules(const TiledParams& p);

// A global address that arrived as a negative integer is refused (rule 'global-address-align')
// before anything else looks at it: as an unsigned 64-bit value it would otherwise pass as a
// 16-byte aligned address in the kernel half of the address space.
void CheckAddressNotNegative(int64_t signed_value, bool was_negative);

// The end (exclusive) of the bytes the map can touch: base + elemsize + sum_i (dims[i]-1) *
// stride_i with stride_0 = elemsize. 128-bit because dims (2^32) times strides (2^40) overflows
// 64 bits. Requires CheckStaticRules to have passed.
unsigned __int128 FootprintEnd(const TiledParams& p, const DtypeInfo& dtype);

// "0x7f00deadbeef"
std::string Hex(uint64_t value);
std::string Hex(unsigned __int128 value);

// All arguments on one line, for messages about failures that cannot be pinned on one value.
std::string DescribeParams(const TiledParams& p);

}  // namespace tvm_tma

#endif  // TVM_TMA_TENSORMAP_RULES_H_
