// Tensor element types as GGUF numbers them (ggml_type), their block layouts, and the
// scalar half-precision conversions. Shared by the CPU and CUDA kernels and by core.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace specmoe {

// Values are the ggml_type ids stored in GGUF tensor infos.
enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  // Formats specmoe reads and multiplies but does not write (kernels/cpu/quant_iq.cpp): llama-quantize
  // makes them, the 1- and 2-bit ones from an importance matrix. dtype_from_name leaves them out, so
  // no quantization target or cache type names them.
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ1_M = 29,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  BF16 = 30,
  // Integer tensors (an EAGLE-3 head's d2t): read as data, never as weights of a matmul, never a
  // quantization target (dtype_from_name and dtype_supported_names leave them out).
  I32 = 26,
  I64 = 27,
};

struct DTypeInfo {
  DType type;
  const char* name;     // "F32", "Q4_K", ... (llama.cpp's spelling)
  int64_t block_size;   // elements per block (1 for float types)
  size_t block_bytes;   // bytes per block
};

// Info for a known type id, or nullopt for an id specmoe does not support.
std::optional<DTypeInfo> dtype_info(uint32_t type_id);
inline bool dtype_is_integer(DType t) { return t == DType::I32 || t == DType::I64; }
const DTypeInfo& dtype_info(DType type);
const char* dtype_name(DType type);
std::optional<DType> dtype_from_name(std::string_view name);  // "f16", "Q8_0" (case-insensitive)
// The supported type names in id order, comma separated ("F32, F16, Q4_0, ..."), for messages.
const char* dtype_supported_names();
// The same with the formats specmoe reads but does not write (IQ1_S ... TQ2_0), for a loader's
// message about a tensor type it cannot read.
const char* dtype_readable_names();
// True for the formats specmoe reads but cannot produce.
bool dtype_is_read_only(DType t);

// Bytes of a row of n elements; n must be a multiple of the block size (checked, throws Error).
size_t dtype_row_bytes(DType type, int64_t n);

// IEEE half and bfloat16 <-> float, round-to-nearest-even, NaN/Inf preserved.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace specmoe
