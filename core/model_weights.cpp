// Tensor binding per architecture (llama.cpp names, see llama-arch.cpp LLM_TENSOR_NAMES):
//   llama: token_embd, output_norm, output (absent = tied), blk.N.{attn_norm, attn_q, attn_k,
//          attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}
//          optional: blk.N.attn_{q,k,v,output}.bias, rope_freqs.weight {rope_dims/2} (llama3)
//   qwen2: llama + blk.N.attn_{q,k,v}.bias
//   qwen3: llama + blk.N.attn_{q,k}_norm {head_dim}; q is {n_embd, n_head * head_dim}
//   gemma3: qwen3 + blk.N.{post_attention_norm, post_ffw_norm} {n_embd}
//   gemma2: gemma3 without attn_{q,k}_norm; the head is always token_embd
//   qwen3moe: qwen3 with the MoE block; olmoe: llama with attn_q_norm {n_head * head_dim},
//          attn_k_norm {kv_dim} and the MoE block
//   phi3:  llama with ffn_up {n_embd, 2 n_ff} ([gate | up], no ffn_gate), optional
//          rope_factors_long / rope_factors_short {rope_dims/2}
//   every non-gpt2 architecture (llama.cpp create_tensor_qkv): blk.N.attn_qkv {n_embd, q + 2 kv}
//          (+ optional .bias) in place of attn_q/k/v when the file has it
//   deepseek2 (MLA): blk.N.attn_q {n_embd, n_head*hd} or attn_q_a {n_embd, q_lora},
//          attn_q_a_norm {q_lora}, attn_q_b {q_lora, n_head*hd}; attn_kv_a_mqa {n_embd,
//          kv_lora + rope}, attn_kv_a_norm {kv_lora}, attn_k_b {qk_nope, kv_lora, n_head},
//          attn_v_b {kv_lora, v_hd, n_head}, attn_output {n_head*v_hd, n_embd}; layers <
//          leading_dense_block_count: ffn_{gate,up,down} {n_ff}; the others: the MoE block with
//          ffn_{gate,up,down}_shexp {n_ff_exp * expert_shared_count} (ungated), exp_probs_b.bias
//   gemma: gemma2's tensors without post-norms; granite, granitemoe: llama (+ optional ffn_{gate,
//          up,down}.bias; granitemoe's shared expert ffn_{gate,up,down}_shexp, ungated); smollm3:
//          llama; olmo2: olmoe's attention without attn_norm / ffn_norm, gemma's post-norm names;
//          stablelm: llama with LayerNorm biases (attn_norm, ffn_norm, output_norm .bias);
//          starcoder2: stablelm + attn_output.bias and gpt2's ungated ffn_up / ffn_down with biases;
//          gptneox: gpt2's block (no learned positions); phi2: starcoder2's without ffn_norm (the
//          one attn_norm feeds both sublayers), attn_qkv or attn_q/k/v, output.bias {n_vocab};
//          ernie4_5 (dense), exaone: llama's tensors (ernie4_5's graph ignores an attn_output.bias,
//          so specmoe does not bind it; exaone reads rope_freqs.weight as llama); mistral3: llama
//          with granite's optional biases
//   qwen3vlmoe: qwen3moe's tensors; deepseek: llama's attention with deepseek2's leading dense
//          layers and ungated shared experts; dots1: qwen3's attention with them, exp_probs_b.bias
//          optional; glm4moe: llama's attention with optional q/k/v biases and attn_{q,k}_norm
//          {head_dim}, the FFN's pre-norm named post_attention_norm, deepseek's FFN with
//          exp_probs_b.bias required and shared experts where expert_shared_count > 0;
//          ernie4_5-moe: ernie4_5's attention, dense layers below leading_dense_block_count and
//          between the MoE ones (interleave_moe_layer_step), an optional ungated shared expert and
//          exp_probs_b.bias; bailingmoe2: attn_qkv with attn_{q,k}_norm {head_dim}, deepseek's FFN
//          with optional exp_probs_b.bias; hunyuan-moe: hunyuan-dense's attention, experts of
//          feed_forward_length and an ungated shared expert in every layer
//   minimax-m2: olmoe's RMSNorm of the whole q and k projections, partial RoPE, the MoE block of
//          feed_forward_length with exp_probs_b.bias required
//   arcee: llama's attention with an ungated squared-ReLU MLP (ffn_up, ffn_down); nemotron: the same
//          MLP (optional ffn_up / ffn_down biases) under LayerNorms with biases, optional q/k/v/o
//          biases
//   gpt-oss: attention with q/k/v and output biases and attn_sinks {n_head}, heads of key_length;
//          post_attention_norm as the FFN's pre-norm; the MoE block with ffn_gate_inp.bias {E},
//          ffn_{gate,up}_exps.bias {n_ff_exp, E}, ffn_down_exps.bias {n_embd, E}
//   gpt2, starcoder:  token_embd, position_embd, output_norm{,.bias}, output (absent = tied),
//          blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up, ffn_down}{.weight,.bias}
//   bloom: gpt2's tensors without position_embd, with token_embd_norm{,.bias}; mpt: gpt2's with
//          every bias optional and position_embd optional; jais: gpt2's attention with a gated
//          SiLU FFN (ffn_gate, ffn_up, ffn_down, each with a bias), output required; refact:
//          llama's tensors; baichuan: llama's tensors, output required
//   falcon: attn_norm{,.bias} (both sublayers' norm; Falcon-40B: attn_norm_2{,.bias} the
//          attention's), attn_qkv, attn_output, ffn_up, ffn_down without biases, output_norm{,.bias},
//          output (absent = tied); olmo: llama's tensors without any norm (its LayerNorms have no
//          parameters: bound as weights of 1, which multiply exactly), output absent = tied
//   dbrx: attn_norm, attn_qkv, attn_output, attn_output_norm (the FFN's pre-norm), LayerNorms
//          without biases, Mixtral's experts, output required; phimoe: llama's attention with
//          attn_output.bias, RMSNorms with biases (attn_norm, ffn_norm, output_norm .bias), Mixtral's
//          experts, output.weight and output.bias, optional LongRoPE factors
//   qwen (1): attn_qkv{,.bias}, ffn_{gate,up,down} of half of feed_forward_length, output required;
//          xverse: llama's tensors, output required; orion: llama's with LayerNorm biases
//          (attn_norm, ffn_norm, output_norm .bias), output required; codeshell: LayerNorm biases,
//          llama's attention with attn_output.bias, gpt2's ungated MLP with biases, output required
//          (token_embd absent: the embedding is output.weight); plamo: llama's tensors without
//          ffn_norm (attn_norm feeds both sublayers of a parallel residual), output required;
//          chatglm: llama's attention, ffn_up holding [gate | up] as phi3's, output absent = tied
//   exaone-moe: qwen3's attention (attn_{q,k}_norm {head_dim}), optional rope_freqs.weight, dense
//          layers below leading_dense_block_count, then the MoE block with one ungated shared expert
//          and an optional exp_probs_b.bias; output required
//   MoE (llama.cpp llama-model.cpp shapes; GGUF ne order):
//     llama (Mixtral)  blk.N.ffn_gate_inp.weight   {n_embd, n_expert}
//                      blk.N.ffn_gate_exps.weight  {n_embd, n_ff_exp, n_expert}   ffn_up_exps the same
//                      blk.N.ffn_down_exps.weight  {n_ff_exp, n_embd, n_expert}
//     qwen2moe         the above, plus the shared expert
//                      blk.N.ffn_gate_shexp.weight {n_embd, n_ff_shexp}           ffn_up_shexp the same
//                      blk.N.ffn_down_shexp.weight {n_ff_shexp, n_embd}
//                      blk.N.ffn_gate_inp_shexp.weight {n_embd}   (sigmoid gate of the shared expert)
//     deepseek2        the shared experts without ffn_gate_inp_shexp (weight 1)
//     sigmoid gating   blk.N.exp_probs_b.bias {n_expert} when present (selection bias, DeepSeek-V3;
//                      deepseek2 binds it for either gating, as llama.cpp does)
#include "core/model_weights.h"

