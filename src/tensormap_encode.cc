/*
 * tvm_tma host runtime: global functions that encode (and validate) TMA tiled tensor maps.
 *
 * Generated host code calls
 *
 *   T.call_packed("tvm_tma.encode_tiled", map, dtype, rank, global_address,
 *                 dims[rank]..., strides[rank-1]..., box[rank]..., element_strides[rank]...,
 *                 interleave, swizzle, l2_promotion, oob_fill)
 *
 * once per descriptor before each kernel launch; a repeat of the same arguments is served from
 * descriptor_cache.h without calling the driver's encode. All arrays are in driver order
 * (innermost dimension first); strides are byte strides of dims 1..rank-1. `map` and
 * `global_address` arrive as opaque pointers (TVM passes handles as void*).
 *
 * The compile-time check calls
 *
 *   tvm_tma.validate_tiled_static(dtype, rank, dims[rank]..., strides[rank-1]...,
 *                                 box[rank]..., element_strides[rank]...,
 *                                 interleave, swizzle, l2_promotion, oob_fill)
 *
 * (no map, no address; any integer may be None for a value only the launch knows), which runs
 * the same rules as the encode, skipping those that read an unknown value.
 *
 * Im2col maps (cuTensorMapEncodeIm2col) have the same three entry points with the driver's
 * im2col arguments in place of the box:
 *
 *   T.call_packed("tvm_tma.encode_im2col", map, dtype, rank, global_address,
 *                 dims[rank]..., strides[rank-1]..., lower_corner[rank-2]...,
 *                 upper_corner[rank-2]..., channels_per_pixel, pixels_per_column,
 *                 element_strides[rank]..., interleave, swizzle, l2_promotion, oob_fill)
 *   tvm_tma.validate_im2col(dtype, rank, global_address, ...)        (no map)
 *   tvm_tma.validate_im2col_static(dtype, rank, dims[rank]..., ...)  (no map, no address)
 *
 * rank is 3..5 (C, W[, H[, D]], N in driver order); the corners are W first.
 *
 * The point of routing the encode through here instead of straight to the driver: every driver
 * rule is re-checked on the actual values, and the footprint the map can touch is checked
 * against the device allocation, so a wrong pointer or shape becomes a Python exception naming
 * the rule instead of a CUDA_ERROR_INVALID_VALUE or an illegal-address fault in the kernel.
 */
#include <tvm/ffi/any.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include <array>
#include <atomic>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>

#include "cuda_driver.h"
#include "descriptor_cache.h"
#include "tensormap_rules.h"

namespace tvm_tma {
namespace {

namespace ffi = ::tvm::ffi;

// Successful driver encodes in this process. Tests use it to prove that a descriptor was (or
// was not) re-encoded, e.g. that a cached map is reused across calls.
std::atomic<int64_t> g_encode_count{0};

// ---------------------------------------------------------------------------------------------
// Argument parsing
// ---------------------------------------------------------------------------------------------

// How one entry point lays out its packed arguments.
struct Layout {
  const char* func;
  bool im2col;        // corners, channels and pixels in place of the box
  bool with_map;      // encode_*: the map pointer comes first
  bool with_address;  // false for validate_*_static, whose integers may also be None
};

constexpr Layout kEncodeTiled{"tvm_tma.encode_tiled", false, true, true};
constexpr Layout kValidateTiled{"tvm_tma.validate_tiled", false, false, true};
constexpr Layout kValidateTiledStatic{"tvm_tma.validate_tiled_static", false, false, false};
constexpr Layout kEncodeIm2col{"tvm_tma.encode_im2col", true, true, true};
constexpr Layout kValidateIm2col{"tvm_tma.validate_im2col", true, false, true};
constexpr Layout kValidateIm2colStatic{"tvm_tma.validate_im2col_static", true, false, false};

// dtype, rank, [address,] dims, strides (rank - 1), the box or the im2col fields, element
// strides, 4 enums; the map first for an encode.
int64_t ExpectedArgCount(const Layout& layout, int64_t rank) {
  int64_t count = (layout.with_map ? 1 : 0) + 2 + (layout.with_address ? 1 : 0);
  count += rank + (rank - 1);
  count += layout.im2col ? 2 * (rank - 2) + 2 : rank;
  return count + rank + 4;
}

std::string DescribeLayout(const Layout& layout) {
  std::string text = layout.with_map ? "map, " : "";
  text += "dtype, rank, ";
  if (layout.with_address) text += "global_address, ";
  text += "dims[rank], strides[rank-1], ";
  text += layout.im2col ? "lower_corner[rank-2], upper_corner[rank-2], channels_per_pixel, "
                          "pixels_per_column, "
                        : "box[rank], ";
  return text + "element_strides[rank], interleave, swizzle, l2_promotion, oob_fill";
}

// Reads the flat packed arguments left to right. Type mistakes are programming errors in the
// caller (generated code or a test), so they raise TypeError rather than a rule ValueError.
class ArgReader {
 public:
  ArgReader(const Layout& layout, ffi::PackedArgs args)
      : func_(layout.func), layout_(layout), args_(args) {}

