// specmoe quantize (quantize.h). The rules are llama.cpp 2026-10's (src/llama-quant.cpp), read
// from its source and restated here for the types specmoe has:
//   - a tensor is quantized when it has 2+ dimensions (trailing sizes of 1 not counted), its name
//     ends in "weight", and it is not a norm, a MoE router, a position / token-type embedding or
//     one of the few other tensors llama.cpp leaves alone; everything else is copied as it is;
//   - a tensor already in its target type is copied, not requantized;
//   - per tensor: --token-embedding-type and --output-tensor-type decide those tensors outright;
//     otherwise (unless --pure) output.weight, or token_embd.weight when the output is tied to it,
//     becomes Q6_K (Q8_0 stays Q8_0; Q8_0 too where the row does not fit TYPE's block), and with
//     exactly 8 experts attn_k / attn_v / attn_qkv / attn_kv_b become Q8_0; a row length that the
//     chosen type's block does not divide falls back (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
//     Q2_K / Q3_K -> Q4_0, IQ4_XS -> IQ4_NL, then F16);
//   - MXFP4 is llama-quantize's MXFP4_MOE: the experts (tensors of 3 dimensions, n_expert > 1)
//     in MXFP4, every other quantized tensor in Q8_0, the output head included (unless
//     --output-tensor-type, --token-embedding-type or --pure say otherwise);
//   - metadata is copied in order without the split.* keys, then general.quantization_version (2)
//     and general.file_type are appended; tensor data is 32-byte aligned; tensors are written
//     non-layer ones first, then layer by layer, by name within each (llama.cpp's weights map
//     order).
#include "core/quantize.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string_view>

#include "base/error.h"
#include "core/gguf.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"

namespace specmoe::core {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

bool is_quantized(DType t) { return dtype_info(t).block_size > 1; }
int64_t block_of(DType t) { return dtype_info(t).block_size; }

bool is_token_embd(const std::string& name) {
  return name == "token_embd.weight" || name == "per_layer_token_embd.weight";
}

// The layer of "blk.N...." or -1: the first key of llama.cpp's tensor order.
int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int layer = 0;
  size_t i = 4;
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) layer = layer * 10 + (name[i] - '0');
  return layer;
}

DType fallback_type(DType t) {
  switch (t) {
    case DType::Q4_K: return DType::Q5_0;
    case DType::Q5_K: return DType::Q5_1;
    case DType::Q6_K: return DType::Q8_0;
    case DType::Q2_K:
    case DType::Q3_K: return DType::Q4_0;
    case DType::IQ4_XS: return DType::IQ4_NL;
    default: return t;
  }
}

struct Context {
  std::string path;
  std::string arch;
  int64_t n_expert = 0;
  bool tied_output = true;  // no output.weight: the token embedding is the output head
};

DType forced_type(const Context& c, const std::string& name, const std::vector<int64_t>& ne, DType t, const char* flag) {
  if (ne[0] % block_of(t) != 0)
    throw_error(ErrorKind::InvalidArgument, "{}: tensor '{}' has rows of {}, which {} {} does not divide into blocks of {}",
                c.path, name, ne[0], flag, dtype_name(t), block_of(t));
  return t;
}