#include <cstring>

#include <cmath>
#include <functional>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "kernels/cpu/quant.h"
#include "kernels/op_params.h"

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

MatrixView TensorBinder::matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  const GGUFTensorInfo& t = find(name);
  reject_integers(t);
  if (t.ne.size() != 2 || t.ne[0] != n_in || t.ne[1] != n_out)
    throw_error(ErrorKind::Format, "{}: tensor '{}' has shape {}, expected [{}, {}]", file_.path(), name,
                shape_str(t.ne), n_in, n_out);
  if (n_in % dtype_info(t.type).block_size != 0)
    throw_error(ErrorKind::Format, "{}: tensor '{}' of type {} has rows of {} elements, not a multiple of {}",
                file_.path(), name, dtype_name(t.type), n_in, dtype_info(t.type).block_size);
  MatrixView v = MatrixView::make(t.type, t.data, n_in, n_out);
  if (v.bytes() != t.nbytes)
    throw_error(ErrorKind::Format, "{}: tensor '{}' holds {} bytes, expected {}", file_.path(), name, t.nbytes,
                v.bytes());
  return v;
}

MatrixView TensorBinder::stacked(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert) const {
  const GGUFTensorInfo& t = find(name);
  reject_integers(t);
  if (t.ne.size() != 3 || t.ne[0] != n_in || t.ne[1] != n_out || t.ne[2] != n_expert)
    throw_error(ErrorKind::Format, "{}: tensor '{}' has shape {}, expected [{}, {}, {}]", file_.path(), name,
                shape_str(t.ne), n_in, n_out, n_expert);
  if (n_in % dtype_info(t.type).block_size != 0)
    throw_error(ErrorKind::Format, "{}: tensor '{}' of type {} has rows of {} elements, not a multiple of {}",
                file_.path(), name, dtype_name(t.type), n_in, dtype_info(t.type).block_size);
  MatrixView v = MatrixView::make(t.type, t.data, n_in, n_out * n_expert);
  if (v.bytes() != t.nbytes)
    throw_error(ErrorKind::Format, "{}: tensor '{}' holds {} bytes, expected {}", file_.path(), name, t.nbytes,
                v.bytes());
  return v;
}

void TensorBinder::reject_integers(const GGUFTensorInfo& t) const {
  if (dtype_is_integer(t.type))
    throw_error(ErrorKind::Format, "{}: tensor '{}' holds integers ({}), not weights", file_.path(), t.name,
                dtype_name(t.type));
}

std::vector<int64_t> TensorBinder::ids(const std::string& name, int64_t n) const {
  const GGUFTensorInfo& t = find(name);
  if (t.ne.size() != 1 || t.ne[0] != n)
    throw_error(ErrorKind::Format, "{}: tensor '{}' has shape {}, expected [{}]", file_.path(), name, shape_str(t.ne), n);
  if (!dtype_is_integer(t.type))
    throw_error(ErrorKind::Format, "{}: tensor '{}' is {}, expected integers (I32 or I64)", file_.path(), name,
                dtype_name(t.type));
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (t.type == DType::I64) {
      int64_t v;
      std::memcpy(&v, t.data + i * 8, 8);
      out[i] = v;
    } else {
      int32_t v;
      std::memcpy(&v, t.data + i * 4, 4);
      out[i] = v;
    }
  }
  return out;
}

std::vector<float> TensorBinder::values(const std::string& name, const std::vector<int64_t>& ne) const {
  const GGUFTensorInfo& t = find(name);
  reject_integers(t);
  // Trailing dimensions of 1 are no dimensions to ggml (a {512, 1} tensor is written back as {512}
  // by llama-quantize): compare without them.
  auto trimmed = [](std::vector<int64_t> v) {
    while (v.size() > 1 && v.back() == 1) v.pop_back();
    return v;
  };
  if (trimmed(t.ne) != trimmed(ne))
    throw_error(ErrorKind::Format, "{}: tensor '{}' has shape {}, expected {}", file_.path(), name,
                shape_str(t.ne), shape_str(ne));
  int64_t n = 1;
  for (int64_t v : ne) n *= v;
  if (n % dtype_info(t.type).block_size != 0)
    throw_error(ErrorKind::Format, "{}: tensor '{}' of type {} has {} elements, not a multiple of {}", file_.path(),
                name, dtype_name(t.type), n, dtype_info(t.type).block_size);
  std::vector<float> out(static_cast<size_t>(n));
  cpu::dequantize_row(t.type, t.data, out.data(), n);
  return out;
}

moe::RouterSpec config_router_spec(const ModelConfig& c, std::vector<float> bias) {
  moe::RouterSpec s;
  s.n_expert = c.n_expert;
  s.k = c.n_expert_used;
  const bool softmax = c.expert_gating == ExpertGating::Softmax;
  if (!softmax || c.n_expert_group > 1 || c.expert_weights_scale != 1.0f || !bias.empty()) {
    // Sigmoid (DeepSeek-V3), or softmax with groups, a selection bias or a weight scale
    // (DeepSeek-V2): llama.cpp's build_moe_ffn with its expert groups and w_scale.
    s.kind = softmax ? moe::RouterKind::SoftmaxGroup : moe::RouterKind::SigmoidGroup;
    s.group.n_group = c.n_expert_group;
    s.group.topk_group = c.n_expert_group_used;
    s.group.normalize = c.expert_weights_norm;
    s.group.scale = c.expert_weights_scale;
    s.group.bias = std::move(bias);
  } else {
    // Softmax over the logits, top-k; Mixtral and Qwen3-MoE renormalise the k weights, Qwen-MoE
    // and OLMoE do not.
    s.kind = c.expert_weights_norm ? moe::RouterKind::SoftmaxTopK : moe::RouterKind::SoftmaxTopKRaw;
  }
  return s;
}

