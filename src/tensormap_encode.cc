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

#include <atomic>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>

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

// Reads the flat packed arguments left to right. Type mistakes are programming errors in the
// caller (generated code or a test), so they raise TypeError rather than a rule ValueError.
class ArgReader {
 public:
  ArgReader(const char* func, ffi::PackedArgs args) : func_(func), args_(args) {}

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
    const bool with_map = std::strcmp(func_, "tvm_tma.encode_tiled") == 0;
    const bool with_address = std::strcmp(func_, "tvm_tma.validate_tiled_static") != 0;
    std::ostringstream os;
    os << func_ << ": got " << args_.size() << " arguments";
    if (expected >= 0) os << ", expected " << expected << " for this rank";
    os << "; layout is " << (with_map ? "map, " : "") << "dtype, rank, "
       << (with_address ? "global_address, " : "")
       << "dims[rank], strides[rank-1], box[rank], "
          "element_strides[rank], interleave, swizzle, l2_promotion, oob_fill";
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
  ffi::PackedArgs args_;
  int next_ = 0;
};

// dtype, rank, address, 4 arrays (rank-1 strides), 4 enums.
int64_t ExpectedArgCount(int64_t rank, bool with_map) {
  return (with_map ? 1 : 0) + 3 + (4 * rank - 1) + 4;
}

// Parses the shared layout after the optional map. Rank is validated before anything else
// because it fixes the argument count; a wrong count is then reported as such rather than as a
// confusing type error halfway through.
TiledParams ParseTiled(ArgReader* reader, bool with_map) {
  const int rank_index = with_map ? 2 : 1;
  const int64_t rank = reader->PeekInt(rank_index, "rank");
  CheckRank(rank);
  const int64_t expected = ExpectedArgCount(rank, with_map);
  if (reader->size() != expected) reader->ThrowArity(expected);

  TiledParams p;
  p.dtype = reader->Dtype("dtype");
  p.rank = reader->Int("rank");
  bool negative = false;
  int64_t signed_address = 0;
  p.global_address = reader->Address("global_address", &negative, &signed_address);
  for (int64_t i = 0; i < rank; ++i) p.dims[i] = reader->Int("dims");
  for (int64_t i = 0; i + 1 < rank; ++i) p.strides[i] = reader->Int("strides");
  for (int64_t i = 0; i < rank; ++i) p.box[i] = reader->Int("box");
  for (int64_t i = 0; i < rank; ++i) p.element_strides[i] = reader->Int("element_strides");
  p.interleave = reader->Int("interleave");
  p.swizzle = reader->Int("swizzle");
  p.l2_promotion = reader->Int("l2_promotion");
  p.oob_fill = reader->Int("oob_fill");
  CheckAddressNotNegative(signed_address, negative);
  return p;
}

