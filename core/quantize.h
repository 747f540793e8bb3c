// `specmoe quantize`: converts a GGUF model's weights to another type, as llama.cpp's
// llama-quantize does without an importance matrix (same tensors quantized, same type per
// tensor, same metadata and tensor order), so that a draft can be requantized to a lower-bit type
// with this project's own tools. For F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q6_K the
// quantizers are ggml's reference ones (kernels/cpu/quant.h quantize_row_ggml) and the output is
// llama-quantize's file byte for byte; Q2_K-Q5_K and the IQ4 types use specmoe's own, simpler
// scale search (quantize_row), so those files load and run but are not llama-quantize's bytes
// (nor its Q4_K_M-style mixes: a K-quant TYPE is applied with the legacy types' rules). MXFP4 is
// llama-quantize's MXFP4_MOE (experts in MXFP4, the rest Q8_0), with ggml's rounding: its bytes.

#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dtype.h"

namespace specmoe::core {

struct QuantizeOptions {
  DType type = DType::Q8_0;                   // the type of the quantized tensors (llama-quantize's TYPE)
  std::optional<DType> output_tensor_type;    // --output-tensor-type: output.weight (or a tied token_embd)
  std::optional<DType> token_embedding_type;  // --token-embedding-type: token_embd.weight
  bool allow_requantize = false;              // --allow-requantize: a quantized source may be converted
  bool pure = false;                          // --pure: no per-tensor rules (output in Q6_K, ...), TYPE throughout
  int threads = 0;                            // 0 = all cores
};

// What happened to one tensor, in the output file's order.
struct QuantizedTensor {
  std::string name;
  std::vector<int64_t> ne;
  DType from = DType::F32, to = DType::F32;
  bool converted = false;  // false: copied byte for byte (not quantizable, or already in its type)
  size_t bytes_in = 0, bytes_out = 0;
};

struct QuantizeSummary {
  std::vector<QuantizedTensor> tensors;
  size_t bytes_in = 0, bytes_out = 0;  // tensor data only
  int n_fallback = 0;                  // tensors whose rows did not fit their type's block (llama.cpp's fallback)
  uint32_t file_type = 0;              // general.file_type written (llama_ftype)
};

// The llama_ftype number general.file_type holds for a model mostly in `type` (llama.h:
// MOSTLY_Q4_0 = 2, ...; the K-quants as their _S mixes, MXFP4 as MOSTLY_MXFP4_MOE = 38);
// Error(InvalidArgument) for none.
uint32_t llama_file_type(DType type);
// A quantize TYPE as llama-quantize names it: a tensor type ("q4_0", any case) or MXFP4_MOE
// (= MXFP4); nullopt for anything else.
std::optional<DType> quantize_type_from_name(std::string_view name);

// Whether llama-quantize quantizes a tensor of this name and shape at all (the rest is copied:
// 1-D tensors, norms, MoE routers, position embeddings, ...).
bool tensor_is_quantizable(const std::string& name, const std::vector<int64_t>& ne);

// Reads `input`, converts every quantizable tensor and writes `output` atomically. `progress`,
// when set, is called once per tensor as it is done. Errors (Error, naming the file and the
// tensor): an unreadable or malformed input; a quantized source without allow_requantize; a row
// length that the type an option forces does not divide; NaN or infinite weights.
QuantizeSummary quantize_model(const std::string& input, const std::string& output, const QuantizeOptions& options,
                               const std::function<void(const QuantizedTensor&)>& progress = {});

class GGUFFile;
class GGUFWriter;
// The same conversion of a file already open into a writer (nothing is written): what
// quantize_model does between opening and writing, for callers that hold GGUF bytes in memory
// (the fuzz targets). Errors name in.path().
QuantizeSummary quantize_gguf(const GGUFFile& in, const QuantizeOptions& options, GGUFWriter& out,
                              const std::function<void(const QuantizedTensor&)>& progress = {});

}  // namespace specmoe::core