namespace {

// The MoE block of layer l (tensors above); throws Error(Format) naming the file and tensor.
MoEBlock bind_moe(const TensorBinder& b, const ModelConfig& c, int l, std::vector<std::vector<float>>& floats) {
  const std::string p = fmt::format("blk.{}.", l);
  const int64_t d = c.n_embd, E = c.n_expert, ff = c.n_ff_expert;
  if (!b.has(p + "ffn_gate_exps.weight") && b.has(p + "ffn_gate.0.weight"))
    throw_error(ErrorKind::Unsupported,
                "{}: tensor '{}ffn_gate.0.weight': one tensor per expert is the old Mixtral GGUF layout; "
                "specmoe reads the merged '{}ffn_gate_exps.weight' (re-convert with a current llama.cpp)",
                b.file().path(), p, p);
  if (b.has(p + "ffn_gate_up_exps.weight"))
    throw_error(ErrorKind::Unsupported,
                "{}: tensor '{}ffn_gate_up_exps.weight': merged gate/up experts are not supported; specmoe reads "
                "'{}ffn_gate_exps.weight' and '{}ffn_up_exps.weight'",
                b.file().path(), p, p, p);
  MoEBlock m;
  moe::MoEWeights& w = m.weights;
  // nemotron_h_moe: ungated squared-ReLU experts and shared expert (no ffn_gate_exps / _shexp).
  const bool relu_sqr = c.arch == Arch::NemotronH;
  if (relu_sqr) w.act = w.shared_act = moe::MoEActivation::ReluSqr;
  w.gate_inp = b.matrix(p + "ffn_gate_inp.weight", d, E);
  if (!relu_sqr) w.gate_exps = b.stacked(p + "ffn_gate_exps.weight", d, ff, E);
  w.up_exps = b.stacked(p + "ffn_up_exps.weight", d, ff, E);
  w.down_exps = b.stacked(p + "ffn_down_exps.weight", ff, d, E);
  const bool gated_shared = c.arch == Arch::Qwen2Moe || c.arch == Arch::Qwen35Moe || c.arch == Arch::Qwen3Next;  // sigmoid(w . x) times it
  if (!gated_shared && c.n_ff_shared_expert > 0) {
    // The ungated shared experts (weight 1): deepseek's, deepseek2's, dots1's, glm4moe's and
    // bailingmoe2's expert_shared_count experts as one SwiGLU, Granite MoE Shared's and
    // ernie4_5-moe's one.
    const int64_t sh = c.n_ff_shared_expert;
    if (!relu_sqr) w.gate_shexp = b.matrix(p + "ffn_gate_shexp.weight", d, sh);
    w.up_shexp = b.matrix(p + "ffn_up_shexp.weight", d, sh);
    w.down_shexp = b.matrix(p + "ffn_down_shexp.weight", sh, d);
  }
  if (gated_shared) {
    const int64_t sh = c.n_ff_shared_expert;
    w.gate_shexp = b.matrix(p + "ffn_gate_shexp.weight", d, sh);
    w.up_shexp = b.matrix(p + "ffn_up_shexp.weight", d, sh);
    w.down_shexp = b.matrix(p + "ffn_down_shexp.weight", sh, d);
    // A 1-D tensor of n_embd elements: one row of a (n_embd -> 1) matrix.
    const GGUFTensorInfo* g = b.file().find_tensor(p + "ffn_gate_inp_shexp.weight");
    if (!g) throw_error(ErrorKind::Format, "{}: tensor '{}ffn_gate_inp_shexp.weight' is missing", b.file().path(), p);
    if (g->ne != std::vector<int64_t>{d})
      throw_error(ErrorKind::Format, "{}: tensor '{}ffn_gate_inp_shexp.weight' has shape {}, expected [{}]",
                  b.file().path(), p, shape_str(g->ne), d);
    w.gate_inp_shexp = MatrixView::make(g->type, g->data, d, 1);
    if (w.gate_inp_shexp.bytes() != g->nbytes)
      throw_error(ErrorKind::Format, "{}: tensor '{}ffn_gate_inp_shexp.weight' holds {} bytes, expected {}",
                  b.file().path(), p, g->nbytes, w.gate_inp_shexp.bytes());
  }
  // The selection bias where llama.cpp binds it: required for glm4moe; optional for deepseek2,
  // dots1, ernie4_5-moe and bailingmoe2 (any gating) and for the others' sigmoid gating.
  std::vector<float> bias;
  const bool binds_bias = c.arch == Arch::Deepseek2 || c.arch == Arch::Dots1 || c.arch == Arch::Ernie45Moe ||
                          c.arch == Arch::BailingMoe2 || c.arch == Arch::Glm4Moe || c.arch == Arch::ExaoneMoe;
  const bool no_bias = c.arch == Arch::Llama4 || c.arch == Arch::Deepseek || c.arch == Arch::Qwen3VlMoe || c.arch == Arch::HunyuanMoe ||
                       c.arch == Arch::GptOss || c.arch == Arch::SmallThinker || c.arch == Arch::Qwen35Moe ||
                       c.arch == Arch::Qwen3Next;
  if (c.arch == Arch::SmallThinker) w.act = moe::MoEActivation::ReGLU;  // relu(gate x) * up x
  w.weight_inputs = c.arch == Arch::Llama4;  // the routing weight scales the expert's input
  // maple: this layer's SwiGLU clamp (0: plain SwiGLU, as llama.cpp below its epsilon of 1e-6).
  if (static_cast<size_t>(l) < c.swiglu_clamp.size() && c.swiglu_clamp[l] > 1e-6f) w.swiglu_limit = c.swiglu_clamp[l];
  if (c.arch == Arch::GptOss) {
    // gpt-oss: biases of the router logits and of every expert's gate, up and down rows (2-D
    // tensors {rows, n_expert}: expert e's biases are row e), and the clamped SwiGLU.
    auto floats_of = [&](const std::string& name, const std::vector<int64_t>& ne) -> const float* {
      floats.push_back(b.values(name, ne));
      return floats.back().data();
    };
    w.gate_inp_b = floats_of(p + "ffn_gate_inp.bias", {E});
    w.gate_exps_b = floats_of(p + "ffn_gate_exps.bias", {ff, E});
    w.up_exps_b = floats_of(p + "ffn_up_exps.bias", {ff, E});
    w.down_exps_b = floats_of(p + "ffn_down_exps.bias", {d, E});
    w.act = moe::MoEActivation::SwiGLUOai;
  }
  // lfm2moe, nemotron_h_moe and afmoe: required, as for glm4moe and minimax-m2.
  if (c.arch == Arch::Glm4Moe || c.arch == Arch::MinimaxM2 || c.arch == Arch::Lfm2Moe || relu_sqr || c.arch == Arch::Afmoe || (b.has(p + "exp_probs_b.bias") &&
                                  (binds_bias || (!no_bias && c.expert_gating == ExpertGating::Sigmoid))))
    bias = b.vector(p + "exp_probs_b.bias", E);
  if (!bias.empty()) {
    floats.push_back(bias);
    m.bias = {floats.back().data(), E};
  }
  m.router = config_router_spec(c, std::move(bias));
  try {
    // The layer's own consistency checks (shapes against each other and the router), once at load.
    (void)moe::MoELayer(w, moe::make_router(m.router));
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: layer {}: {}", b.file().path(), l, e.what()));
  }
  return m;
}

}  // namespace

namespace {

// Per-pair RoPE frequency divisors: positive and finite, or the file is refused.
void check_factors(const GGUFFile& file, const char* name, const VectorView& v) {
  for (int64_t i = 0; i < v.n; ++i)
    if (!(v.data[i] > 0.0f) || !std::isfinite(v.data[i]))
      throw_error(ErrorKind::Format, "{}: {}[{}] is {}; frequency factors must be positive", file.path(), name, i,
                  v.data[i]);
}

// Multi-head latent attention of layer prefix p (deepseek2).
void bind_mla(const TensorBinder& b, const ModelConfig& c, const std::string& p, LayerWeights& L,
              const std::function<VectorView(const std::string&, int64_t)>& vec) {
  const int64_t d = c.n_embd, H = c.n_head, qk = c.head_dim, nope = c.mla_qk_nope(), rank = c.kv_lora_rank;
  if (b.has(p + "attn_kv_b.weight"))
    throw_error(ErrorKind::Unsupported, "{}: tensor '{}attn_kv_b.weight' is the layout before MLA; specmoe reads "
                "attn_k_b and attn_v_b (re-convert with a current llama.cpp)", b.file().path(), p);
  if (c.q_lora_rank > 0) {
    L.wq_a = b.matrix(p + "attn_q_a.weight", d, c.q_lora_rank);
    L.attn_q_a_norm = vec(p + "attn_q_a_norm.weight", c.q_lora_rank);
    L.wq_b = b.matrix(p + "attn_q_b.weight", c.q_lora_rank, H * qk);
  } else {
    L.wq = b.matrix(p + "attn_q.weight", d, H * qk);
  }
  L.wkv_a_mqa = b.matrix(p + "attn_kv_a_mqa.weight", d, rank + c.rope_dims);
  L.attn_kv_a_norm = vec(p + "attn_kv_a_norm.weight", rank);
  L.wk_b = b.stacked(p + "attn_k_b.weight", nope, rank, H);
  L.wv_b = b.stacked(p + "attn_v_b.weight", rank, c.mla_v_head_dim, H);
  L.wo = b.matrix(p + "attn_output.weight", H * c.mla_v_head_dim, d);
}

}  // namespace