// The compile-time layout: no address, and None for every integer only the launch knows.
TiledParams ParseTiledStatic(ArgReader* reader) {
  const int64_t rank = reader->PeekInt(1, "rank");
  CheckRank(rank);
  const int64_t expected = ExpectedArgCount(rank, /*with_map=*/false) - 1;
  if (reader->size() != expected) reader->ThrowArity(expected);

  TiledParams p;
  p.dtype = reader->Dtype("dtype");
  p.rank = reader->Int("rank");
  p.unknown.global_address = true;
  bool known = true;
  auto mark = [&known](uint32_t* mask, int64_t i) {
    if (!known) *mask |= 1u << i;
  };
  for (int64_t i = 0; i < rank; ++i) {
    p.dims[i] = reader->IntOrUnknown("dims", &known);
    mark(&p.unknown.dims, i);
  }
  for (int64_t i = 0; i + 1 < rank; ++i) {
    p.strides[i] = reader->IntOrUnknown("strides", &known);
    mark(&p.unknown.strides, i);
  }
  for (int64_t i = 0; i < rank; ++i) {
    p.box[i] = reader->IntOrUnknown("box", &known);
    mark(&p.unknown.box, i);
  }
  for (int64_t i = 0; i < rank; ++i) {
    p.element_strides[i] = reader->IntOrUnknown("element_strides", &known);
    mark(&p.unknown.element_strides, i);
  }
  p.interleave = reader->IntOrUnknown("interleave", &known);
  p.unknown.interleave = !known;
  p.swizzle = reader->IntOrUnknown("swizzle", &known);
  p.unknown.swizzle = !known;
  p.l2_promotion = reader->IntOrUnknown("l2_promotion", &known);
  p.unknown.l2_promotion = !known;
  p.oob_fill = reader->IntOrUnknown("oob_fill", &known);
  p.unknown.oob_fill = !known;
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
void CheckFootprint(const CudaDriver& driver, const TiledParams& p, const DtypeInfo& dtype) {
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

// Encodes into `staging`, a 128-byte-aligned local buffer, which the caller copies into the
// map. TVM's host stack slot for the map is only 64-byte aligned, which is all the driver
// documents, but the CUDA 13 header declares CUtensorMap alignas(128) and a driver may rely on
// that; staging keeps the driver on storage that matches its own declaration whatever `map` is.
void Encode(const CudaDriver& driver, const TiledParams& p, const DtypeInfo& dtype,
            cu::TensorMap* staging) {
  // Narrowing is safe: CheckStaticRules bounded every value to the driver's ranges.
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
  if (rc != cu::kSuccess) {
    TVM_FFI_THROW(RuntimeError) << "tvm_tma: rule 'driver': cuTensorMapEncodeTiled returned "
                                << DescribeCudaResult(driver, rc) << " for "
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
void EncodeTiledPacked(ffi::PackedArgs args, ffi::Any* rv) {
  ArgReader reader("tvm_tma.encode_tiled", args);
  bool map_negative = false;
  int64_t map_signed = 0;
  const uint64_t map = reader.Address("map", &map_negative, &map_signed);
  if (map_negative) {
    FailRule("map-null", "tensor map pointer " + std::to_string(map_signed) +
                             " is negative: not a host address");
  }
  const TiledParams p = ParseTiled(&reader, /*with_map=*/true);
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

// Static rules only: lets CI (and the compile-time planner's tests) exercise every rule on
// machines without a GPU.
void ValidateTiledPacked(ffi::PackedArgs args, ffi::Any* rv) {
  ArgReader reader("tvm_tma.validate_tiled", args);
  const TiledParams p = ParseTiled(&reader, /*with_map=*/false);
  CheckStaticRules(p);
  *rv = nullptr;
}

// The rules on what is known when a kernel is compiled: no address, and None for the values
// only the launch knows (their rules are skipped here and run by encode_tiled at launch).
void ValidateTiledStaticPacked(ffi::PackedArgs args, ffi::Any* rv) {
  ArgReader reader("tvm_tma.validate_tiled_static", args);
  const TiledParams p = ParseTiledStatic(&reader);
  CheckStaticRules(p);
  *rv = nullptr;
}

}  // namespace
}  // namespace tvm_tma

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = ::tvm::ffi::reflection;
  refl::GlobalDef()
      .def_packed("tvm_tma.encode_tiled", tvm_tma::EncodeTiledPacked)
      .def_packed("tvm_tma.validate_tiled", tvm_tma::ValidateTiledPacked)
      .def_packed("tvm_tma.validate_tiled_static", tvm_tma::ValidateTiledStaticPacked)
      .def("tvm_tma.encode_count",
           []() -> int64_t { return tvm_tma::g_encode_count.load(std::memory_order_relaxed); })
      .def("tvm_tma.driver_available", []() -> bool { return tvm_tma::GetCudaDriver().available; })
      .def("tvm_tma.driver_error",
           []() -> std::string { return tvm_tma::GetCudaDriver().unavailable_reason; });
}