DType choose_type(const Context& c, const QuantizeOptions& o, const std::string& name, const std::vector<int64_t>& ne,
                  int& n_fallback) {
  if (o.token_embedding_type && is_token_embd(name))
    return forced_type(c, name, ne, *o.token_embedding_type, "--token-embedding-type");
  if (o.output_tensor_type && name == "output.weight")
    return forced_type(c, name, ne, *o.output_tensor_type, "--output-tensor-type");
  DType t = o.type;
  if (!is_quantized(t)) return t;  // F32 / F16 / BF16: every quantizable tensor, no rules
  if (!o.pure) {
    const bool is_output = name == "output.weight" || (c.tied_output && is_token_embd(name));
    if (t == DType::MXFP4) {  // MXFP4_MOE
      if (is_output && o.output_tensor_type) t = *o.output_tensor_type;
      else t = !is_output && ne.size() >= 3 && ne[2] > 1 ? DType::MXFP4 : DType::Q8_0;
    } else if (is_output) {
      if (o.output_tensor_type) t = *o.output_tensor_type;
      else if (c.arch == "falcon" || ne[0] % block_of(t) != 0) t = DType::Q8_0;
      else if (t != DType::Q8_0) t = DType::Q6_K;
    } else if (c.n_expert == 8 && (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight") ||
                                   contains(name, "attn_kv_b.weight") || contains(name, "attn_k.weight"))) {
      t = DType::Q8_0;
    }
  }
  if (ne[0] % block_of(t) != 0) {
    ++n_fallback;
    t = fallback_type(t);
    if (ne[0] % block_of(t) != 0) t = DType::F16;
  }
  return t;
}

// quantize_gguf's work; the writer's own errors do not name the input, quantize_gguf adds it.
QuantizeSummary quantize_into(const GGUFFile& in, const QuantizeOptions& o, GGUFWriter& w,
                              const std::function<void(const QuantizedTensor&)>& progress) {
  const std::string& input = in.path();
  Context c;
  c.path = input;
  c.arch = in.get_string("general.architecture", "");
  c.n_expert = c.arch.empty() ? 0 : in.get_int(c.arch + ".expert_count", 0);
  c.tied_output = in.find_tensor("output.weight") == nullptr;
  kernels::cpu::ThreadPool pool(o.threads);

  QuantizeSummary summary;
  summary.file_type = llama_file_type(o.type);
  for (const auto& [key, value] : in.metadata()) {
    if (key == "split.no" || key == "split.count" || key == "split.tensors.count" ||
        key == "general.quantization_version" || key == "general.file_type")
      continue;
    w.set_value(key, value);
  }
  // Tensor data is 32-byte aligned, as llama-quantize writes it; a copied general.alignment key
  // says so (llama-quantize copies the input's value, which leaves a file whose key is not 32
  // misaligned; the input's alignment describes the input's layout only).
  if (in.has("general.alignment")) w.set_alignment(32);
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", summary.file_type);

  std::vector<const GGUFTensorInfo*> order;
  for (const GGUFTensorInfo& t : in.tensors()) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const GGUFTensorInfo* a, const GGUFTensorInfo* b) {
    const int la = layer_of(a->name), lb = layer_of(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });

  std::vector<uint8_t> out;
  for (const GGUFTensorInfo* t : order) {
    QuantizedTensor q;
    q.name = t->name;
    q.ne = t->ne;
    q.from = q.to = t->type;
    q.bytes_in = t->nbytes;
    // Integer tensors (EAGLE-3's d2t map) are indices, copied as they are.
    if (!dtype_is_integer(t->type) && tensor_is_quantizable(t->name, t->ne)) q.to = choose_type(c, o, t->name, t->ne, summary.n_fallback);
    if (q.to == q.from) {
      w.add_tensor(t->name, t->type, t->ne, std::span<const uint8_t>(t->data, t->nbytes));
      q.bytes_out = t->nbytes;
    } else {
      if (is_quantized(q.from) && !o.allow_requantize)
        throw_error(ErrorKind::InvalidArgument,
                    "{}: tensor '{}' is already quantized ({}); converting it to {} needs --allow-requantize", input,
                    t->name, dtype_name(q.from), dtype_name(q.to));
      const int64_t n = t->ne[0], rows = t->rows();
      const size_t row_in = dtype_row_bytes(q.from, n), row_out = dtype_row_bytes(q.to, n);
      out.assign(row_out * static_cast<size_t>(rows), 0);
      const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, n));
      // A tensor with no elements (a dimension of 0) has nothing to convert.
      if (n > 0 && rows > 0) pool.parallel_for(rows, chunk, [&](int64_t r0, int64_t r1) {
        std::vector<float> row(static_cast<size_t>(n));
        for (int64_t r = r0; r < r1; ++r) {
          kernels::cpu::dequantize_row(q.from, t->data + static_cast<size_t>(r) * row_in, row.data(), n);
          for (int64_t i = 0; i < n; ++i)
            if (!std::isfinite(row[static_cast<size_t>(i)]))
              throw_error(ErrorKind::Format, "{}: tensor '{}' has a NaN or infinite value in row {}", input, t->name, r);
          kernels::cpu::quantize_row_ggml(q.to, row.data(), out.data() + static_cast<size_t>(r) * row_out, n);
        }
      });
      w.add_tensor(t->name, q.to, t->ne, out);
      q.converted = true;
      q.bytes_out = out.size();
    }
    summary.bytes_in += q.bytes_in;
    summary.bytes_out += q.bytes_out;
    if (progress) progress(q);
    summary.tensors.push_back(std::move(q));
  }
  return summary;
}

}  // namespace