  // A bool is not an integer here (True would pass as 1): a dim, stride or enum written as a
  // bool is a mistake.
  int64_t Int(const char* what) {
    const int i = Next();
    if (auto v = TryInt(i)) return *v;
    ThrowType(i, what, "an integer");
  }

  // An integer, or None (`*known` = false) for a value only the launch knows.
  int64_t IntOrUnknown(const char* what, bool* known) {
    const int i = Next();
    *known = args_[i].type_index() != ffi::TypeIndex::kTVMFFINone;
    if (!*known) return 0;
    if (auto v = TryInt(i)) return *v;
    ThrowType(i, what, "an integer or None");
  }

  // Device addresses come from generated code as opaque handles; tests and validate_tiled
  // pass plain integers. None reads as null so the null rules can report it. A negative
  // integer sets `*negative` (and `*signed_value`): as uint64 it would look like a valid,
  // aligned address, so the callers refuse it by name.
  uint64_t Address(const char* what, bool* negative = nullptr, int64_t* signed_value = nullptr) {
    const int i = Next();
    const ffi::AnyView arg = args_[i];
    if (negative != nullptr) *negative = false;
    switch (arg.type_index()) {
      case ffi::TypeIndex::kTVMFFIOpaquePtr:
        return reinterpret_cast<uint64_t>(arg.cast<void*>());
      case ffi::TypeIndex::kTVMFFINone:
        return 0;
      case ffi::TypeIndex::kTVMFFIInt: {
        const int64_t value = arg.cast<int64_t>();
        if (value < 0 && negative != nullptr) {
          *negative = true;
          if (signed_value != nullptr) *signed_value = value;
        }
        return static_cast<uint64_t>(value);
      }
      default:
        ThrowType(i, what, "an opaque pointer or an integer address");
    }
  }

  // The descriptor dtype as a name; a DLDataType is accepted too and printed the TVM way.
  std::string Dtype(const char* what) {
    const int i = Next();
    const ffi::AnyView arg = args_[i];
    if (arg.type_index() == ffi::TypeIndex::kTVMFFIDataType) {
      return std::string(ffi::DLDataTypeToString(arg.cast<DLDataType>()));
    }
    if (auto s = arg.try_cast<ffi::String>()) return std::string(*s);
    ThrowType(i, what, "a dtype string");
  }

  // Peeks at an integer without consuming it (the rank decides how many arguments follow).
  int64_t PeekInt(int index, const char* what) const {
    if (index >= args_.size()) ThrowArity(-1);
    if (auto v = TryInt(index)) return *v;
    ThrowType(index, what, "an integer");
  }

  [[noreturn]] void ThrowArity(int64_t expected) const {
    std::ostringstream os;
    os << func_ << ": got " << args_.size() << " arguments";
    if (expected >= 0) os << ", expected " << expected << " for this rank";
    os << "; layout is " << DescribeLayout(layout_);
    TVM_FFI_THROW(TypeError) << os.str();
  }