namespace {

// d2t, the target id of each draft id, for a head with a draft vocabulary of its own (checked: in
// the vocabulary and distinct).
void bind_d2t(const GGUFFile& file, const TensorBinder& b, const ModelConfig& c, Eagle3Weights& e) {
  if (b.has("d2t")) {
    const std::vector<int64_t> ids = b.ids("d2t", c.n_draft_vocab);
    auto host = std::make_shared<std::vector<int32_t>>(ids.size());
    std::vector<uint8_t> seen(static_cast<size_t>(c.n_vocab), 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= c.n_vocab)
        throw_error(ErrorKind::Format, "{}: tensor 'd2t' maps draft id {} to {}, outside the vocabulary [0, {})",
                    file.path(), i, ids[i], c.n_vocab);
      if (seen[static_cast<size_t>(ids[i])]++)
        throw_error(ErrorKind::Format, "{}: tensor 'd2t' maps two draft ids to target id {}", file.path(), ids[i]);
      (*host)[i] = static_cast<int32_t>(ids[i]);
    }
    e.d2t_host = host;
    e.d2t = {reinterpret_cast<const float*>(host->data()), static_cast<int64_t>(host->size())};
  } else if (c.n_draft_vocab != c.n_vocab) {
    throw_error(ErrorKind::Format, "{}: a {} head of {} draft ids without d2t", file.path(), c.arch_name, c.n_draft_vocab);
  }
}

// What EAGLE-3 heads and DFlash drafts bind alike: the host floats of their 1-D tensors (vec), fc
// (the target's features -> n_embd), then (head()) d2t, output_norm, and their own head (over the
// draft vocabulary) and embedding where the file has them, else the target's (Model::bind_target).
struct DraftHeadBinder {
  const GGUFFile& file;
  const ModelConfig& c;
  const TensorBinder b;
  ModelWeights w;
  DraftHeadBinder(const GGUFFile& f, const ModelConfig& config) : file(f), c(config), b(f) {
    w.host_floats = std::make_shared<std::vector<std::vector<float>>>();
    w.eagle3.fc = b.matrix("fc.weight", c.head_feature_width(), c.n_embd);
  }
  VectorView vec(const std::string& name, int64_t n) {
    w.host_floats->push_back(b.vector(name, n));
    return {w.host_floats->back().data(), n};
  }
  void head() {
    const int64_t d = c.n_embd;
    bind_d2t(file, b, c, w.eagle3);
    w.output_norm = vec("output_norm.weight", d);
    if (b.has("output.weight")) w.output = b.matrix("output.weight", d, c.n_draft_vocab);
    else if (c.n_draft_vocab != c.n_vocab)
      throw_error(ErrorKind::Format, "{}: a {} head with its own draft vocabulary (d2t) needs output.weight", file.path(),
                  c.arch_name);
    if (b.has("token_embd.weight")) w.token_embd = b.matrix("token_embd.weight", d, c.n_vocab);
  }
};

// An EAGLE-3 head (llama.cpp src/models/eagle3.cpp load_arch_tensors): fc, the optional
// enc.output_norm (norm_before_fc), output_norm, its own output (over its draft vocabulary) and
// token_embd when the file has them, d2t when it has its own draft vocabulary, and one layer whose
// q/k/v read 2 n_embd inputs, with attn_norm_2 (EAGLE-3's hidden_norm) beside attn_norm.
ModelWeights bind_eagle3(const GGUFFile& file, const ModelConfig& c) {
  DraftHeadBinder h(file, c);
  const TensorBinder& b = h.b;
  ModelWeights& w = h.w;
  auto vec = [&](const std::string& name, int64_t n) { return h.vec(name, n); };
  const int64_t d = c.n_embd, d2 = 2 * d, q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  Eagle3Weights& e = w.eagle3;
  if (c.eagle3_norm_before_fc) e.enc_norm = vec("enc.output_norm.weight", c.head_feature_width());
  h.head();
  if (b.has("rope_freqs.weight")) {
    w.rope_freqs = vec("rope_freqs.weight", c.rope_dims / 2);
    check_factors(file, "rope_freqs.weight", w.rope_freqs);
  } else if (c.rope_freq_factors) {
    w.host_floats->push_back(c.llama3_rope_factors());
    w.rope_freqs = {w.host_floats->back().data(), c.rope_dims / 2};
  }
  w.layers.resize(1);
  LayerWeights& L = w.layers[0];
  L.attn_norm = vec("blk.0.attn_norm.weight", d);
  e.hidden_norm = vec("blk.0.attn_norm_2.weight", d);
  L.wq = b.matrix("blk.0.attn_q.weight", d2, q_dim);
  L.wk = b.matrix("blk.0.attn_k.weight", d2, c.kv_dim());
  L.wv = b.matrix("blk.0.attn_v.weight", d2, c.kv_dim());
  L.wo = b.matrix("blk.0.attn_output.weight", q_dim, d);
  L.ffn_norm = vec("blk.0.ffn_norm.weight", d);
  L.ffn_gate = b.matrix("blk.0.ffn_gate.weight", d, c.n_ff);
  L.ffn_up = b.matrix("blk.0.ffn_up.weight", d, c.n_ff);
  L.ffn_down = b.matrix("blk.0.ffn_down.weight", c.n_ff, d);
  return std::move(w);
}

// A DFlash draft (llama.cpp src/models/dflash.cpp load_arch_tensors): fc (target_layers x n_embd ->
// n_embd) and enc.output_norm (its hidden_norm, after fc: kept as Eagle3Weights::hidden_norm),
// output_norm, its own output and token_embd when the file has them, d2t when it drafts its own
// vocabulary, and n_layer Qwen3 layers (per-head q and k norms, no biases).
ModelWeights bind_dflash(const GGUFFile& file, const ModelConfig& c) {
  DraftHeadBinder h(file, c);
  const TensorBinder& b = h.b;
  ModelWeights& w = h.w;
  auto vec = [&](const std::string& name, int64_t n) { return h.vec(name, n); };
  const int64_t d = c.n_embd, q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  w.eagle3.hidden_norm = vec("enc.output_norm.weight", d);
  h.head();
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = fmt::format("blk.{}.", l);
    L.attn_norm = vec(p + "attn_norm.weight", d);
    L.wq = b.matrix(p + "attn_q.weight", d, q_dim);
    L.wk = b.matrix(p + "attn_k.weight", d, c.kv_dim());
    L.wv = b.matrix(p + "attn_v.weight", d, c.kv_dim());
    L.wo = b.matrix(p + "attn_output.weight", q_dim, d);
    L.attn_q_norm = vec(p + "attn_q_norm.weight", c.head_dim);
    L.attn_k_norm = vec(p + "attn_k_norm.weight", c.head_dim);
    L.ffn_norm = vec(p + "ffn_norm.weight", d);
    L.ffn_gate = b.matrix(p + "ffn_gate.weight", d, c.n_ff);
    L.ffn_up = b.matrix(p + "ffn_up.weight", d, c.n_ff);
    L.ffn_down = b.matrix(p + "ffn_down.weight", c.n_ff, d);
  }
  return std::move(w);
}

}  // namespace

