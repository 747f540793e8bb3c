// Tensor binding per architecture (llama.cpp names, see llama-arch.cpp LLM_TENSOR_NAMES):
//   llama: token_embd, output_norm, output (absent = tied), blk.N.{attn_norm, attn_q, attn_k,
//          attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}
//   qwen2: llama + blk.N.attn_{q,k,v}.bias
//   gpt2:  token_embd, position_embd, output_norm{,.bias}, output (absent = tied),
//          blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up, ffn_down}{.weight,.bias}
#include "core/model_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "core/model_ffn.h"
#include "kernels/cpu/quant.h"

namespace specmoe::core {

namespace cpu = kernels::cpu;

namespace {
std::string shape_str(const std::vector<int64_t>& ne) {
  return fmt::format("[{}]", fmt::join(ne, ", "));
}
}  // namespace

const GGUFTensorInfo& TensorBinder::find(const std::string& name) const {
  const GGUFTensorInfo* t = file_.find_tensor(name);
  if (!t) throw_error(ErrorKind::Format, "{}: tensor '{}' is missing", file_.path(), name);
  return *t;
}

cpu::MatrixView TensorBinder::matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  const GGUFTensorInfo& t = find(name);
  if (t.ne.size() != 2 || t.ne[0] != n_in || t.ne[1] != n_out)
    throw_error(ErrorKind::Format, "{}: tensor '{}' has shape {}, expected [{}, {}]", file_.path(), name,
                shape_str(t.ne), n_in, n_out);
  if (n_in % dtype_info(t.type).block_size != 0)
    throw_error(ErrorKind::Format, "{}: tensor '{}' of type {} has rows of {} elements, not a multiple of {}",
                file_.path(), name, dtype_name(t.type), n_in, dtype_info(t.type).block_size);
  cpu::MatrixView v = cpu::MatrixView::make(t.type, t.data, n_in, n_out);
  if (v.bytes() != t.nbytes)
    throw_error(ErrorKind::Format, "{}: tensor '{}' holds {} bytes, expected {}", file_.path(), name, t.nbytes,
                v.bytes());
  return v;
}

std::vector<float> TensorBinder::vector(const std::string& name, int64_t n) const {
  const GGUFTensorInfo& t = find(name);
  if (t.ne.size() != 1 || t.ne[0] != n)
    throw_error(ErrorKind::Format, "{}: tensor '{}' has shape {}, expected [{}]", file_.path(), name,
                shape_str(t.ne), n);
  if (n % dtype_info(t.type).block_size != 0)
    throw_error(ErrorKind::Format, "{}: tensor '{}' of type {} has {} elements, not a multiple of {}", file_.path(),
                name, dtype_name(t.type), n, dtype_info(t.type).block_size);
  std::vector<float> out(static_cast<size_t>(n));
  cpu::dequantize_row(t.type, t.data, out.data(), n);
  return out;
}

ModelWeights bind_weights(const GGUFFile& file, const ModelConfig& c) {
  const TensorBinder b(file);
  const bool gpt2 = c.arch == Arch::Gpt2;
  const bool qwen2 = c.arch == Arch::Qwen2 || c.arch == Arch::Qwen2Moe;
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  ModelWeights w;
  w.token_embd = b.matrix("token_embd.weight", c.n_embd, c.n_vocab);
  if (gpt2) w.position_embd = b.matrix("position_embd.weight", c.n_embd, c.n_ctx_train);
  w.output_norm = b.vector("output_norm.weight", c.n_embd);
  if (gpt2) w.output_norm_b = b.vector("output_norm.bias", c.n_embd);
  w.output = b.has("output.weight") ? b.matrix("output.weight", c.n_embd, c.n_vocab) : w.token_embd;

  w.layers.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[l];
    const std::string p = fmt::format("blk.{}.", l);
    L.attn_norm = b.vector(p + "attn_norm.weight", c.n_embd);
    L.ffn_norm = b.vector(p + "ffn_norm.weight", c.n_embd);
    if (gpt2) {
      L.attn_norm_b = b.vector(p + "attn_norm.bias", c.n_embd);
      L.ffn_norm_b = b.vector(p + "ffn_norm.bias", c.n_embd);
      L.wqkv = b.matrix(p + "attn_qkv.weight", c.n_embd, q_dim + 2 * c.kv_dim());
      L.bqkv = b.vector(p + "attn_qkv.bias", q_dim + 2 * c.kv_dim());
      L.bo = b.vector(p + "attn_output.bias", c.n_embd);
    } else {
      L.wq = b.matrix(p + "attn_q.weight", c.n_embd, q_dim);
      L.wk = b.matrix(p + "attn_k.weight", c.n_embd, c.kv_dim());
      L.wv = b.matrix(p + "attn_v.weight", c.n_embd, c.kv_dim());
      if (qwen2) {
        L.bq = b.vector(p + "attn_q.bias", q_dim);
        L.bk = b.vector(p + "attn_k.bias", c.kv_dim());
        L.bv = b.vector(p + "attn_v.bias", c.kv_dim());
      }
    }
    L.wo = b.matrix(p + "attn_output.weight", q_dim, c.n_embd);
    L.ffn = make_feed_forward(b, c, l);
  }
  return w;
}

}  // namespace specmoe::core
