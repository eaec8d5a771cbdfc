/*
 * Rule checks for cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col arguments (see
 * tensormap_rules.h).
 *
 * Each rule is a small function named after it; CheckStaticRules runs them in a fixed order so
 * the first violation reported is deterministic. Limits come from the cuTensorMapEncodeTiled
 * and cuTensorMapEncodeIm2col documentation in cuda.h (CUDA 12/13). The two kinds of map share
 * every rule on the tensor itself (dtype, enums, address, dims, strides, element strides,
 * swizzle and interleave) under the same names; they differ in the box: a tiled map's box[]
 * against an im2col map's corners, channels_per_pixel and pixels_per_column.
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
constexpr int64_t kMaxChannelsPerPixel = 256;
constexpr int64_t kMaxPixelsPerColumn = 1024;

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
void CheckEnums(const MapParams& p) {
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
void CheckInterleaveRank(const MapParams& p) {
  if (p.unknown.interleave) return;
  if (p.interleave != cu::kInterleaveNone && p.rank < 3) {
    std::ostringstream os;
    os << "rank " << p.rank << " is below 3, the minimum with interleave " << p.interleave << " ("
       << InterleaveName(p.interleave) << ")";
    FailRule("rank", os.str());
  }
}

void CheckGlobalAddress(const MapParams& p) {
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

void CheckGlobalDims(const MapParams& p) {
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

void CheckGlobalStrides(const MapParams& p) {
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
void CheckElementStrides(const MapParams& p) {
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

// The innermost row of the box, which the TMA moves in 16-byte units and which a swizzle
// pattern must contain: box[0] of a tiled map, channels_per_pixel of an im2col map.
struct InnerBox {
  const char* name;
  int64_t elements;
  bool unknown;
};

InnerBox TiledInnerBox(const TiledParams& p) {
  return {"box[0]", p.box[0], UnknownValues::Has(p.unknown.box, 0)};
}

InnerBox Im2colInnerBox(const Im2colParams& p) {
  return {"channels_per_pixel", p.channels_per_pixel, p.unknown.channels_per_pixel};
}

std::string InnerBoxText(const InnerBox& inner, const DtypeInfo& dtype) {
  std::ostringstream os;
  os << "inner box " << inner.name << " * elemsize = " << inner.elements << " * " << dtype.bytes
     << " = " << inner.elements * dtype.bytes << " bytes";
  return os.str();
}

// Without interleave the TMA moves the innermost box row in 16-byte units.
void CheckInnerBox16B(const MapParams& p, const InnerBox& inner, const DtypeInfo& dtype) {
  if (p.unknown.interleave || inner.unknown) return;
  if (p.interleave != cu::kInterleaveNone) return;
  if ((inner.elements * dtype.bytes) % 16 != 0) {
    FailRule("inner-box-16B", InnerBoxText(inner, dtype) + " is not a multiple of 16");
  }
}

// A swizzle pattern permutes 16-byte chunks within a 32/64/128-byte span; the inner box row
// must fit in one span.
void CheckSwizzleSpan(const MapParams& p, const InnerBox& inner, const DtypeInfo& dtype) {
  if (p.unknown.interleave || p.unknown.swizzle || inner.unknown) return;
  if (p.interleave != cu::kInterleaveNone || p.swizzle == cu::kSwizzleNone) return;
  const int64_t span = int64_t{16} << p.swizzle;  // 1 -> 32, 2 -> 64, 3 -> 128
  if (inner.elements * dtype.bytes > span) {
    std::ostringstream os;
    os << InnerBoxText(inner, dtype) << " exceeds the " << span << "-byte span of swizzle "
       << p.swizzle << " (" << SwizzleName(p.swizzle) << ")";
    FailRule("swizzle-span", os.str());
  }
}

void CheckInterleaveSwizzle(const MapParams& p) {
  if (p.unknown.interleave || p.unknown.swizzle) return;
  if (p.interleave == cu::kInterleave32B && p.swizzle != cu::kSwizzle32B) {
    std::ostringstream os;
    os << "interleave 2 (32B) requires swizzle 1 (32B), got swizzle " << p.swizzle << " ("
       << SwizzleName(p.swizzle) << ")";
    FailRule("interleave-swizzle", os.str());
  }
}

void CheckOobFill(const MapParams& p, const DtypeInfo& dtype) {
  if (p.unknown.oob_fill) return;
  if (p.oob_fill == cu::kOobFillNanRequest && !dtype.is_float) {
    FailRule("oob-fill-dtype", "oob_fill 1 (NaN) needs a float16/bfloat16/float32/float64 "
                               "descriptor dtype, got '" + p.dtype + "'");
  }
}

// ---- im2col maps -----------------------------------------------------------------------------

// The corner offsets are stored in a field whose width shrinks as the number of spatial
// dimensions grows: one 16-bit offset (rank 3), two 8-bit (rank 4), three 5-bit (rank 5).
struct CornerRange {
  int64_t lo;
  int64_t hi;
};

CornerRange Im2colCornerRange(int64_t rank) {
  switch (rank) {
    case 3:
      return {-(int64_t{1} << 15), (int64_t{1} << 15) - 1};
    case 4:
      return {-(int64_t{1} << 7), (int64_t{1} << 7) - 1};
    default:
      return {-(int64_t{1} << 4), (int64_t{1} << 4) - 1};
  }
}

// Spatial dimension i is dims[i + 1]: W, then H, then D.
const char* SpatialName(int64_t i) {
  static const char* const kNames[] = {"W", "H", "D"};
  return i >= 0 && i < kMaxSpatialRank ? kNames[i] : "?";
}

// " + 4" / " - 4": a term of a sum as it reads.
std::string Term(int64_t value) {
  return value < 0 ? " - " + std::to_string(-value) : " + " + std::to_string(value);
}

void CheckIm2colCorners(const Im2colParams& p) {
  const CornerRange range = Im2colCornerRange(p.rank);
  struct Corner {
    const char* name;
    const std::array<int64_t, kMaxSpatialRank>& values;
    uint32_t unknown;
  };
  const Corner corners[] = {{"lower_corner", p.lower_corner, p.unknown.lower_corner},
                            {"upper_corner", p.upper_corner, p.unknown.upper_corner}};
  for (const Corner& corner : corners) {
    for (int64_t i = 0; i < p.rank - 2; ++i) {
      if (UnknownValues::Has(corner.unknown, i)) continue;
      const int64_t v = corner.values[i];
      if (v < range.lo || v > range.hi) {
        std::ostringstream os;
        os << corner.name << "[" << i << "] = " << v << " (" << SpatialName(i)
           << ") is outside " << range.lo << ".." << range.hi << ", the corner range of a rank-"
           << p.rank << " im2col map";
        FailRule("im2col-corner", os.str());
      }
    }
  }
}

// The bounding box of spatial dimension i runs from lower_corner[i] to dims[i+1] - 1 +
// upper_corner[i] (the upper corner is an offset from the far edge), so it holds dims[i+1] +
// upper_corner[i] - lower_corner[i] pixels; the driver refuses a box of zero area.
void CheckIm2colBoundingBox(const Im2colParams& p) {
  for (int64_t i = 0; i < p.rank - 2; ++i) {
    if (UnknownValues::Has(p.unknown.dims, i + 1) ||
        UnknownValues::Has(p.unknown.lower_corner, i) ||
        UnknownValues::Has(p.unknown.upper_corner, i)) {
      continue;
    }
    const int64_t dim = p.dims[i + 1];
    const int64_t extent = dim + p.upper_corner[i] - p.lower_corner[i];
    if (extent < 1) {
      std::ostringstream os;
      os << "the bounding box of spatial dimension " << i << " (" << SpatialName(i)
         << ") is empty: dims[" << i + 1 << "] + upper_corner[" << i << "] - lower_corner[" << i
         << "] = " << dim << Term(p.upper_corner[i]) << Term(-p.lower_corner[i]) << " = "
         << extent << " pixels (it runs from lower_corner[" << i << "] = " << p.lower_corner[i]
         << " to dims[" << i + 1 << "] - 1 + upper_corner[" << i << "] = "
         << dim - 1 + p.upper_corner[i] << ")";
      FailRule("im2col-bounding-box", os.str());
    }
  }
}

void CheckIm2colChannels(const Im2colParams& p) {
  if (p.unknown.channels_per_pixel) return;
  const int64_t c = p.channels_per_pixel;
  if (c < 1 || c > kMaxChannelsPerPixel) {
    FailRule("im2col-channels",
             "channels_per_pixel = " + std::to_string(c) + " is outside 1..256");
  }
}

void CheckIm2colPixels(const Im2colParams& p) {
  if (p.unknown.pixels_per_column) return;
  const int64_t n = p.pixels_per_column;
  if (n < 1 || n > kMaxPixelsPerColumn) {
    FailRule("im2col-pixels",
             "pixels_per_column = " + std::to_string(n) + " is outside 1..1024");
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

void CheckIm2colRank(int64_t rank) {
  if (rank < 3 || rank > kMaxRank) {
    FailRule("im2col-rank", "rank " + std::to_string(rank) +
                                " is outside 3..5 (an im2col map is C, 1 to 3 spatial dims, N)");
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
  CheckInnerBox16B(p, TiledInnerBox(p), dtype);
  CheckSwizzleSpan(p, TiledInnerBox(p), dtype);
  CheckInterleaveSwizzle(p);
  CheckOobFill(p, dtype);
  return dtype;
}

DtypeInfo CheckStaticRules(const Im2colParams& p) {
  CheckIm2colRank(p.rank);
  const DtypeInfo dtype = CheckDtype(p.dtype);
  CheckEnums(p);
  CheckGlobalAddress(p);
  CheckGlobalDims(p);
  CheckGlobalStrides(p);
  CheckIm2colCorners(p);
  CheckIm2colBoundingBox(p);
  CheckIm2colChannels(p);
  CheckIm2colPixels(p);
  CheckElementStrides(p);
  CheckInnerBox16B(p, Im2colInnerBox(p), dtype);
  CheckSwizzleSpan(p, Im2colInnerBox(p), dtype);
  // No interleave-swizzle rule here: the H100's driver encodes an im2col map with interleave
  // 32B under swizzle 0 or 3 (measured by test_the_driver_agrees_with_the_rules), although
  // cuda.h states the pairing for tiled maps.
  CheckOobFill(p, dtype);
  return dtype;
}

unsigned __int128 FootprintEnd(const MapParams& p, const DtypeInfo& dtype) {
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

namespace {

int64_t ClampedRank(const MapParams& p) {
  return p.rank < 0 ? 0 : (p.rank > kMaxRank ? kMaxRank : p.rank);
}

// "dtype=... dims=[...] strides=[...]": what both kinds of map start with.
void DescribeTensor(std::ostream& os, const MapParams& p) {
  const int64_t rank = ClampedRank(p);
  os << "dtype=" << p.dtype << " rank=" << p.rank << " global_address=" << Hex(p.global_address)
     << " dims=" << JoinValues(p.dims.data(), rank)
     << " strides=" << JoinValues(p.strides.data(), rank > 0 ? rank - 1 : 0);
}

void DescribeTraversal(std::ostream& os, const MapParams& p) {
  os << " element_strides=" << JoinValues(p.element_strides.data(), ClampedRank(p))
     << " interleave=" << p.interleave << " swizzle=" << p.swizzle
     << " l2_promotion=" << p.l2_promotion << " oob_fill=" << p.oob_fill;
}

}  // namespace

std::string DescribeParams(const TiledParams& p) {
  std::ostringstream os;
  DescribeTensor(os, p);
  os << " box=" << JoinValues(p.box.data(), ClampedRank(p));
  DescribeTraversal(os, p);
  return os.str();
}

std::string DescribeParams(const Im2colParams& p) {
  const int64_t spatial = ClampedRank(p) > 2 ? ClampedRank(p) - 2 : 0;
  std::ostringstream os;
  os << "im2col ";
  DescribeTensor(os, p);
  os << " lower_corner=" << JoinValues(p.lower_corner.data(), spatial)
     << " upper_corner=" << JoinValues(p.upper_corner.data(), spatial)
     << " channels_per_pixel=" << p.channels_per_pixel
     << " pixels_per_column=" << p.pixels_per_column;
  DescribeTraversal(os, p);
  return os.str();
}

}  // namespace tvm_tma
