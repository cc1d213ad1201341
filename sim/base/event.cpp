#include "sim/base/event.h"

#include <utility>

namespace fragsim {

namespace {
constexpr std::string_view kOpNames[] = {"alloc",        "free",        "mark",          "segment_alloc",
                                         "segment_free", "segment_map", "segment_unmap", "free_requested",
                                         "oom",          "empty_cache", "stack",         "reserved"};
constexpr std::string_view kDtypeNames[] = {"",       "f32",    "f16", "bf16", "f64", "s8",  "u8",
                                            "s16",    "u16",    "s32", "u32",  "s64", "u64", "pred",
                                            "f8e4m3", "f8e5m2", "s4",  "u4",   "c64", "c128"};
constexpr int kDtypeBits[] = {0, 32, 16, 16, 64, 8, 8, 16, 16, 32, 32, 64, 64, 8, 8, 8, 4, 4, 64, 128};
// NumPy / JAX names (jnp.dtype(x).name) for the same types, each type's NumPy name first.
constexpr std::pair<std::string_view, Dtype> kDtypeAliases[] = {{"float32", Dtype::kF32},
                                                                {"float16", Dtype::kF16},
                                                                {"bfloat16", Dtype::kBf16},
                                                                {"float64", Dtype::kF64},
                                                                {"int8", Dtype::kS8},
                                                                {"uint8", Dtype::kU8},
                                                                {"int16", Dtype::kS16},
                                                                {"uint16", Dtype::kU16},
                                                                {"int32", Dtype::kS32},
                                                                {"uint32", Dtype::kU32},
                                                                {"int64", Dtype::kS64},
                                                                {"uint64", Dtype::kU64},
                                                                {"bool", Dtype::kPred},
                                                                {"float8_e4m3fn", Dtype::kF8e4m3},
                                                                {"float8_e5m2", Dtype::kF8e5m2},
                                                                {"int4", Dtype::kS4},
                                                                {"uint4", Dtype::kU4},
                                                                {"complex64", Dtype::kC64},
                                                                {"complex128", Dtype::kC128},
                                                                {"f8e4m3fn", Dtype::kF8e4m3}};
}  // namespace

std::string_view op_name(Op op) { return kOpNames[static_cast<int>(op)]; }

bool parse_op(std::string_view s, Op* out) {
  int i = name_index(kOpNames, s);
  if (i >= 0) *out = static_cast<Op>(i);
  return i >= 0;
}

std::string_view dtype_name(Dtype d) { return kDtypeNames[static_cast<int>(d)]; }

bool parse_dtype(std::string_view s, Dtype* out) {
  int i = name_index(kDtypeNames, s, 1);
  if (i >= 0) {
    *out = static_cast<Dtype>(i);
    return true;
  }
  for (const auto& [name, d] : kDtypeAliases)
    if (s == name) {
      *out = d;
      return true;
    }
  return false;
}

std::string_view numpy_dtype_name(Dtype d) {
  for (const auto& [name, x] : kDtypeAliases)
    if (x == d) return name;
  return "";
}

int dtype_bits(Dtype d) { return kDtypeBits[static_cast<int>(d)]; }

bool unpadded_bytes(const std::vector<std::uint64_t>& shape, Dtype d, Bytes* out) {
  unsigned __int128 n = 1;
  for (auto dim : shape) {
    n *= dim;
    if (n > (static_cast<unsigned __int128>(1) << 70)) return false;
  }
  unsigned __int128 bits = n * static_cast<unsigned>(dtype_bits(d));
  unsigned __int128 bytes = (bits + 7) / 8;
  if (bytes > UINT64_MAX) return false;
  *out = static_cast<Bytes>(bytes);
  return true;
}

}  // namespace fragsim