uint32_t llama_file_type(DType type) {
  switch (type) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q8_0: return 7;
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::Q2_K: return 10;
    case DType::Q3_K: return 11;  // MOSTLY_Q3_K_S
    case DType::Q4_K: return 14;  // MOSTLY_Q4_K_S
    case DType::Q5_K: return 16;  // MOSTLY_Q5_K_S
    case DType::Q6_K: return 18;
    case DType::IQ4_NL: return 25;
    case DType::IQ4_XS: return 30;
    case DType::BF16: return 32;
    case DType::MXFP4: return 38;  // MOSTLY_MXFP4_MOE
    case DType::IQ2_XXS: return 19;
    case DType::IQ2_XS: return 20;
    case DType::IQ3_XXS: return 23;
    case DType::IQ1_S: return 24;
    case DType::IQ3_S: return 26;
    case DType::IQ2_S: return 28;
    case DType::IQ1_M: return 31;
    case DType::TQ1_0: return 36;
    case DType::TQ2_0: return 37;
    case DType::I32:
    case DType::I64: break;  // no file type
  }
  throw_error(ErrorKind::InvalidArgument, "no llama.cpp file type for tensor type {}", static_cast<uint32_t>(type));
}

std::optional<DType> quantize_type_from_name(std::string_view name) {
  std::string upper(name);
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (upper == "MXFP4_MOE") return DType::MXFP4;
  return dtype_from_name(name);
}

bool tensor_is_quantizable(const std::string& name, const std::vector<int64_t>& ne) {
  size_t dims = ne.size();
  while (dims > 1 && ne[dims - 1] == 1) --dims;
  if (dims < 2 || !ends_with(name, "weight") || contains(name, "_norm.weight")) return false;
  static constexpr std::string_view kExcluded[] = {
      "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
      "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
      "time_mix_", "attn_rel_b.weight", ".position_embd", ".rel_pos", ".patch_embd", ".patch_merger"};
  for (std::string_view part : kExcluded)
    if (contains(name, part)) return false;
  return name != "position_embd.weight" && name != "token_types.weight";
}

QuantizeSummary quantize_model(const std::string& input, const std::string& output, const QuantizeOptions& o,
                               const std::function<void(const QuantizedTensor&)>& progress) {
  const std::shared_ptr<GGUFFile> in = GGUFFile::open(input);
  GGUFWriter w;
  QuantizeSummary summary = quantize_gguf(*in, o, w, progress);
  w.write(output);
  return summary;
}

QuantizeSummary quantize_gguf(const GGUFFile& file, const QuantizeOptions& o, GGUFWriter& w,
                              const std::function<void(const QuantizedTensor&)>& progress) {
  const std::string& input = file.path();
  try {
    return quantize_into(file, o, w, progress);
  } catch (const Error& e) {
    // The writer's own checks do not know the input's name.
    if (std::string_view(e.what()).find(input) != std::string_view::npos) throw;
    throw Error(e.kind(), input + ": " + e.what());
  }
}

}  // namespace specmoe::core