  int size() const { return args_.size(); }

 private:
  int Next() { return next_++; }

  std::optional<int64_t> TryInt(int index) const {
    if (args_[index].type_index() == ffi::TypeIndex::kTVMFFIBool) return std::nullopt;
    return args_[index].try_cast<int64_t>();
  }

  [[noreturn]] void ThrowType(int index, const char* what, const char* expected) const {
    TVM_FFI_THROW(TypeError) << func_ << ": argument " << index << " (" << what << ") must be "
                             << expected << ", got " << args_[index].GetTypeKey();
  }

  const char* func_;
  Layout layout_;
  ffi::PackedArgs args_;
  int next_ = 0;
};

// The integer fields of one layout: plain integers at run time, an integer or None (unknown)
// in the compile-time layout, where an unknown element sets its bit in the UnknownValues mask.
class FieldReader {
 public:
  FieldReader(ArgReader* reader, bool allow_unknown)
      : reader_(reader), allow_unknown_(allow_unknown) {}

  int64_t Scalar(const char* what, bool* unknown) {
    if (!allow_unknown_) return reader_->Int(what);
    bool known = true;
    const int64_t value = reader_->IntOrUnknown(what, &known);
    *unknown = !known;
    return value;
  }

  template <size_t N>
  void Array(const char* what, int64_t count, std::array<int64_t, N>* values, uint32_t* unknown) {
    for (int64_t i = 0; i < count; ++i) {
      bool is_unknown = false;
      (*values)[i] = Scalar(what, &is_unknown);
      if (is_unknown) *unknown |= 1u << i;
    }
  }

