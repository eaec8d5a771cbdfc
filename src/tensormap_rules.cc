/*
 * Rule checks for cuTensorMapEncodeTiled arguments (see tensormap_rules.h).
 *
 * Each rule is a small function named after it; CheckStaticRules runs them in a fixed order so
 * the first violation reported is deterministic. Limits come from the cuTensorMapEncodeTiled
 * documentation in cuda.h (CUDA 12/13).
 */
#include "tensormap_rules.h"

#include <tvm/ffi/error.h>

#include <sstream>
#include <string>

namespace tvm_tma {
namespace {

constexpr int64_t kMaxGlobalDim = int64_t{1} << 32;      // globalDim in (0, 2^32]
constexpr int64_t kGlobalStrideLimit = int64_t{1} << 40;  // globalStrides < 2^40
constexpr int64_t kMaxBoxDim = 256;
constexpr int64_t kMaxElementStride = 8;

// Names accepted for the descriptor dtype. The driver only cares about element width (and
// float-ness for NaN fill), so types it has no enum for travel as the same-width unsigned type:
// that is how 8-bit floats and signed 8/16-bit integers are copied bit-exactly.
DtypeInfo LookupDtype(const std::string& name, bool* found) {
  struct Entry {
    const char* name;
    DtypeInfo info;
  };
  static const Entry kTable[] = {
      {"uint8", {cu::kUInt8, 1, false}},
      {"int8", {cu::kUInt8, 1, false}},
      {"float8_e4m3fn", {cu::kUInt8, 1, false}},
      {"float8_e5m2", {cu::kUInt8, 1, false}},
      {"uint16", {cu::kUInt16, 2, false}},
      {"int16", {cu::kUInt16, 2, false}},
      {"uint32", {cu::kUInt32, 4, false}},
      {"int32", {cu::kInt32, 4, false}},
      {"uint64", {cu::kUInt64, 8, false}},
      {"int64", {cu::kInt64, 8, false}},
      {"float16", {cu::kFloat16, 2, true}},
      {"bfloat16", {cu::kBFloat16, 2, true}},
      {"float32", {cu::kFloat32, 4, true}},
      {"float64", {cu::kFloat64, 8, true}},
  };
  for (const Entry& e : kTable) {
    if (name == e.name) {
      *found = true;
      return e.info;
    }
  }
  *found = false;
  return DtypeInfo{cu::kUInt8, 0, false};
}

const char* SwizzleName(int64_t swizzle) {
  switch (swizzle) {
    case cu::kSwizzleNone:
      return "none";
    case cu::kSwizzle32B:
      return "32B";
    case cu::kSwizzle64B:
      return "64B";
    case cu::kSwizzle128B:
      return "128B";
    default:
      return "?";
  }
}

const char* InterleaveName(int64_t interleave) {
  switch (interleave) {
    case cu::kInterleaveNone:
      return "none";
    case cu::kInterleave16B:
      return "16B";
    case cu::kInterleave32B:
      return "32B";
    default:
      return "?";
  }
}

DtypeInfo CheckDtype(const std::string& dtype) {
  bool found = false;
  DtypeInfo info = LookupDtype(dtype, &found);
  if (!found) {
    FailRule("dtype", "unknown descriptor dtype '" + dtype +
                          "'; expected one of uint8 int8 float8_e4m3fn float8_e5m2 uint16 int16 "
                          "uint32 int32 uint64 int64 float16 bfloat16 float32 float64");
  }
  return info;
}

void CheckEnumValue(const char* what, int64_t value, int64_t max, const char* meaning) {
  if (value < 0 || value > max) {
    std::ostringstream os;
    os << what << " " << value << " is outside 0.." << max << " (" << meaning << ")";
    FailRule("enum", os.str());
  }
}

// Enum ranges are checked before anything that interprets them (alignment, spans).
void CheckEnums(const TiledParams& p) {
  const UnknownValues& u = p.unknown;
  if (!u.interleave) {
    CheckEnumValue("interleave", p.interleave, cu::kInterleave32B, "none/16B/32B");
  }
  // 4..6 are the CUDA 12.8+ 128B_ATOM modes; nothing in tvm_tma emits them, and older drivers
  // reject them, so they count as out of range here.
  if (!u.swizzle) CheckEnumValue("swizzle", p.swizzle, cu::kSwizzle128B, "none/32B/64B/128B");
  if (!u.l2_promotion) {
    CheckEnumValue("l2_promotion", p.l2_promotion, cu::kL2PromotionMax, "none/64B/128B/256B");
  }
  if (!u.oob_fill) CheckEnumValue("oob_fill", p.oob_fill, cu::kOobFillNanRequest, "none/NaN");
}

// Interleaved layouts (NC/8HWC8 and the like) are at least 3-D.
void CheckInterleaveRank(const TiledParams& p) {
  if (p.unknown.interleave) return;
  if (p.interleave != cu::kInterleaveNone && p.rank < 3) {
    std::ostringstream os;
    os << "rank " << p.rank << " is below 3, the minimum with interleave " << p.interleave << " ("
       << InterleaveName(p.interleave) << ")";
    FailRule("rank", os.str());
  }
}

void CheckGlobalAddress(const TiledParams& p) {
  if (p.unknown.global_address) return;
  if (p.global_address == 0) FailRule("global-address-align", "global address is null");
  // With an unknown interleave only the 16 bytes every layout needs can be asked for.
  const uint64_t align = !p.unknown.interleave && p.interleave == cu::kInterleave32B ? 32 : 16;
  if (p.global_address % align != 0) {
    std::ostringstream os;
    os << "global address " << Hex(p.global_address) << " is not " << align << "-byte aligned";
    if (align == 32) os << " (required with interleave 2 (32B))";
    FailRule("global-address-align", os.str());
  }
}

void CheckGlobalDims(const TiledParams& p) {
  for (int64_t i = 0; i < p.rank; ++i) {
    if (UnknownValues::Has(p.unknown.dims, i)) continue;
    const int64_t d = p.dims[i];
    if (d <= 0 || d > kMaxGlobalDim) {
      std::ostringstream os;
      os << "dims[" << i << "] = " << d << " is outside (0, 2^32]";
      FailRule("global-dim", os.str());
    }
  }
}

void CheckGlobalStrides(const TiledParams& p) {
  const int64_t multiple = !p.unknown.interleave && p.interleave == cu::kInterleave32B ? 32 : 16;
  for (int64_t i = 0; i + 1 < p.rank; ++i) {
    if (UnknownValues::Has(p.unknown.strides, i)) continue;
    const int64_t s = p.strides[i];
    std::ostringstream os;
    os << "strides[" << i << "] = " << s << " bytes (dimension " << i + 1 << ")";
    if (s < 0 || s >= kGlobalStrideLimit) {
      os << " is outside [0, 2^40)";
      FailRule("global-stride", os.str());
    }
    if (s % multiple != 0) {
      os << " is not a multiple of " << multiple;
      if (multiple == 32) os << " (required with interleave 2 (32B))";
      FailRule("global-stride", os.str());
    }
  }
}

void CheckBoxDims(const TiledParams& p) {
  for (int64_t i = 0; i < p.rank; ++i) {
    if (UnknownValues::Has(p.unknown.box, i)) continue;
    const int64_t b = p.box[i];
    if (b < 1 || b > kMaxBoxDim) {
      std::ostringstream os;
      os << "box[" << i << "] = " << b << " is outside 1..256";
      FailRule("box-dim", os.str());
    }
  }
}

// elementStrides[0] is ignored by the hardware without interleave, but the driver still
// validates its range, so all of them are checked.
void CheckElementStrides(const TiledParams& p) {
  for (int64_t i = 0; i < p.rank; ++i) {
    if (UnknownValues::Has(p.unknown.element_strides, i)) continue;
    const int64_t e = p.element_strides[i];
    if (e < 1 || e > kMaxElementStride) {
      std::ostringstream os;
      os << "element_strides[" << i << "] = " << e << " is outside 1..8";
      FailRule("element-stride", os.str());
    }
  }
}

std::string InnerBoxText(const TiledParams& p, const DtypeInfo& dtype) {
  std::ostringstream os;
  os << "inner box box[0] * elemsize = " << p.box[0] << " * " << dtype.bytes << " = "
     << p.box[0] * dtype.bytes << " bytes";
  return os.str();
}

// Without interleave the TMA moves the innermost box row in 16-byte units.
void CheckInnerBox16B(const TiledParams& p, const DtypeInfo& dtype) {
  if (p.unknown.interleave || UnknownValues::Has(p.unknown.box, 0)) return;
  if (p.interleave != cu::kInterleaveNone) return;
  if ((p.box[0] * dtype.bytes) % 16 != 0) {
    FailRule("inner-box-16B", InnerBoxText(p, dtype) + " is not a multiple of 16");
  }
}

// A swizzle pattern permutes 16-byte chunks within a 32/64/128-byte span; the inner box row
// must fit in one span.
void CheckSwizzleSpan(const TiledParams& p, const DtypeInfo& dtype) {
  if (p.unknown.interleave || p.unknown.swizzle || UnknownValues::Has(p.unknown.box, 0)) return;
  if (p.interleave != cu::kInterleaveNone || p.swizzle == cu::kSwizzleNone) return;
  const int64_t span = int64_t{16} << p.swizzle;  // 1 -> 32, 2 -> 64, 3 -> 128
  if (p.box[0] * dtype.bytes > span) {
    std::ostringstream os;
    os << InnerBoxText(p, dtype) << " exceeds the " << span << "-byte span of swizzle "
       << p.swizzle << " (" << SwizzleName(p.swizzle) << ")";
    FailRule("swizzle-span", os.str());
  }
}

void CheckInterleaveSwizzle(const TiledParams& p) {
  if (p.unknown.interleave || p.unknown.swizzle) return;
  if (p.interleave == cu::kInterleave32B && p.swizzle != cu::kSwizzle32B) {
    std::ostringstream os;
    os << "interleave 2 (32B) requires swizzle 1 (32B), got swizzle " << p.swizzle << " ("
       << SwizzleName(p.swizzle) << ")";
    FailRule("interleave-swizzle", os.str());
  }
}

void CheckOobFill(const TiledParams& p, const DtypeInfo& dtype) {
  if (p.unknown.oob_fill) return;
  if (p.oob_fill == cu::kOobFillNanRequest && !dtype.is_float) {
    FailRule("oob-fill-dtype", "oob_fill 1 (NaN) needs a float16/bfloat16/float32/float64 "
                               "descriptor dtype, got '" + p.dtype + "'");
  }
}

std::string JoinValues(const int64_t* values, int64_t count) {
  std::ostringstream os;
  os << "[";
  for (int64_t i = 0; i < count; ++i) os << (i ? ", " : "") << values[i];
  os << "]";
  return os.str();
}

}  // namespace

void FailRule(const char* rule, const std::string& detail) {
  TVM_FFI_THROW(ValueError) << "tvm_tma: rule '" << rule << "': " << detail;
}

void CheckAddressNotNegative(int64_t signed_value, bool was_negative) {
  if (!was_negative) return;
  FailRule("global-address-align",
           "global address " + std::to_string(signed_value) + " (" +
               Hex(static_cast<uint64_t>(signed_value)) +
               " as an unsigned address) is negative: not a device address");
}

void CheckRank(int64_t rank) {
  if (rank < 1 || rank > kMaxRank) {
    FailRule("rank", "rank " + std::to_string(rank) + " is outside 1..5");
  }
}

DtypeInfo CheckStaticRules(const TiledParams& p) {
  CheckRank(p.rank);
  const DtypeInfo dtype = CheckDtype(p.dtype);
  CheckEnums(p);
  CheckInterleaveRank(p);
  CheckGlobalAddress(p);
  CheckGlobalDims(p);
  CheckGlobalStrides(p);
  CheckBoxDims(p);
  CheckElementStrides(p);
  CheckInnerBox16B(p, dtype);
  CheckSwizzleSpan(p, dtype);
  CheckInterleaveSwizzle(p);
  CheckOobFill(p, dtype);
  return dtype;
}

unsigned __int128 FootprintEnd(const TiledParams& p, const DtypeInfo& dtype) {
  using u128 = unsigned __int128;
  u128 end = static_cast<u128>(p.global_address) + static_cast<u128>(dtype.bytes);
  end += static_cast<u128>(p.dims[0] - 1) * static_cast<u128>(dtype.bytes);
  for (int64_t i = 1; i < p.rank; ++i) {
    end += static_cast<u128>(p.dims[i] - 1) * static_cast<u128>(p.strides[i - 1]);
  }
  return end;
}

std::string Hex(uint64_t value) {
  std::ostringstream os;
  os << "0x" << std::hex << value;
  return os.str();
}

std::string Hex(unsigned __int128 value) {
  const uint64_t high = static_cast<uint64_t>(value >> 64);
  const uint64_t low = static_cast<uint64_t>(value);
  if (high == 0) return Hex(low);
  std::ostringstream os;
  os << "0x" << std::hex << high;
  os.width(16);
  os.fill('0');
  os << low;
  return os.str();
}

std::string DescribeParams(const TiledParams& p) {
  const int64_t rank = p.rank < 0 ? 0 : (p.rank > kMaxRank ? kMaxRank : p.rank);
  std::ostringstream os;
  os << "dtype=" << p.dtype << " rank=" << p.rank << " global_address=" << Hex(p.global_address)
     << " dims=" << JoinValues(p.dims.data(), rank)
     << " strides=" << JoinValues(p.strides.data(), rank > 0 ? rank - 1 : 0)
     << " box=" << JoinValues(p.box.data(), rank)
     << " element_strides=" << JoinValues(p.element_strides.data(), rank)
     << " interleave=" << p.interleave << " swizzle=" << p.swizzle
     << " l2_promotion=" << p.l2_promotion << " oob_fill=" << p.oob_fill;
  return os.str();
}

}  // namespace tvm_tma