ModelWeights bind_weights(const GGUFFile& file, const ModelConfig& c) {
  const TensorBinder b(file);
  // llama.cpp multiplies the products of a weight X.weight by X.scale (one value, or one per expert)
  // wherever a file has one, for every architecture (its loader's generic pass: NVFP4 conversions'
  // second-level scales, talkie's gains). specmoe does not apply them, so such a file is refused
  // rather than computed without them.
  for (const GGUFTensorInfo& t : file.tensors()) {
    constexpr std::string_view kScale = ".scale";
    const std::string& n = t.name;
    if (n.size() > kScale.size() && n.compare(n.size() - kScale.size(), kScale.size(), kScale) == 0 &&
        file.find_tensor(n.substr(0, n.size() - kScale.size()) + ".weight") != nullptr)
      throw_error(ErrorKind::Unsupported,
                  "{}: tensor '{}': per-tensor weight scales (llama.cpp multiplies {}.weight's products by it) are not "
                  "supported",
                  file.path(), n, n.substr(0, n.size() - kScale.size()));
  }
  if (c.is_eagle3()) return bind_eagle3(file, c);
  if (c.is_dflash()) return bind_dflash(file, c);
  const bool gpt2 = c.learned_positions();  // gpt2, starcoder
  // gpt2's block layout (fused attn_qkv, biases everywhere, an ungated MLP), also gptneox's and
  // starcoder's (with its KV heads: attn_qkv {n_embd, n_embd + 2 kv_dim}).
  const bool gpt2_block = gpt2 || c.arch == Arch::GptNeox || c.arch == Arch::Bloom || c.arch == Arch::Mpt ||
                          c.arch == Arch::Jais;
  const bool mpt = c.arch == Arch::Mpt;  // gpt2's block with its biases optional
  const bool qwen2 = c.arch == Arch::Qwen2 || c.arch == Arch::Qwen2Moe;
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  // qwen35's attention layers: attn_q gives each head's query and its output gate.
  const int64_t q_out = c.attn_output_gate ? 2 * q_dim : q_dim;
  const int64_t qkv_dim = q_out + 2 * c.kv_dim();
  ModelWeights w;
  w.host_floats = std::make_shared<std::vector<std::vector<float>>>();
  auto& floats = *w.host_floats;
  std::function<VectorView(const std::string&, int64_t)> vec = [&](const std::string& name, int64_t n) -> VectorView {
    floats.push_back(b.vector(name, n));
    return {floats.back().data(), n};
  };
  auto opt_vec = [&](const std::string& name, int64_t n) { return b.has(name) ? vec(name, n) : VectorView{}; };
  // codeshell: without token_embd the embedding rows are the head's (llama.cpp duplicates output.weight).
  w.token_embd = c.arch == Arch::Codeshell && !b.has("token_embd.weight") ? b.matrix("output.weight", c.n_embd, c.n_vocab)
                                                                          : b.matrix("token_embd.weight", c.n_embd, c.n_vocab);
  if (gpt2) w.position_embd = b.matrix("position_embd.weight", c.n_embd, c.n_ctx_train);
  if (c.embd_norm) {  // bloom
    w.token_embd_norm = vec("token_embd_norm.weight", c.n_embd);
    w.token_embd_norm_b = vec("token_embd_norm.bias", c.n_embd);
  }
  // olmo's LayerNorms have neither weight nor bias: a weight of 1 is the same float math.
  const bool olmo = c.arch == Arch::Olmo, falcon = c.arch == Arch::Falcon, dbrx = c.arch == Arch::Dbrx;
  const bool phimoe = c.arch == Arch::PhiMoe, plamo = c.arch == Arch::Plamo;
  VectorView ones;
  if (olmo) {
    floats.emplace_back(static_cast<size_t>(c.n_embd), 1.0f);
    ones = {floats.back().data(), c.n_embd};
  }
  // lfm2's final norm is named token_embd_norm (llama.cpp's LLM_TENSOR_OUTPUT_NORM_LFM2).
  w.output_norm = olmo ? ones : vec(c.arch == Arch::Lfm2 || c.arch == Arch::Lfm2Moe ? "token_embd_norm.weight" : "output_norm.weight", c.n_embd);
  // command-r's and cohere2's LayerNorms have no biases.
  const bool cohere = c.arch == Arch::CommandR || c.arch == Arch::Cohere2;
  if ((c.layer_norm && !cohere && !olmo && !dbrx) || phimoe)
    w.output_norm_b = mpt ? opt_vec("output_norm.bias", c.n_embd) : vec("output_norm.bias", c.n_embd);
  // jais2 runs nemotron's graph with required biases where nemotron's are optional, and a head that
  // may be tied where nemotron's is required (llama.cpp's loaders of the two).
  const bool jais2 = c.arch_name == "jais2";
  const bool head_required = c.arch == Arch::Jais || c.arch == Arch::Baichuan || dbrx || phimoe || c.arch == Arch::Qwen ||
                             c.arch == Arch::Xverse || c.arch == Arch::Orion || c.arch == Arch::Codeshell || plamo ||
                             c.arch == Arch::ExaoneMoe || c.arch == Arch::Maple || (c.arch == Arch::Nemotron && !jais2);
  if (head_required && c.tied_output)
    throw_error(ErrorKind::Format, "{}: {} needs output.weight (llama.cpp does not tie its head)", file.path(),
                c.arch_name);
  w.output = !c.tied_output ? b.matrix("output.weight", c.n_embd, c.n_vocab) : w.token_embd;
  if (c.arch == Arch::Phi2 || phimoe) w.output_b = vec("output.bias", c.n_vocab);
  // qwen2vl: llama.cpp binds an optional output.bias but its graph does not add it; neither does specmoe.
  if (c.rope_freq_factors) {
    // llama3: the converter's rope_freqs.weight, else the factors of the file's llama3 keys.
    if (b.has("rope_freqs.weight")) {
      w.rope_freqs = vec("rope_freqs.weight", c.rope_dims / 2);
    } else {
      floats.push_back(c.llama3_rope_factors());
      w.rope_freqs = {floats.back().data(), c.rope_dims / 2};
    }
    check_factors(file, "rope_freqs.weight", w.rope_freqs);
  }
  if (!c.rope_still_pairs.empty()) {
    // qwen3vl's still pairs as frequency divisors: a divisor of 1e30 takes a pair's angle below
    // 1e-20 radians at any position a cache holds, so it keeps its values to float precision.
    std::vector<float> f(c.rope_still_pairs.size(), 1.0f);
    for (size_t i = 0; i < f.size(); ++i)
      if (c.rope_still_pairs[i]) f[i] = 1e30f;
    floats.push_back(std::move(f));
    w.rope_freqs = {floats.back().data(), c.rope_dims / 2};
  }
  if (c.alibi()) {
    std::vector<float> slopes(static_cast<size_t>(c.n_head));
    for (int h = 0; h < c.n_head; ++h) slopes[h] = kernels::alibi_slope(c.n_head, c.alibi_max_bias, h);
    floats.push_back(std::move(slopes));
    w.alibi_slopes = {floats.back().data(), c.n_head};
  }
  if (c.rope_long_short_factors) {
    w.rope_long = vec("rope_factors_long.weight", c.rope_dims / 2);
    w.rope_short = vec("rope_factors_short.weight", c.rope_dims / 2);
    check_factors(file, "rope_factors_long.weight", w.rope_long);
    check_factors(file, "rope_factors_short.weight", w.rope_short);
  }

  // Layer l's tensors (l = n_layer: the multi-token-prediction block, the architecture's own layer).
  auto bind_layer = [&](int l, LayerWeights& L) {
    const std::string p = fmt::format("blk.{}.", l);
    if (c.arch == Arch::Phi2 || cohere || falcon || plamo) {  // one norm feeds both sublayers: the FFN's is the attention's
      L.attn_norm = L.ffn_norm = vec(p + "attn_norm.weight", c.n_embd);
      if (!cohere && !plamo) L.attn_norm_b = L.ffn_norm_b = vec(p + "attn_norm.bias", c.n_embd);  // cohere's, plamo's have none
      if (falcon && b.has(p + "attn_norm_2.weight")) {  // Falcon-40B: the attention's own norm
        L.attn_norm = vec(p + "attn_norm_2.weight", c.n_embd);
        L.attn_norm_b = vec(p + "attn_norm_2.bias", c.n_embd);
      }
    } else if (olmo) {
      L.attn_norm = L.ffn_norm = ones;
    } else if (c.pre_norms) {
      if (c.arch == Arch::StableLm && !b.has(p + "ffn_norm.weight"))
        throw_error(ErrorKind::Unsupported,
                    "{}: layer {} has no ffn_norm: stablelm with a parallel residual (StableLM 2 12B) is not supported",
                    file.path(), l);
      L.attn_norm = vec(p + "attn_norm.weight", c.n_embd);
      // seed_oss names its FFN's pre-norm post_attention_norm (llama.cpp's attn_post_norm).
      // seed_oss and glm4moe name it so too.
      const bool post_named = c.arch == Arch::SeedOss || c.arch == Arch::Glm4Moe || c.arch == Arch::GptOss ||
                              c.arch == Arch::Qwen35 || c.arch == Arch::Qwen35Moe || c.arch == Arch::Qwen3Next;
      // dbrx names it attn_output_norm.
      if (!c.has_mixer(l))  // nemotron_h's MLP layers: their one norm is attn_norm
        L.ffn_norm = L.attn_norm;
      else if (c.has_ffn(l))  // mamba2's and nemotron_h's mixer layers have no feed-forward
        L.ffn_norm = vec(p + (post_named ? "post_attention_norm.weight" : dbrx ? "attn_output_norm.weight" : "ffn_norm.weight"),
                         c.n_embd);
    }
    if ((c.layer_norm && c.arch != Arch::Phi2 && !cohere && !falcon && !olmo && !dbrx) || phimoe) {
      L.attn_norm_b = mpt ? opt_vec(p + "attn_norm.bias", c.n_embd) : vec(p + "attn_norm.bias", c.n_embd);
      L.ffn_norm_b = mpt ? opt_vec(p + "ffn_norm.bias", c.n_embd) : vec(p + "ffn_norm.bias", c.n_embd);
    }
    if (mpt)
      for (const char* t : {"attn_q_norm.weight", "attn_k_norm.weight", "ffn_act.scales"})
        if (b.has(p + t))
          throw_error(ErrorKind::Unsupported, "{}: tensor '{}{}': mpt's {} is not supported", file.path(), p, t,
                      t[0] == 'f' ? "AWQ activation scale" : "q/k LayerNorm");
    if (c.arch == Arch::StableLm && b.has(p + "attn_q_norm.weight"))
      throw_error(ErrorKind::Unsupported,
                  "{}: tensor '{}attn_q_norm.weight': stablelm's per-head q/k LayerNorm (StableLM 2 12B) is not "
                  "supported",
                  file.path(), p);
    if (!c.has_mixer(l)) {
      // nemotron_h's MLP layers: no attention or recurrent mixer
    } else if (c.is_conv_layer(l)) {  // lfm2: the gated short convolution in place of attention
      L.conv_in = b.matrix(p + "shortconv.in_proj.weight", c.n_embd, 3 * static_cast<int64_t>(c.n_embd));
      floats.push_back(b.values(p + "shortconv.conv.weight", {c.shortconv_l_cache, c.n_embd}));
      L.conv_taps = {floats.back().data(), static_cast<int64_t>(c.n_embd) * c.shortconv_l_cache};
      L.conv_out = b.matrix(p + "shortconv.out_proj.weight", c.n_embd, c.n_embd);
    } else if (c.is_recurrent_layer(l) && c.recurrent_mixer == RecurrentMixer::Mamba2) {
      // granitehybrid: the Mamba-2 mixer in place of attention
      const int64_t di = c.ssm_d_inner, ng = c.ssm_n_group, nh = c.ssm_dt_rank;
      const bool conv_bias_required = c.arch == Arch::Mamba2;  // optional for granitehybrid
      const int64_t conv_dim = di + 2 * ng * c.ssm_d_state;
      L.ssm_in = b.matrix(p + "ssm_in.weight", c.n_embd, di + conv_dim + nh);
      L.ssm_out = b.matrix(p + "ssm_out.weight", di, c.n_embd);
      auto values = [&](const std::string& name, const std::vector<int64_t>& ne, int64_t n) -> VectorView {
        floats.push_back(b.values(name, ne));
        return {floats.back().data(), n};
      };
      L.ssm_conv = values(p + "ssm_conv1d.weight", {c.ssm_d_conv, conv_dim}, conv_dim * c.ssm_d_conv);
      L.ssm_conv_b = conv_bias_required ? vec(p + "ssm_conv1d.bias", conv_dim) : opt_vec(p + "ssm_conv1d.bias", conv_dim);
      L.ssm_dt = vec(p + "ssm_dt.bias", nh);
      L.ssm_a = values(p + "ssm_a", {1, nh}, nh);
      L.ssm_d = values(p + "ssm_d", {1, nh}, nh);
      L.ssm_norm = values(p + "ssm_norm.weight", {di / ng, ng}, di);
    } else if (c.is_recurrent_layer(l)) {  // qwen35, qwen3next: the gated DeltaNet in place of attention
      const int64_t key_dim = static_cast<int64_t>(c.ssm_n_group) * c.ssm_d_state, value_dim = c.ssm_d_inner;
      const int64_t conv_dim = 2 * key_dim + value_dim;
      if (c.arch == Arch::Qwen3Next) {
        // attn_qkv and attn_gate as qwen35's, or the older converters' ssm_in ([q | k | v | z] per
        // query/key head); beta and alpha in one ssm_ba ([beta | alpha] per query/key head).
        if (b.has(p + "attn_qkv.weight") || !b.has(p + "ssm_in.weight")) {
          L.ssm_qkv = b.matrix(p + "attn_qkv.weight", c.n_embd, conv_dim);
          L.ssm_gate = b.matrix(p + "attn_gate.weight", c.n_embd, value_dim);
        } else {
          L.ssm_in = b.matrix(p + "ssm_in.weight", c.n_embd, conv_dim + value_dim);
        }
        L.ssm_ba = b.matrix(p + "ssm_ba.weight", c.n_embd, 2 * static_cast<int64_t>(c.ssm_dt_rank));
      } else {
        L.ssm_qkv = b.matrix(p + "attn_qkv.weight", c.n_embd, conv_dim);
        L.ssm_gate = b.matrix(p + "attn_gate.weight", c.n_embd, value_dim);
        L.ssm_alpha = b.matrix(p + "ssm_alpha.weight", c.n_embd, c.ssm_dt_rank);
        L.ssm_beta = b.matrix(p + "ssm_beta.weight", c.n_embd, c.ssm_dt_rank);
      }
      L.ssm_out = b.matrix(p + "ssm_out.weight", value_dim, c.n_embd);
      floats.push_back(b.values(p + "ssm_conv1d.weight", {c.ssm_d_conv, conv_dim}));
      L.ssm_conv = {floats.back().data(), conv_dim * c.ssm_d_conv};
      L.ssm_dt = vec(p + "ssm_dt.bias", c.ssm_dt_rank);
      L.ssm_a = vec(p + "ssm_a", c.ssm_dt_rank);
      L.ssm_norm = vec(p + "ssm_norm.weight", c.ssm_d_state);
    } else if (gpt2_block) {
      L.wqkv = b.matrix(p + "attn_qkv.weight", c.n_embd, qkv_dim);
      L.bqkv = mpt ? opt_vec(p + "attn_qkv.bias", qkv_dim) : vec(p + "attn_qkv.bias", qkv_dim);
      L.bo = mpt ? opt_vec(p + "attn_output.bias", c.n_embd) : vec(p + "attn_output.bias", c.n_embd);
    } else if (c.is_mla()) {
      bind_mla(b, c, p, L, vec);
    } else {
      if (c.attn_output_gate && b.has(p + "attn_qkv.weight"))
        throw_error(ErrorKind::Unsupported, "{}: layer {} is a gated attention layer with a fused attn_qkv", file.path(), l);
      if (falcon || dbrx || b.has(p + "attn_qkv.weight")) {  // falcon, dbrx: required
        // llama.cpp's create_tensor_qkv: one fused projection when the file has it (phi3).
        L.wqkv = b.matrix(p + "attn_qkv.weight", c.n_embd, qkv_dim);
        L.bqkv = falcon || dbrx ? VectorView{} : opt_vec(p + "attn_qkv.bias", qkv_dim);  // falcon, dbrx bind none
        if (L.bqkv.empty() && (b.has(p + "attn_q.bias") || b.has(p + "attn_k.bias") || b.has(p + "attn_v.bias")))
          throw_error(ErrorKind::Unsupported, "{}: layer {} has a fused attn_qkv with separate q/k/v biases",
                      file.path(), l);
      } else {
        L.wq = b.matrix(p + "attn_q.weight", c.n_embd, q_out);
        L.wk = b.matrix(p + "attn_k.weight", c.n_embd, c.kv_dim());
        L.wv = b.matrix(p + "attn_v.weight", c.n_embd, c.kv_dim());
        if (qwen2) {
          L.bq = vec(p + "attn_q.bias", q_dim);
          L.bk = vec(p + "attn_k.bias", c.kv_dim());
          L.bv = vec(p + "attn_v.bias", c.kv_dim());
        } else {
          // llama.cpp binds these when a file has them (create_tensor_qkv).
          L.bq = opt_vec(p + "attn_q.bias", q_out);
          L.bk = opt_vec(p + "attn_k.bias", c.kv_dim());
          L.bv = opt_vec(p + "attn_v.bias", c.kv_dim());
        }
      }
      // llama.cpp binds attn_output.bias for these (required for starcoder2, optional for the others).
      if (c.arch == Arch::Llama || c.arch == Arch::Granite || c.arch == Arch::GraniteMoe || c.arch == Arch::Mistral3 ||
          c.arch == Arch::MiniCpm || c.arch == Arch::Nemotron || c.arch == Arch::GraniteHybrid ||
          c.arch == Arch::NemotronH || c.arch == Arch::Apertus)
        L.bo = opt_vec(p + "attn_output.bias", c.n_embd);
      if (c.arch == Arch::Starcoder2 || c.arch == Arch::Phi2 || c.arch == Arch::GptOss || phimoe ||
          c.arch == Arch::Codeshell || jais2)
        L.bo = vec(p + "attn_output.bias", c.n_embd);
      if (c.arch == Arch::GptOss) L.attn_sinks = vec(p + "attn_sinks.weight", c.n_head);
      if (c.arch == Arch::Afmoe) L.attn_gate = b.matrix(p + "attn_gate.weight", c.n_embd, q_dim);
      if (c.attn_gate_per_head) L.attn_gate = b.matrix(p + "attn_gate.weight", c.n_embd, c.n_head);  // spark2_5
      if (c.qk_norm) {
        L.attn_q_norm = vec(p + "attn_q_norm.weight", c.head_dim);
        L.attn_k_norm = vec(p + "attn_k_norm.weight", c.head_dim);
        // apertus: llama.cpp binds optional attn_{q,k}_norm.bias but its graph adds neither (nor
        // does specmoe).
      }
      if (c.qk_norm_full) {
        L.attn_q_norm = vec(p + "attn_q_norm.weight", q_dim);
        L.attn_k_norm = vec(p + "attn_k_norm.weight", c.kv_dim());
      }
      if (c.post_norms) {
        L.attn_post_norm = vec(p + "post_attention_norm.weight", c.n_embd);
        L.ffn_post_norm = vec(p + "post_ffw_norm.weight", c.n_embd);
      }
    }
    if (!c.is_mla() && !c.is_conv_layer(l) && !c.is_recurrent_layer(l) && c.has_mixer(l))
      L.wo = b.matrix(p + "attn_output.weight", q_dim, c.n_embd);
    if (!c.has_ffn(l)) {
      // mamba2, nemotron_h's mixer layers: the mixer is the layer
    } else if (c.is_moe_layer(l)) {
      L.moe = bind_moe(b, c, l, floats);
    } else if (c.arch == Arch::Jais) {  // SwiGLU with biases
      L.ffn_gate = b.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
      L.ffn_gate_b = vec(p + "ffn_gate.bias", c.n_ff);
      L.ffn_up = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
      L.ffn_up_b = vec(p + "ffn_up.bias", c.n_ff);
      L.ffn_down = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
      L.ffn_down_b = vec(p + "ffn_down.bias", c.n_embd);
    } else if (falcon) {  // gpt2's ungated GELU MLP without biases
      L.ffn_up = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
      L.ffn_down = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
    } else if (gpt2_block || c.arch == Arch::Starcoder2 || c.arch == Arch::Phi2 || c.arch == Arch::Codeshell) {
      L.ffn_up = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
      L.ffn_up_b = mpt ? opt_vec(p + "ffn_up.bias", c.n_ff) : vec(p + "ffn_up.bias", c.n_ff);
      L.ffn_down = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
      L.ffn_down_b = mpt ? opt_vec(p + "ffn_down.bias", c.n_embd) : vec(p + "ffn_down.bias", c.n_embd);
    } else if (c.ffn_act == FfnActivation::ReluSqr || c.ffn_act == FfnActivation::XIelu) {
      // arcee, nemotron, nemotron_h: down(relu(up x + b)^2) + b, the biases nemotron's optional ones;
      // apertus: down(xielu(up x)).
      L.ffn_up = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
      L.ffn_down = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
      if (jais2) {
        L.ffn_up_b = vec(p + "ffn_up.bias", c.n_ff);
        L.ffn_down_b = vec(p + "ffn_down.bias", c.n_embd);
      } else if (c.arch == Arch::Nemotron || c.arch == Arch::NemotronH) {
        L.ffn_up_b = opt_vec(p + "ffn_up.bias", c.n_ff);
        L.ffn_down_b = opt_vec(p + "ffn_down.bias", c.n_embd);
      }
    } else if (c.ffn_gate_up_fused) {
      L.ffn_up = b.matrix(p + "ffn_up.weight", c.n_embd, 2 * static_cast<int64_t>(c.n_ff));  // [gate | up]
      L.ffn_down = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
    } else {
      L.ffn_gate = b.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
      L.ffn_up = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
      L.ffn_down = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
      if (c.arch == Arch::Granite || c.arch == Arch::GraniteMoe || c.arch == Arch::Mistral3 ||
          c.arch == Arch::MiniCpm || c.arch == Arch::GraniteHybrid) {  // optional there
        L.ffn_gate_b = opt_vec(p + "ffn_gate.bias", c.n_ff);
        L.ffn_up_b = opt_vec(p + "ffn_up.bias", c.n_ff);
        L.ffn_down_b = opt_vec(p + "ffn_down.bias", c.n_embd);
      }
    }
  };
  if (c.mtp_only && !c.has_mtp())
    throw_error(ErrorKind::Unsupported, "{}: the file holds only a multi-token-prediction block of {}, which specmoe does not "
                "run", file.path(), c.arch_name);
  if (!c.mtp_only) {  // a file of the block alone has no layer of the model's own
    w.layers.resize(c.n_layer);
    // A looped model binds its file's blocks once; resident_weights gives the later passes the
    // same resident copies.
    const int n_bound = c.n_layer_phys > 0 ? c.n_layer_phys : c.n_layer;
    for (int l = 0; l < n_bound; ++l) bind_layer(l, w.layers[l]);
    for (int l = n_bound; l < c.n_layer; ++l) w.layers[l] = w.layers[l % n_bound];
    w.n_layer_phys = c.n_layer_phys;
  }

  if (c.has_mtp()) {
    // The first NextN block (llama.cpp runs one): layer n_layer, its own embedding and head when
    // the file has them (DeepSeek-V3's converter shares the model's).
    NextnWeights& n = w.nextn;
    const std::string p = fmt::format("blk.{}.nextn.", c.n_layer);
    n.eh_proj = b.matrix(p + "eh_proj.weight", 2 * static_cast<int64_t>(c.n_embd), c.n_embd);
    n.enorm = vec(p + "enorm.weight", c.n_embd);
    n.hnorm = vec(p + "hnorm.weight", c.n_embd);
    n.embed = b.has(p + "embed_tokens.weight") ? b.matrix(p + "embed_tokens.weight", c.n_embd, c.n_vocab) : w.token_embd;
    n.head_norm = b.has(p + "shared_head_norm.weight") ? vec(p + "shared_head_norm.weight", c.n_embd) : w.output_norm;
    n.head = b.has(p + "shared_head_head.weight") ? b.matrix(p + "shared_head_head.weight", c.n_embd, c.n_vocab) : w.output;
    bind_layer(c.n_layer, n.block);
  }
  return w;
}