 private:
  ArgReader* reader_;
  bool allow_unknown_;
};

// Parses everything after the map (an encode reads the map itself first). Rank is validated
// before anything else because it fixes the argument count; a wrong count is then reported as
// such rather than as a confusing type error halfway through.
template <typename Params>
Params ParseParams(ArgReader* reader, const Layout& layout) {
  constexpr bool kIm2col = std::is_same_v<Params, Im2colParams>;
  const int64_t rank = reader->PeekInt(layout.with_map ? 2 : 1, "rank");
  if constexpr (kIm2col) {
    CheckIm2colRank(rank);
  } else {
    CheckRank(rank);
  }
  const int64_t expected = ExpectedArgCount(layout, rank);
  if (reader->size() != expected) reader->ThrowArity(expected);

  Params p;
  UnknownValues& u = p.unknown;
  FieldReader field(reader, /*allow_unknown=*/!layout.with_address);
  p.dtype = reader->Dtype("dtype");
  p.rank = reader->Int("rank");
  bool negative = false;
  int64_t signed_address = 0;
  if (layout.with_address) {
    p.global_address = reader->Address("global_address", &negative, &signed_address);
  } else {
    u.global_address = true;
  }
  field.Array("dims", rank, &p.dims, &u.dims);
  field.Array("strides", rank - 1, &p.strides, &u.strides);
  if constexpr (kIm2col) {
    field.Array("lower_corner", rank - 2, &p.lower_corner, &u.lower_corner);
    field.Array("upper_corner", rank - 2, &p.upper_corner, &u.upper_corner);
    p.channels_per_pixel = field.Scalar("channels_per_pixel", &u.channels_per_pixel);
    p.pixels_per_column = field.Scalar("pixels_per_column", &u.pixels_per_column);
  } else {
    field.Array("box", rank, &p.box, &u.box);
  }
  field.Array("element_strides", rank, &p.element_strides, &u.element_strides);
  p.interleave = field.Scalar("interleave", &u.interleave);
  p.swizzle = field.Scalar("swizzle", &u.swizzle);
  p.l2_promotion = field.Scalar("l2_promotion", &u.l2_promotion);
  p.oob_fill = field.Scalar("oob_fill", &u.oob_fill);
  CheckAddressNotNegative(signed_address, negative);
  return p;
}

// ---------------------------------------------------------------------------------------------
// Checks that need the driver
// ---------------------------------------------------------------------------------------------

// Decimal when it fits in 64 bits (always, for real tensors), hex otherwise.
std::string ByteCount(unsigned __int128 n) {
  if ((n >> 64) != 0) return Hex(n);
  return std::to_string(static_cast<uint64_t>(n));
}

const CudaDriver& RequireDriver() {
  const CudaDriver& driver = GetCudaDriver();
  if (!driver.available) {
    // An environment problem, not a bad argument: RuntimeError.
    TVM_FFI_THROW(RuntimeError) << "tvm_tma: rule 'driver': the CUDA driver is unavailable: "
                                << driver.unavailable_reason;
  }
  return driver;
}

// The driver accepts any address/shape that satisfies the static rules; whether the bytes
// behind them exist is only discovered by the TMA unit, as an illegal-address fault that kills
// the CUDA context. Asking the driver which allocation holds the base address and comparing
// its range with everything the map can reach catches wrong pointers and shapes here instead.
// (With a caching allocator the "allocation" is the allocator's block, so this bounds the
// damage to memory we own rather than proving the tensor itself is large enough.)
template <typename Params>
void CheckFootprint(const CudaDriver& driver, const Params& p, const DtypeInfo& dtype) {
  if (driver.mem_get_address_range == nullptr) return;  // old driver: nothing to ask

  cu::DevicePtr alloc_base = 0;
  size_t alloc_size = 0;
  const cu::Result rc = driver.mem_get_address_range(&alloc_base, &alloc_size, p.global_address);
  if (rc == cu::kErrorInvalidContext || rc == cu::kErrorNotInitialized) {
    // No context to ask in (ScopedPointerContext could not provide one). The encode that
    // follows needs one too and reports it as a 'driver' error, so nothing is lost by skipping.
    return;
  }
  if (rc != cu::kSuccess) {
    FailRule("global-address", "global address " + Hex(p.global_address) +
                                   " is not in a CUDA device allocation (driver: " +
                                   DescribeCudaResult(driver, rc) + ")");
  }

  const unsigned __int128 begin = p.global_address;
  const unsigned __int128 end = FootprintEnd(p, dtype);
  const unsigned __int128 alloc_end = static_cast<unsigned __int128>(alloc_base) + alloc_size;
  if (begin < alloc_base || end > alloc_end) {
    std::ostringstream os;
    os << "footprint [" << Hex(begin) << ", " << Hex(end) << ") (" << ByteCount(end - begin)
       << " bytes) is not inside one device allocation; the allocation holding the base is ["
       << Hex(static_cast<uint64_t>(alloc_base)) << ", " << Hex(alloc_end) << ") (" << alloc_size
       << " bytes); " << DescribeParams(p);
    FailRule("global-footprint", os.str());
  }
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

// The driver call for each kind of map. Narrowing is safe: CheckStaticRules bounded every
// value to the driver's ranges.
struct DriverCall {
  const char* name;
  cu::Result result;
};

DriverCall CallDriver(const CudaDriver& driver, const TiledParams& p, const DtypeInfo& dtype,
                      cu::TensorMap* staging) {
  uint64_t dims[kMaxRank] = {};
  uint64_t strides[kMaxRank - 1] = {};
  uint32_t box[kMaxRank] = {};
  uint32_t element_strides[kMaxRank] = {};
  for (int64_t i = 0; i < p.rank; ++i) {
    dims[i] = static_cast<uint64_t>(p.dims[i]);
    box[i] = static_cast<uint32_t>(p.box[i]);
    element_strides[i] = static_cast<uint32_t>(p.element_strides[i]);
    if (i + 1 < p.rank) strides[i] = static_cast<uint64_t>(p.strides[i]);
  }
  const cu::Result rc = driver.encode_tiled(
      staging, dtype.code, static_cast<uint32_t>(p.rank),
      reinterpret_cast<void*>(static_cast<uintptr_t>(p.global_address)), dims, strides, box,
      element_strides, static_cast<int>(p.interleave), static_cast<int>(p.swizzle),
      static_cast<int>(p.l2_promotion), static_cast<int>(p.oob_fill));
  return {"cuTensorMapEncodeTiled", rc};
}

DriverCall CallDriver(const CudaDriver& driver, const Im2colParams& p, const DtypeInfo& dtype,
                      cu::TensorMap* staging) {
  if (driver.encode_im2col == nullptr) {
    TVM_FFI_THROW(RuntimeError) << "tvm_tma: rule 'driver': the CUDA driver has no "
                                   "cuTensorMapEncodeIm2col (driver older than CUDA 12?)";
  }
  uint64_t dims[kMaxRank] = {};
  uint64_t strides[kMaxRank - 1] = {};
  int lower[kMaxSpatialRank] = {};
  int upper[kMaxSpatialRank] = {};
  uint32_t element_strides[kMaxRank] = {};
  for (int64_t i = 0; i < p.rank; ++i) {
    dims[i] = static_cast<uint64_t>(p.dims[i]);
    element_strides[i] = static_cast<uint32_t>(p.element_strides[i]);
    if (i + 1 < p.rank) strides[i] = static_cast<uint64_t>(p.strides[i]);
    if (i + 2 < p.rank) {
      lower[i] = static_cast<int>(p.lower_corner[i]);
      upper[i] = static_cast<int>(p.upper_corner[i]);
    }
  }
  const cu::Result rc = driver.encode_im2col(
      staging, dtype.code, static_cast<uint32_t>(p.rank),
      reinterpret_cast<void*>(static_cast<uintptr_t>(p.global_address)), dims, strides, lower,
      upper, static_cast<uint32_t>(p.channels_per_pixel),
      static_cast<uint32_t>(p.pixels_per_column), element_strides, static_cast<int>(p.interleave),
      static_cast<int>(p.swizzle), static_cast<int>(p.l2_promotion),
      static_cast<int>(p.oob_fill));
  return {"cuTensorMapEncodeIm2col", rc};
}

// Encodes into `staging`, a 128-byte-aligned local buffer, which the caller copies into the
// map. TVM's host stack slot for the map is only 64-byte aligned, which is all the driver
// documents, but the CUDA 13 header declares CUtensorMap alignas(128) and a driver may rely on
// that; staging keeps the driver on storage that matches its own declaration whatever `map` is.
template <typename Params>
void Encode(const CudaDriver& driver, const Params& p, const DtypeInfo& dtype,
            cu::TensorMap* staging) {
  const DriverCall call = CallDriver(driver, p, dtype, staging);
  if (call.result != cu::kSuccess) {
    TVM_FFI_THROW(RuntimeError) << "tvm_tma: rule 'driver': " << call.name << " returned "
                                << DescribeCudaResult(driver, call.result) << " for "
                                << DescribeParams(p);
  }
  g_encode_count.fetch_add(1, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Global functions
// ---------------------------------------------------------------------------------------------

// A repeated call with identical arguments replays the cached map (descriptor_cache.h): the
// static rules held when it was stored and cannot have changed, but the allocation behind the
// address can have, so the footprint is checked on every call.
template <typename Params>
void EncodePacked(const Layout& layout, ffi::PackedArgs args, ffi::Any* rv) {
  ArgReader reader(layout, args);
  bool map_negative = false;
  int64_t map_signed = 0;
  const uint64_t map = reader.Address("map", &map_negative, &map_signed);
  if (map_negative) {
    FailRule("map-null", "tensor map pointer " + std::to_string(map_signed) +
                             " is negative: not a host address");
  }
  const Params p = ParseParams<Params>(&reader, layout);
  if (map == 0) FailRule("map-null", "tensor map pointer is null");
  DescriptorCache& cache = GlobalDescriptorCache();
  alignas(128) cu::TensorMap staging;
  DtypeInfo dtype;
  const bool cached = cache.Lookup(p, &staging, &dtype);
  if (!cached) dtype = CheckStaticRules(p);
  const CudaDriver& driver = RequireDriver();
  const ScopedPointerContext context(driver, p.global_address);
  if (context.status() == cu::kErrorInvalidValue) {
    FailRule("global-address", "global address " + Hex(p.global_address) +
                                   " is not CUDA memory (no CUDA context owns it)");
  }
  CheckFootprint(driver, p, dtype);
  if (!cached) {
    Encode(driver, p, dtype, &staging);
    cache.Insert(p, staging, dtype);
  }
  std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(map)), &staging, sizeof(staging));
  *rv = nullptr;
}

// Static rules only: validate_tiled / validate_im2col let CI (and the compile-time planner's
// tests) exercise every rule on machines without a GPU; the *_static layouts are the rules on
// what is known when a kernel is compiled: no address, and None for the values only the launch
// knows (their rules are skipped here and run by the encode at launch).
template <typename Params>
void ValidatePacked(const Layout& layout, ffi::PackedArgs args, ffi::Any* rv) {
  ArgReader reader(layout, args);
  const Params p = ParseParams<Params>(&reader, layout);
  CheckStaticRules(p);
  *rv = nullptr;
}

void EncodeTiledPacked(ffi::PackedArgs args, ffi::Any* rv) {
  EncodePacked<TiledParams>(kEncodeTiled, args, rv);
}
void ValidateTiledPacked(ffi::PackedArgs args, ffi::Any* rv) {
  ValidatePacked<TiledParams>(kValidateTiled, args, rv);
}
void ValidateTiledStaticPacked(ffi::PackedArgs args, ffi::Any* rv) {
  ValidatePacked<TiledParams>(kValidateTiledStatic, args, rv);
}
void EncodeIm2colPacked(ffi::PackedArgs args, ffi::Any* rv) {
  EncodePacked<Im2colParams>(kEncodeIm2col, args, rv);
}
void ValidateIm2colPacked(ffi::PackedArgs args, ffi::Any* rv) {
  ValidatePacked<Im2colParams>(kValidateIm2col, args, rv);
}
void ValidateIm2colStaticPacked(ffi::PackedArgs args, ffi::Any* rv) {
  ValidatePacked<Im2colParams>(kValidateIm2colStatic, args, rv);
}

}  // namespace
}  // namespace tvm_tma

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = ::tvm::ffi::reflection;
  refl::GlobalDef()
      .def_packed("tvm_tma.encode_tiled", tvm_tma::EncodeTiledPacked)
      .def_packed("tvm_tma.validate_tiled", tvm_tma::ValidateTiledPacked)
      .def_packed("tvm_tma.validate_tiled_static", tvm_tma::ValidateTiledStaticPacked)
      .def_packed("tvm_tma.encode_im2col", tvm_tma::EncodeIm2colPacked)
      .def_packed("tvm_tma.validate_im2col", tvm_tma::ValidateIm2colPacked)
      .def_packed("tvm_tma.validate_im2col_static", tvm_tma::ValidateIm2colStaticPacked)
      .def("tvm_tma.encode_count",
           []() -> int64_t { return tvm_tma::g_encode_count.load(std::memory_order_relaxed); })
      .def("tvm_tma.check_map_slots",
           [](void* slots, int64_t alignment, std::string name) {
             // The workspace a device-born map is rebound in: tensormap.replace writes a
             // 128-byte aligned object, which only the launch can check for a pointer.
             auto address = reinterpret_cast<uintptr_t>(slots);
             if (alignment <= 0 || address % static_cast<uintptr_t>(alignment) != 0) {
               std::ostringstream os;
               os << "the tensor-map workspace " << name << " starts at 0x" << std::hex
                  << address << std::dec << ", not on a " << alignment
                  << "-byte boundary (tensormap.replace writes 128-byte aligned slots)";
               tvm_tma::FailRule("tensormap-slot", os.str());
             }
           })
      .def("tvm_tma.driver_available", []() -> bool { return tvm_tma::GetCudaDriver().available; })
      .def("tvm_tma.driver_error",
           []() -> std::string { return tvm_tma::GetCudaDriver().unavailable_reason; });
}