size_t ModelWeights::bytes_per_token() const {
  size_t total = output.bytes() + eagle3.fc.bytes();
  for (const LayerWeights& L : layers) {
    total += L.wq.bytes() + L.wk.bytes() + L.wv.bytes() + L.wqkv.bytes() + L.wo.bytes();
    total += L.wq_a.bytes() + L.wq_b.bytes() + L.wkv_a_mqa.bytes() + L.wk_b.bytes() + L.wv_b.bytes();
    total += L.conv_in.bytes() + L.conv_out.bytes();
    total += L.ssm_qkv.bytes() + L.ssm_gate.bytes() + L.ssm_alpha.bytes() + L.ssm_beta.bytes() + L.ssm_ba.bytes() + L.ssm_out.bytes() +
             L.ssm_in.bytes();
    if (L.is_moe()) {
      const moe::MoEWeights& m = L.moe.weights;
      total += m.router_bytes() + static_cast<size_t>(L.moe.router.k) * m.expert_bytes() + m.shared_bytes();
    } else {
      total += L.ffn_gate.bytes() + L.ffn_up.bytes() + L.ffn_down.bytes();
    }
  }
  return total;
}

ModelWeights resident_weights(Backend& be, const ModelWeights& h) {
  ModelWeights w = h;  // descriptions (router specs) and the host floats' owner come along
  auto m = [&](MatrixView& v) { v = v.empty() ? v : be.resident(v); };
  auto f = [&](VectorView& v) { v = v.empty() ? v : be.resident(v); };
  m(w.token_embd);
  m(w.position_embd);
  m(w.output);
  f(w.token_embd_norm);
  f(w.token_embd_norm_b);
  f(w.alibi_slopes);
  f(w.output_norm);
  f(w.output_norm_b);
  f(w.output_b);
  f(w.rope_freqs);
  f(w.rope_long);
  f(w.rope_short);
  auto layer = [&](LayerWeights& L) {
    for (VectorView* v : {&L.attn_norm, &L.attn_norm_b, &L.bq, &L.bk, &L.bv, &L.bqkv, &L.bo, &L.attn_q_norm,
                          &L.attn_k_norm, &L.attn_post_norm, &L.attn_sinks, &L.ffn_norm, &L.ffn_norm_b, &L.ffn_post_norm,
                          &L.ffn_gate_b, &L.ffn_up_b, &L.ffn_down_b, &L.moe.bias, &L.attn_q_a_norm, &L.attn_kv_a_norm, &L.conv_taps,
                          &L.ssm_conv, &L.ssm_dt, &L.ssm_a, &L.ssm_norm, &L.ssm_conv_b, &L.ssm_d})
      f(*v);
    moe::MoEWeights& e = L.moe.weights;
    // gpt-oss's router and expert biases, host floats of the binder: on the backend's memory too.
    const int64_t n_e = e.n_expert(), n_ff = e.n_ff(), n_embd = e.gate_inp.n_in;
    for (const auto& [b, n] : {std::pair{&e.gate_inp_b, n_e}, std::pair{&e.gate_exps_b, n_e * n_ff},
                               std::pair{&e.up_exps_b, n_e * n_ff}, std::pair{&e.down_exps_b, n_e * n_embd}})
      if (*b != nullptr) *b = be.resident(VectorView{*b, n}).data;
    for (MatrixView* v : {&L.wq, &L.wk, &L.wv, &L.wqkv, &L.wo, &L.attn_gate, &L.ffn_gate, &L.ffn_up, &L.ffn_down, &e.gate_inp,
                          &e.gate_exps, &e.up_exps, &e.down_exps, &e.gate_shexp, &e.up_shexp, &e.down_shexp,
                          &e.gate_inp_shexp, &L.wq_a, &L.wq_b, &L.wkv_a_mqa, &L.wk_b, &L.wv_b, &L.conv_in, &L.conv_out,
                          &L.ssm_qkv, &L.ssm_gate, &L.ssm_alpha, &L.ssm_beta, &L.ssm_ba, &L.ssm_out, &L.ssm_in})
      m(*v);
  };
  const size_t n_phys = static_cast<size_t>(w.n_layer_phys);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    if (n_phys > 0 && l >= n_phys)
      w.layers[l] = w.layers[l % n_phys];  // a looped model's later passes: the same resident copies
    else
      layer(w.layers[l]);
  }
  if (!w.nextn.empty()) {
    NextnWeights& n = w.nextn;
    layer(n.block);
    // Shared with the model when the file has none of its own: the same resident copy.
    n.embed = h.nextn.embed.data == h.token_embd.data ? w.token_embd : be.resident(n.embed);
    n.head = h.nextn.head.data == h.output.data ? w.output : be.resident(n.head);
    n.head_norm = h.nextn.head_norm.data == h.output_norm.data ? w.output_norm : be.resident(n.head_norm);
    m(n.eh_proj);
    f(n.enorm);
    f(n.hnorm);
  }
  if (!w.eagle3.empty()) {
    Eagle3Weights& e = w.eagle3;
    m(e.fc);
    f(e.enc_norm);
    f(e.hidden_norm);
    f(e.d2t);  // int32 ids, moved as 4-byte words
  }
  return w;
}

}  // namespace specmoe::core
