// The transformer forward over a batch of new tokens (llama incl. Llama 3's RoPE scaling, qwen2,
// qwen2moe, qwen3, qwen3moe, olmoe, phi3, gemma2, gemma3, gpt2, Mixtral-style MoE llama, and
// deepseek2 with multi-head latent attention): pre-norm blocks x += post(attn(norm(x)));
// x += post(ffn(norm(x))) (post: gemma's post-norms, else nothing); then the final norm, the
// output head and, when the file asks, logit soft-capping. Every op is a Backend call, so this one
// list runs on every backend, and every matmul reads its weights once for the whole batch. The
// architectures differ only in data: ModelConfig's flags (QK-norm per head or over the whole
// projection, post-norms, embedding scale, FFN activation, sliding windows, per-layer RoPE,
// soft-capping, MLA) and which weights are present (fused QKV or gate-up, biases, experts).
#include "core/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace specmoe::core {

namespace {
// Workspace slots. // [T, n_embd] unless noted
enum Slot : size_t {
  kX,       // residual stream
  kXn,      // normalised input of a sublayer / its output before the residual add
  kQ,       // [T, q_dim]
  kK,       // [T, kv_dim] new keys
  kV,       // [T, kv_dim] new values
  kQkv,     // [T, q_dim + 2 kv_dim] fused projection (gpt2)
  kAtt,     // [T, q_dim]
  kG,       // [T, n_ff] gate (or up for gpt2)
  kU,       // [T, n_ff] up
  kLogits,  // [T, n_vocab]
  kIo,      // ids [T] | positions [T] | row positions [n_past + T] (sliding windows) | mask [T, M + T] bytes
  kGateUp,  // [T, 2 n_ff] phi3's fused [gate | up]
  kPar,     // the attention's output under a parallel residual (gptneox, phi2), added after the FFN's
  // Multi-head latent attention (H heads, latent rank R, RoPE dims P, nope = head_dim - P):
  kQa,      // [T, q_lora_rank] q LoRA; then [T, R] one head's absorbed query or latent output
  kKvA,     // [T, R + P] attn_kv_a_mqa x
  kLat,     // [T, R] the normalised latent; then [T, nope] one head's q_nope
  kPe,      // [T, P] the RoPE key; [T, H, P] the RoPE queries
  kQAbs,    // [T, H, R + P] absorbed queries
  kLatOut,  // [T, H, R] attention over the latents
  kVOut,    // [T, H, v_head_dim] decompressed values; then [T, v_head_dim] one head's
  // lfm2's gated short convolution:
  kConvIn,  // [T, 3 n_embd] [B | C | x]
  kConvB,   // [T, n_embd] B, then B * x
  kConvC,   // [T, n_embd] C, then C * conv(B * x)
  kConvX,   // [T, n_embd] x, then conv(B * x)
  kLayerIn, // [T, n_embd] smallthinker: the layer's input, which its MoE router reads
  // qwen35's gated DeltaNet and gated attention:
  kDnQkv,   // [T, conv_dim] the convolution's input [q | k | v]
  kDnZ,     // [T, value_dim] the output gate z
  kDnAlpha, // [T, n_v_heads]
  kDnBeta,  // [T, n_v_heads]
  kDnOut,   // [T, value_dim] the recurrence's output, then normed and gated
  kDnBa,    // [T, 2 n_v_heads] qwen3next's ssm_ba output
  kDnQkvz,  // [T, conv_dim + value_dim] qwen3next's ssm_in output (older files)
  kQGate,   // [T, 2 q_dim] attn_q's [q_h | g_h] per head
  kGate,    // [T, q_dim] the attention's output gate
  // granitehybrid's Mamba-2 mixer:
  kM2In,    // [T, in_proj] [z | xBC | dt]
  kM2Xbc,   // [T, conv_dim] the convolution's output
  kM2Y,     // [T, d_inner] the gated, normed y
  // The multi-token-prediction block:
  kMtpCat,  // [T, 2 n_embd] [enorm(embed(t)) | hnorm(h)]; an EAGLE-3 head's [attn_norm(embed(t)) | hidden_norm(g)]
  // Features and EAGLE-3:
  kFeat,    // [T, k n_embd] the captured layers' input rows
  kFused,   // [T, n_embd] an EAGLE-3 head's fc output; [T, feature width] its normed features first
  kDraftLogits,  // [T, n_vocab] an EAGLE-3 head's logits scattered through d2t
  kSlots
};
}  // namespace

Transformer::Transformer(std::shared_ptr<Backend> backend, const ModelConfig& config, ModelWeights weights)
    : be_(std::move(backend)), c_(config), w_(std::move(weights)), ws_(kSlots), ws_bytes_(kSlots, 0) {
  needs_row_positions_ = c_.alibi();
  has_conv_layers_ = c_.has_conv_layers();
  has_recurrent_layers_ = c_.n_recurrent_layers() > 0;
  dn_.n_k_heads = c_.ssm_n_group;
  dn_.n_v_heads = c_.ssm_dt_rank;
  dn_.head_dim = c_.ssm_d_state;
  dn_.d_conv = c_.ssm_d_conv;
  dn_.eps = c_.norm_eps;
  dn_.kv_interleaved = c_.arch == Arch::Qwen3Next;  // its value heads g r .. g r + r - 1 read q/k head g
  if (c_.recurrent_mixer == RecurrentMixer::Mamba2 && has_recurrent_layers_) {
    m2_.n_head = c_.ssm_dt_rank;
    m2_.head_dim = c_.ssm_d_inner / c_.ssm_dt_rank;
    m2_.d_state = c_.ssm_d_state;
    m2_.n_group = c_.ssm_n_group;
    m2_.d_conv = c_.ssm_d_conv;
    m2_.eps = c_.norm_eps;
  }
  // The multi-token-prediction block is layer n_layer (its RoPE the architecture's).
  const int n_blocks = c_.n_layer + (w_.nextn.empty() ? 0 : 1);
  for (int l = 0; l < n_blocks; ++l) {
    needs_row_positions_ = needs_row_positions_ || c_.window(l) > 0 || c_.chunk(l) > 0;
    if (c_.rope_style == RopeStyle::None) continue;
    const LayerRope lr = c_.rope_at(l);
    RopeParams rp;
    rp.head_dim = c_.is_mla() ? c_.rope_dims : c_.head_dim;  // MLA ropes [P]-wide heads of their own
    rp.rope_dims = c_.rope_dims_at(l);  // maple's and spark2_5's local layers may rotate fewer
    rp.freq_base = lr.freq_base;
    rp.freq_scale = lr.freq_scale;
    rp.pairing = c_.rope_style == RopeStyle::SplitHalves ? kernels::RopePairing::SplitHalves
                                                          : kernels::RopePairing::Adjacent;
    rp.freq_factors = w_.rope_freqs.data;  // null unless llama3 factors
    rp.ext_factor = lr.ext_factor;
    rp.corr_low = lr.corr_low;
    rp.corr_high = lr.corr_high;
    rp.attn_factor = lr.attn_factor;
    rope_.push_back(rp);
  }
}

float* Transformer::buf(size_t slot, size_t floats) {
  const size_t bytes = std::max<size_t>(floats, 1) * sizeof(float);
  if (ws_bytes_[slot] < bytes) {
    be_->synchronize();  // queued work may still read the old region
    ws_[slot] = be_->allocate(bytes);
    ws_bytes_[slot] = bytes;
  }
  return static_cast<float*>(ws_[slot].get());
}

void Transformer::norm(const VectorView& w, const VectorView& b, const float* in, float* out, int64_t rows) {
  if (w.empty()) {  // olmo2 has no pre-norms: the sublayer reads the residual stream itself
    const size_t row = static_cast<size_t>(c_.n_embd) * sizeof(float);
    be_->copy_rows(out, row, in, row, row, rows);
  } else if (c_.layer_norm) {
    be_->layer_norm(in, w.data, b.data, out, rows, c_.n_embd, c_.norm_eps);
  } else {
    be_->rms_norm(in, w.data, out, rows, c_.n_embd, c_.norm_eps);
    if (!b.empty()) be_->add_bias(out, b.data, rows, c_.n_embd);  // phimoe's RMSNorm with a bias
  }
}

// x += attn_output(attention(rope(q), rope(k), v)) for layer l; the new tokens' keys/values go
// into cache rows kv.size() .. kv.size()+T-1 (marked stored by the caller after the last layer).
void Transformer::attention_block(int l, int64_t T, const int32_t* positions, const int32_t* row_positions,
                                  const uint8_t* mask, KVCache& kv, const float* in) {
  const LayerWeights& L = layer(l);
  const int64_t d = c_.n_embd;
  const int64_t q_dim = static_cast<int64_t>(c_.n_head) * c_.head_dim;
  const int64_t kvd = c_.kv_dim();
  const int64_t n_past = kv.size();
  float* x = buf(kX, T * d);
  float* xn = buf(kXn, T * d);
  float* q = buf(kQ, T * q_dim);
  float* k_new = buf(kK, T * kvd);
  float* v_new = buf(kV, T * kvd);
  if (in == nullptr) {
    norm(L.attn_norm, L.attn_norm_b, x, xn, T);
    in = xn;
  }

  // The attention output gate's width: one gate per element (qwen35, afmoe) or per head (spark2_5).
  const int64_t gate_w = c_.attn_gate_per_head ? c_.n_head : q_dim;
  if (L.fused_qkv()) {
    const int64_t w3 = q_dim + 2 * kvd;
    float* qkv = buf(kQkv, T * w3);  // rows [q | k | v]
    be_->matmul(in, T, L.wqkv, qkv);
    if (!L.bqkv.empty()) be_->add_bias(qkv, L.bqkv.data, T, w3);
    if (c_.clamp_kqv > 0.0f) be_->clamp(qkv, c_.clamp_kqv, qkv, T * w3);  // mpt
    const size_t pitch = static_cast<size_t>(w3) * sizeof(float);
    be_->copy_rows(q, q_dim * sizeof(float), qkv, pitch, q_dim * sizeof(float), T);
    be_->copy_rows(k_new, kvd * sizeof(float), qkv + q_dim, pitch, kvd * sizeof(float), T);
    be_->copy_rows(v_new, kvd * sizeof(float), qkv + q_dim + kvd, pitch, kvd * sizeof(float), T);
    if (!L.attn_gate.empty()) be_->matmul(in, T, L.attn_gate, buf(kGate, T * gate_w));  // spark2_5's fused form
  } else if (c_.attn_output_gate) {
    // qwen35: attn_q gives [q_h | g_h] for each head h; the gates multiply the attention's output.
    const size_t hd = static_cast<size_t>(c_.head_dim) * sizeof(float);
    float* qg = buf(kQGate, T * 2 * q_dim);
    const MatrixView w3[3] = {L.wq, L.wk, L.wv};
    float* const y3[3] = {qg, k_new, v_new};
    be_->matmul_multi(in, T, w3, y3);
    if (!L.bq.empty()) be_->add_bias(qg, L.bq.data, T, 2 * q_dim);
    if (!L.bk.empty()) be_->add_bias(k_new, L.bk.data, T, kvd);
    if (!L.bv.empty()) be_->add_bias(v_new, L.bv.data, T, kvd);
    be_->copy_rows(q, hd, qg, 2 * hd, hd, T * c_.n_head);
    be_->copy_rows(buf(kGate, T * q_dim), hd, qg + c_.head_dim, 2 * hd, hd, T * c_.n_head);
  } else if (!L.attn_gate.empty()) {
    // afmoe, spark2_5: the output gate's own projection of the same input, in the same call.
    const MatrixView w4[4] = {L.wq, L.wk, L.wv, L.attn_gate};
    float* const y4[4] = {q, k_new, v_new, buf(kGate, T * gate_w)};
    be_->matmul_multi(in, T, w4, y4);
    if (!L.bq.empty()) be_->add_bias(q, L.bq.data, T, q_dim);
    if (!L.bk.empty()) be_->add_bias(k_new, L.bk.data, T, kvd);
    if (!L.bv.empty()) be_->add_bias(v_new, L.bv.data, T, kvd);
  } else {
    const MatrixView w3[3] = {L.wq, L.wk, L.wv};
    float* const y3[3] = {q, k_new, v_new};
    be_->matmul_multi(in, T, w3, y3);
    if (!L.bq.empty()) be_->add_bias(q, L.bq.data, T, q_dim);
    if (!L.bk.empty()) be_->add_bias(k_new, L.bk.data, T, kvd);
    if (!L.bv.empty()) be_->add_bias(v_new, L.bv.data, T, kvd);
    if (c_.clamp_kqv > 0.0f)
      for (float* y : {q, k_new, v_new}) be_->clamp(y, c_.clamp_kqv, y, T * (y == q ? q_dim : kvd));
  }
  auto head_qk_norm = [&] {
    // QK-norm (qwen3, qwen3moe, gemma3, hunyuan-dense, maincoder, ...): RMSNorm over each head, i.e. over rows of head_dim.
    be_->rms_norm(q, L.attn_q_norm.data, q, T * c_.n_head, c_.head_dim, c_.norm_eps);
    be_->rms_norm(k_new, L.attn_k_norm.data, k_new, T * c_.n_head_kv, c_.head_dim, c_.norm_eps);
  };
  if (c_.qk_norm && !c_.qk_norm_after_rope) {
    head_qk_norm();
  } else if (c_.qk_norm_full) {
    // olmoe: RMSNorm over each token's whole q and k projection.
    be_->rms_norm(q, L.attn_q_norm.data, q, T, q_dim, c_.norm_eps);
    be_->rms_norm(k_new, L.attn_k_norm.data, k_new, T, kvd, c_.norm_eps);
  }
  if (c_.has_rope(l)) {  // smollm3's NoPE layers skip it
    RopeParams rp = rope_[l];  // this layer's base, scaling and frequency factors
    if (rope_factors_) rp.freq_factors = rope_factors_;  // phi3's long or short factors
    rp.n_head = c_.n_head;
    be_->rope(q, T, positions, rp);
    rp.n_head = c_.n_head_kv;
    be_->rope(k_new, T, positions, rp);
  }
  if (c_.qk_norm && c_.qk_norm_after_rope) head_qk_norm();  // hunyuan-dense, hunyuan-moe, maincoder
  if (c_.qk_l2_norm && c_.has_rope(l)) {  // llama4: unweighted RMSNorm of each roped q and k head
    be_->rms_norm(q, nullptr, q, T * c_.n_head, c_.head_dim, c_.norm_eps);
    be_->rms_norm(k_new, nullptr, k_new, T * c_.n_head_kv, c_.head_dim, c_.norm_eps);
  }
  // mistral3's attention temperature: the roped query of each token past the floor times its
  // factor (llama4: the queries of the layers without RoPE only).
  if (!c_.attn_temp_nope_only || !c_.has_rope(l))
    for (int64_t t = 0; t < static_cast<int64_t>(temp_factors_.size()); ++t)
      if (temp_factors_[t] != 1.0f) be_->scale(q + t * q_dim, temp_factors_[t], q + t * q_dim, q_dim);
  // Into the cache rows n_past .. n_past+T-1 of layer l, converted to the cache's element types
  // (F32, F16 or Q8_0 rows of kv_dim); attention then reads every row, new ones included, from
  // the cache, so a token sees the same keys in a batch as after its own forward.
  const KVLayerLayout& layout = kv.layout(l);
  const size_t k_row = kv.k_row_bytes(l), v_row = kv.v_row_bytes(l);
  be_->convert_rows(k_new, T, kvd, layout.k_type, static_cast<uint8_t*>(kv.k_data(l)) + n_past * k_row, k_row);
  be_->convert_rows(v_new, T, kvd, layout.v_type, static_cast<uint8_t*>(kv.v_data(l)) + n_past * v_row, v_row);

  KVView view;
  view.k = kv.k_data(l);
  view.v = kv.v_data(l);
  view.k_type = layout.k_type;
  view.v_type = layout.v_type;
  view.k_row_bytes = k_row;
  view.v_row_bytes = v_row;
  view.n_past = n_past;
  view.mask_past = mask_past_;
  AttentionParams ap;
  ap.n_head = c_.n_head;
  ap.n_head_kv = c_.n_head_kv;
  ap.head_dim = c_.head_dim;
  ap.scale = c_.attention_scale();
  ap.window = c_.window(l);  // gemma's local layers
  ap.chunk = c_.chunk(l);    // llama4's local layers
  ap.softcap = c_.attn_logit_softcap;  // gemma2
  ap.sinks = L.attn_sinks.empty() ? nullptr : L.attn_sinks.data;  // gpt-oss
  ap.alibi_slopes = w_.alibi_slopes.empty() ? nullptr : w_.alibi_slopes.data;  // bloom, mpt, refact, jais
  if (ap.window > 0 || ap.chunk > 0 || ap.alibi_slopes != nullptr) view.positions = row_positions;
  float* att = buf(kAtt, T * q_dim);
  be_->attention(q, T, view, mask, ap, att);
  if (c_.attn_output_gate || !L.attn_gate.empty())  // qwen35's gated attention, afmoe's and spark2_5's output gates
    be_->sigmoid_mul(buf(kGate, T * gate_w), att, att, T * q_dim, q_dim / gate_w);

  // A parallel residual (gptneox, phi2) keeps the output apart: the feed-forward block reads the
  // layer's input and adds both.
  float* o = c_.parallel_residual ? buf(kPar, T * d) : xn;
  be_->matmul(att, T, L.wo, o);
  if (!L.bo.empty()) be_->add_bias(o, L.bo.data, T, d);
  if (!L.attn_post_norm.empty()) be_->rms_norm(o, L.attn_post_norm.data, o, T, d, c_.norm_eps);
  if (c_.residual_scale != 1.0f) be_->scale(o, c_.residual_scale, o, T * d);  // granite
  if (!c_.parallel_residual) be_->add(x, o, x, T * d);
}

// deepseek2's multi-head latent attention (DeepSeek-AI 2024, DeepSeek-V2 sec. 2.1), absorbed as
// llama.cpp runs it (src/models/deepseek2.cpp): per token
//   q = attn_q x  or  attn_q_b(norm(attn_q_a x))             [H, nope + P] per head [q_nope | q_pe]
//   [c | k_pe] = attn_kv_a_mqa x;  c = norm(c);  k_pe = rope(k_pe)   one row shared by the heads
//   q_abs[h] = [attn_k_b[h] q_nope[h] | rope(q_pe[h])]       [H, R + P]
//   o[h] = sum_j softmax_j(scale q_abs[h] . [c_j | k_pe_j]) c_j   (mla_attention op)
//   x += attn_output [attn_v_b[h] o[h]]_h
// which equals attention with keys [attn_k_b^T c | k_pe] and values attn_v_b c per head, while the
// cache holds the R + P floats of [c | k_pe] per token and layer.
void Transformer::mla_attention_block(int l, int64_t T, const int32_t* positions, const uint8_t* mask, KVCache& kv) {
  const LayerWeights& L = layer(l);
  const int64_t d = c_.n_embd, H = c_.n_head, hd = c_.head_dim, P = c_.rope_dims, nope = hd - P;
  const int64_t R = c_.kv_lora_rank, W = R + P, vd = c_.mla_v_head_dim;
  const int64_t n_past = kv.size();
  const size_t f = sizeof(float);
  float* x = buf(kX, T * d);
  float* xn = buf(kXn, T * d);
  float* q = buf(kQ, T * H * hd);
  norm(L.attn_norm, L.attn_norm_b, x, xn, T);
  if (!L.wq_a.empty()) {
    float* qa = buf(kQa, T * std::max<int64_t>(c_.q_lora_rank, R));
    be_->matmul(xn, T, L.wq_a, qa);
    be_->rms_norm(qa, L.attn_q_a_norm.data, qa, T, c_.q_lora_rank, c_.norm_eps);
    be_->matmul(qa, T, L.wq_b, q);
  } else {
    be_->matmul(xn, T, L.wq, q);
  }
  float* kva = buf(kKvA, T * W);
  be_->matmul(xn, T, L.wkv_a_mqa, kva);

  // The new cache rows [norm(c) | rope(k_pe)], written in place at rows n_past .. n_past+T-1.
  float* lat = buf(kLat, T * std::max(R, nope));
  float* pe = buf(kPe, T * H * P);
  auto* rows = static_cast<float*>(kv.k_data(l));
  float* new_rows = rows + n_past * W;
  be_->copy_rows(lat, R * f, kva, W * f, R * f, T);
  be_->rms_norm(lat, L.attn_kv_a_norm.data, lat, T, R, c_.norm_eps);
  be_->copy_rows(new_rows, W * f, lat, R * f, R * f, T);
  be_->copy_rows(pe, P * f, kva + R, W * f, P * f, T);
  RopeParams rp = rope_[l];
  rp.n_head = 1;
  be_->rope(pe, T, positions, rp);
  be_->copy_rows(new_rows + R, W * f, pe, P * f, P * f, T);

  // Absorbed queries [T, H, R + P]: q_pe of every head roped in one call, q_nope absorbed head by
  // head (attn_k_b[h] maps nope -> R).
  float* qabs = buf(kQAbs, T * H * W);
  be_->copy_rows(pe, P * f, q + nope, hd * f, P * f, T * H);
  rp.n_head = static_cast<int>(H);
  be_->rope(pe, T, positions, rp);
  be_->copy_rows(qabs + R, W * f, pe, P * f, P * f, T * H);
  float* qh = buf(kQa, T * std::max<int64_t>(c_.q_lora_rank, R));
  for (int64_t h = 0; h < H; ++h) {
    be_->copy_rows(lat, nope * f, q + h * hd, H * hd * f, nope * f, T);
    be_->matmul(lat, T, L.wk_b.rows(h * R, R), qh);
    be_->copy_rows(qabs + h * W, H * W * f, qh, R * f, R * f, T);
  }

  // Mistral Large 3's attention temperature: each token's absorbed query (every head, both parts)
  // times its factor, as llama.cpp scales its Qcur.
  for (int64_t t = 0; t < static_cast<int64_t>(temp_factors_.size()); ++t)
    if (temp_factors_[t] != 1.0f) be_->scale(qabs + t * H * W, temp_factors_[t], qabs + t * H * W, H * W);

  MlaKVView view;
  view.rows = rows;
  view.stride = W;
  view.n_past = n_past;
  view.mask_past = mask_past_;
  MlaAttentionParams ap;
  ap.n_head = static_cast<int>(H);
  ap.kv_lora_rank = static_cast<int>(R);
  ap.rope_dims = static_cast<int>(P);
  ap.scale = c_.attention_scale();
  float* lo = buf(kLatOut, T * H * R);
  be_->mla_attention(qabs, T, view, mask, ap, lo);

  // Values per head: attn_v_b[h] (R -> v_head_dim) of the attended latent, then attn_output.
  float* vo = buf(kVOut, T * H * vd + T * vd);
  float* vh = vo + T * H * vd;
  for (int64_t h = 0; h < H; ++h) {
    be_->copy_rows(qh, R * f, lo + h * R, H * R * f, R * f, T);
    be_->matmul(qh, T, L.wv_b.rows(h * vd, vd), vh);
    be_->copy_rows(vo + h * vd, H * vd * f, vh, vd * f, vd * f, T);
  }
  be_->matmul(vo, T, L.wo, xn);
  be_->add(x, xn, x, T * d);
}

// lfm2's gated short convolution (Liquid AI's LFM2; llama.cpp src/models/lfm2.cpp): per token
//   [B | C | x] = shortconv.in_proj xn;  s = B * x  (stored as the layer's cache row)
//   y = C * sum_k taps[:, k] s_{path[k]}  over the token's last l_cache positions on its path
//   x += shortconv.out_proj y
// where llama.cpp keeps the last l_cache - 1 rows of s as a recurrent state, specmoe keeps every
// row in the cache: truncate and keep then roll the state back or onto a tree's accepted branch
// exactly as they do keys and values, and a tree node convolves its own ancestors.
void Transformer::conv_block(int l, int64_t T, const int32_t* prev, KVCache& kv) {
  const LayerWeights& L = layer(l);
  const int64_t d = c_.n_embd;
  const size_t f = sizeof(float), row = static_cast<size_t>(d) * f;
  const int64_t n_past = kv.size();
  float* x = buf(kX, T * d);
  float* xn = buf(kXn, T * d);
  float* bcx = buf(kConvIn, T * 3 * d);
  float* bg = buf(kConvB, T * d);
  float* cg = buf(kConvC, T * d);
  float* xs = buf(kConvX, T * d);
  norm(L.attn_norm, L.attn_norm_b, x, xn, T);
  be_->matmul(xn, T, L.conv_in, bcx);
  be_->copy_rows(bg, row, bcx, 3 * row, row, T);
  be_->copy_rows(cg, row, bcx + d, 3 * row, row, T);
  be_->copy_rows(xs, row, bcx + 2 * d, 3 * row, row, T);
  be_->mul(bg, xs, bg, T * d);
  auto* rows = static_cast<float*>(kv.k_data(l));  // F32 rows of n_embd (kv_layout)
  be_->copy_rows(rows + n_past * d, row, bg, row, row, T);
  be_->short_conv(rows, prev, T, n_past, d, c_.shortconv_l_cache, L.conv_taps.data, xs);
  be_->mul(cg, xs, cg, T * d);
  be_->matmul(cg, T, L.conv_out, xn);
  be_->add(x, xn, x, T * d);
}

namespace {

// Each new token's P nearest predecessors on its path (cache rows, oldest first, -1 before the
// sequence's start), from the batch's mask: the rows a token attends to, in cache order, are its
// path.
void path_predecessors(const TransformerBatch& b, int64_t n_past, int P, std::vector<int32_t>& prev) {
  const int64_t T = static_cast<int64_t>(b.tokens.size());
  const int64_t M = b.mask ? b.mask_past : 0, W = M + T;
  prev.assign(static_cast<size_t>(T * P), -1);
  for (int64_t i = 0; i < T; ++i) {
    int32_t* out = prev.data() + i * P;
    int k = P - 1;  // filled from the nearest predecessor back
    for (int64_t j = i - 1; j >= 0 && k >= 0; --j)  // new tokens before i that it sees
      if (!b.mask || b.mask[i * W + M + j]) out[k--] = static_cast<int32_t>(n_past + j);
    for (int64_t m = M - 1; m >= 0 && k >= 0; --m)  // the cache rows the mask covers
      if (b.mask[i * W + m]) out[k--] = static_cast<int32_t>(n_past - M + m);
    for (int64_t r = n_past - M - 1; r >= 0 && k >= 0; --r) out[k--] = static_cast<int32_t>(r);  // seen by all
  }
}

}  // namespace

void Transformer::conv_predecessors(const TransformerBatch& b, int64_t n_past) {
  path_predecessors(b, n_past, c_.shortconv_l_cache - 1, conv_prev_);
}

// Token t (cache row n_past + t) continues the state of its parent p, its nearest predecessor:
// it reads p's slot and writes its own. The ring has rollback() + 1 slots, so p's state must
// still be held (p >= oldest_state()) and not be overwritten by an earlier token of this batch
// (a row r overwrites the slot of r - rollback() - 1): row - p <= rollback() + 1.
void Transformer::delta_net_slots(const TransformerBatch& b, const KVCache& kv) {
  const int64_t T = static_cast<int64_t>(b.tokens.size()), n_past = kv.size();
  std::vector<int32_t>& parent = dn_parent_;
  path_predecessors(b, n_past, 1, parent);
  dn_slots_.resize(static_cast<size_t>(2 * T));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t row = n_past + t, p = parent[t];
    if (p >= 0 && (p < kv.oldest_state() || row - p > kv.rollback() + 1))
      throw_error(ErrorKind::InvalidArgument,
                  "forward: token {} continues the recurrent state of cache row {}, which the cache no longer holds "
                  "(it keeps the states of the last {} rows; KVCache::reserve_rollback)",
                  row, p, kv.rollback() + 1);
    dn_slots_[2 * t] = p >= 0 ? kv.state_slot(static_cast<int>(p)) : -1;
    dn_slots_[2 * t + 1] = kv.state_slot(static_cast<int>(row));
  }
}

// qwen35's gated DeltaNet layer (Qwen3.5; llama.cpp src/models/qwen35.cpp):
//   [q | k | v] = attn_qkv xn;  z = attn_gate xn;  alpha = ssm_alpha xn;  beta = ssm_beta xn
//   o = delta_net(...)  (the causal convolution, L2 norms, gates and recurrence: the op)
//   x += ssm_out (rmsnorm(o per head; ssm_norm) * silu(z))
// The recurrence reads each token's parent's state from the cache's ring and writes its own.
void Transformer::delta_net_block(int l, int64_t T, const int32_t* slots, KVCache& kv) {
  const LayerWeights& L = layer(l);
  const int64_t d = c_.n_embd, C = dn_.conv_dim(), V = dn_.value_dim(), H = dn_.n_v_heads;
  float* x = buf(kX, T * d);
  float* xn = buf(kXn, T * d);
  norm(L.attn_norm, L.attn_norm_b, x, xn, T);
  float* qkv = buf(kDnQkv, T * C);
  float* z = buf(kDnZ, T * V);
  float* alpha = buf(kDnAlpha, T * H);
  float* beta = buf(kDnBeta, T * H);
  if (!L.ssm_ba.empty()) {
    // qwen3next: ssm_ba gives [beta | alpha] of each query/key head's r = n_v / n_k value heads,
    // which go apart into beta and alpha (value head g r + j at g r + j).
    const int64_t G = dn_.n_k_heads, r = H / G, K = dn_.key_dim();
    float* ba = buf(kDnBa, T * 2 * H);
    if (!L.ssm_in.empty()) {
      // An older converter's ssm_in: [q (S) | k (S) | v (r S) | z (r S)] per query/key head.
      const int64_t S = dn_.head_dim, per = 2 * S + 2 * r * S;
      float* qkvz = buf(kDnQkvz, T * G * per);
      const MatrixView w2[2] = {L.ssm_in, L.ssm_ba};
      float* const y2[2] = {qkvz, ba};
      be_->matmul_multi(xn, T, w2, y2);
      const size_t f = sizeof(float);
      // Head g's pieces of every token (rows G per apart) into their places in [q | k | v] and z:
      // four strided copies per query/key head, whatever the batch.
      for (int64_t g = 0; g < G; ++g) {
        const float* src = qkvz + g * per;
        be_->copy_rows(qkv + g * S, C * f, src, G * per * f, S * f, T);                          // q
        be_->copy_rows(qkv + K + g * S, C * f, src + S, G * per * f, S * f, T);                  // k
        be_->copy_rows(qkv + 2 * K + g * r * S, C * f, src + 2 * S, G * per * f, r * S * f, T);  // v
        be_->copy_rows(z + g * r * S, V * f, src + 2 * S + r * S, G * per * f, r * S * f, T);   // z
      }
    } else {
      const MatrixView w3[3] = {L.ssm_qkv, L.ssm_gate, L.ssm_ba};
      float* const y3[3] = {qkv, z, ba};
      be_->matmul_multi(xn, T, w3, y3);
    }
    const size_t f = sizeof(float);
    be_->copy_rows(beta, r * f, ba, 2 * r * f, r * f, T * G);
    be_->copy_rows(alpha, r * f, ba + r, 2 * r * f, r * f, T * G);
  } else {
    const MatrixView w4[4] = {L.ssm_qkv, L.ssm_gate, L.ssm_alpha, L.ssm_beta};
    float* const y4[4] = {qkv, z, alpha, beta};
    be_->matmul_multi(xn, T, w4, y4);
  }
  float* o = buf(kDnOut, T * V);
  be_->delta_net(qkv, alpha, beta, L.ssm_conv.data, L.ssm_dt.data, L.ssm_a.data, kv.state_data(l), slots, T, dn_, o);
  be_->rms_norm(o, L.ssm_norm.data, o, T * H, dn_.head_dim, c_.norm_eps);
  be_->swiglu(z, o, o, T * V);  // silu(z) * normed
  be_->matmul(o, T, L.ssm_out, xn);
  be_->add(x, xn, x, T * d);
}

// granitehybrid's Mamba-2 layer (Granite 4.0 H; llama.cpp src/models/mamba-base.cpp
// build_mamba2_layer): [z | xBC | dt] = ssm_in xn; y = mamba2(...) (the convolution, the scan from
// each token's parent's state, the gate and the grouped norm: the op); x += residual_scale * ssm_out y.
void Transformer::mamba2_block(int l, int64_t T, const int32_t* slots, KVCache& kv) {
  const LayerWeights& L = layer(l);
  const int64_t d = c_.n_embd;
  float* x = buf(kX, T * d);
  float* xn = buf(kXn, T * d);
  norm(L.attn_norm, L.attn_norm_b, x, xn, T);
  float* zx = buf(kM2In, T * m2_.in_proj());
  be_->matmul(xn, T, L.ssm_in, zx);
  float* y = buf(kM2Y, T * m2_.d_inner());
  be_->mamba2(zx, L.ssm_conv.data, L.ssm_conv_b.data, L.ssm_dt.data, L.ssm_a.data, L.ssm_d.data, L.ssm_norm.data,
              kv.state_data(l), slots, T, m2_, buf(kM2Xbc, T * m2_.conv_dim()), y);
  be_->matmul(y, T, L.ssm_out, xn);
  if (c_.residual_scale != 1.0f) be_->scale(xn, c_.residual_scale, xn, T * d);  // granite's
  be_->add(x, xn, x, T * d);
}

// x += ffn(norm(x)): SwiGLU down(silu(gate xn) * up xn) (phi3: gate and up from one fused
// matrix), gemma's GeGLU down(gelu(gate xn) * up xn) then its post-norm, gpt2's
// down(gelu(up xn + b_up)) + b_down, or the MoE block.
void Transformer::ffn_block(int l, int64_t T, const TransformerBatch& b, moe::Routing& routing) {
  const LayerWeights& L = layer(l);
  const int64_t d = c_.n_embd;
  float* x = buf(kX, T * d);
  float* xn = buf(kXn, T * d);
  norm(L.ffn_norm, L.ffn_norm_b, x, xn, T);
  float* out = buf(kAtt, T * std::max<int64_t>(d, static_cast<int64_t>(c_.n_head) * c_.head_dim));
  if (L.is_moe()) {
    // smallthinker's router reads the layer's input, kept by forward() before the attention.
    const float* router_x = c_.router_reads_layer_input ? buf(kLayerIn, T * d) : nullptr;
    be_->moe_ffn(L.moe, b.moe_k, b.moe_capacity_factor, xn, router_x, T, out, routing);
  } else {
    const int64_t n_ff = L.ffn_down.n_in;
    float* g = buf(kG, T * n_ff);
    if (c_.ffn_gate_up_fused) {
      // phi3: [gate | up] = ffn_up xn, split into the two halves of each row.
      float* gu = buf(kGateUp, T * 2 * n_ff);
      float* u = buf(kU, T * n_ff);
      be_->matmul(xn, T, L.ffn_up, gu);
      const size_t row = static_cast<size_t>(n_ff) * sizeof(float);
      be_->copy_rows(g, row, gu, 2 * row, row, T);
      be_->copy_rows(u, row, gu + n_ff, 2 * row, row, T);
      be_->swiglu(g, u, g, T * n_ff);
    } else if (!L.ffn_gate.empty()) {
      float* u = buf(kU, T * n_ff);
      const MatrixView w2[2] = {L.ffn_gate, L.ffn_up};
      float* const y2[2] = {g, u};
      be_->matmul_multi(xn, T, w2, y2);
      if (!L.ffn_gate_b.empty()) be_->add_bias(g, L.ffn_gate_b.data, T, n_ff);
      if (!L.ffn_up_b.empty()) be_->add_bias(u, L.ffn_up_b.data, T, n_ff);
      if (c_.ffn_act == FfnActivation::GeluTanh) {
        be_->gelu(g, g, T * n_ff);
        be_->mul(g, u, g, T * n_ff);
      } else {
        be_->swiglu(g, u, g, T * n_ff);
      }
    } else {
      // Ungated: gpt2's family GELU, arcee's and nemotron's squared ReLU, apertus's xIELU.
      be_->matmul(xn, T, L.ffn_up, g);
      if (!L.ffn_up_b.empty()) be_->add_bias(g, L.ffn_up_b.data, T, n_ff);
      if (c_.ffn_act == FfnActivation::ReluSqr)
        be_->relu_sqr(g, g, T * n_ff);
      else if (c_.ffn_act == FfnActivation::XIelu)
        be_->xielu(g, g, T * n_ff, c_.xielu[std::min<size_t>(static_cast<size_t>(l), c_.xielu.size() - 1)]);
      else
        be_->gelu(g, g, T * n_ff);
    }
    be_->matmul(g, T, L.ffn_down, out);
    if (!L.ffn_down_b.empty()) be_->add_bias(out, L.ffn_down_b.data, T, d);
  }
  if (!L.ffn_post_norm.empty()) be_->rms_norm(out, L.ffn_post_norm.data, out, T, d, c_.norm_eps);
  if (c_.residual_scale != 1.0f) be_->scale(out, c_.residual_scale, out, T * d);  // granite
  be_->add(x, out, x, T * d);
  if (c_.parallel_residual) be_->add(x, buf(kPar, T * d), x, T * d);  // the attention's output
}

Transformer::Inputs Transformer::upload_inputs(const TransformerBatch& b, KVCache& kv, bool trunk) {
  const int64_t T = static_cast<int64_t>(b.tokens.size());
  // Inputs in one upload: ids [T] int32, positions [T] int32, each token's convolution
  // predecessors [T, l_cache - 1] int32 (lfm2 only), each token's recurrent state slots [T, 2]
  // int32 (qwen35 only), the positions of every cache row the forward
  // attends to [n_past + T] int32 (sliding-window and ALiBi models only), mask [T, mask_past + T]
  // bytes (when given). The multi-token-prediction block (!trunk) is an attention layer: no
  // convolution or recurrent state.
  const int64_t n_past = kv.size();
  mask_past_ = b.mask ? b.mask_past : 0;
  conv_prev_.clear();
  if (trunk && has_conv_layers_) conv_predecessors(b, n_past);
  dn_slots_.clear();
  if (trunk && has_recurrent_layers_) delta_net_slots(b, kv);
  const size_t ids_bytes = static_cast<size_t>(T) * sizeof(int32_t);
  const size_t prev_bytes = conv_prev_.size() * sizeof(int32_t);
  const size_t slots_bytes = dn_slots_.size() * sizeof(int32_t);
  const size_t rows_bytes = needs_row_positions_ ? static_cast<size_t>(n_past + T) * sizeof(int32_t) : 0;
  const size_t mask_bytes = b.mask ? static_cast<size_t>(T * (mask_past_ + T)) : 0;
  const size_t prev_at = 2 * ids_bytes, slots_at = prev_at + prev_bytes, rows_at = slots_at + slots_bytes,
               mask_at = rows_at + rows_bytes;
  auto* io = reinterpret_cast<uint8_t*>(buf(kIo, (mask_at + mask_bytes + sizeof(float) - 1) / sizeof(float)));
  be_->upload(io, b.tokens.data(), ids_bytes);
  be_->upload(io + ids_bytes, b.positions.data(), ids_bytes);
  if (prev_bytes) be_->upload(io + prev_at, conv_prev_.data(), prev_bytes);
  if (slots_bytes) be_->upload(io + slots_at, dn_slots_.data(), slots_bytes);
  if (needs_row_positions_) {
    row_positions_.resize(static_cast<size_t>(n_past + T));
    for (int64_t r = 0; r < n_past; ++r) row_positions_[r] = kv.position(static_cast<int>(r));
    std::copy(b.positions.begin(), b.positions.end(), row_positions_.begin() + n_past);
    be_->upload(io + rows_at, row_positions_.data(), rows_bytes);
  }
  if (b.mask) be_->upload(io + mask_at, b.mask, mask_bytes);
  Inputs in;
  in.ids = reinterpret_cast<const int32_t*>(io);
  in.positions = reinterpret_cast<const int32_t*>(io + ids_bytes);
  in.conv_prev = prev_bytes ? reinterpret_cast<const int32_t*>(io + prev_at) : nullptr;
  in.dn_slots = slots_bytes ? reinterpret_cast<const int32_t*>(io + slots_at) : nullptr;
  in.row_positions = needs_row_positions_ ? reinterpret_cast<const int32_t*>(io + rows_at) : nullptr;
  in.mask = b.mask ? io + mask_at : nullptr;
  return in;
}

Rows Transformer::forward(const TransformerBatch& b, KVCache& kv, std::vector<moe::Routing>& routing) {
  const int64_t T = static_cast<int64_t>(b.tokens.size());
  const int64_t d = c_.n_embd;
  const Inputs in = upload_inputs(b, kv, true);
  const int32_t* ids = in.ids;
  const int32_t* positions = in.positions;
  const int32_t* conv_prev = in.conv_prev;
  const int32_t* dn_slots = in.dn_slots;
  const int32_t* row_positions = in.row_positions;
  const uint8_t* mask = in.mask;

  // mistral3's and llama4's attention temperature per token (all 1 below the floor, so none is
  // applied there), as llama.cpp's llm_graph_input_attn_temp computes it.
  temp_factors_.clear();
  if (c_.attn_temp_scale != 0.0f) {
    temp_factors_.resize(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t)
      temp_factors_[t] = static_cast<float>(
          std::log(std::floor((static_cast<float>(b.positions[t]) + c_.attn_temp_offset) / c_.attn_temp_floor) + 1.0) *
              c_.attn_temp_scale +
          1.0);
  }

  // Embeddings: one row of token_embd per token (+ the learned position row for gpt2; times
  // sqrt(n_embd) for gemma).
  float* x = buf(kX, T * d);
  float* xn = buf(kXn, T * d);
  be_->get_rows(w_.token_embd, ids, T, x);
  if (c_.learned_positions()) {
    be_->get_rows(w_.position_embd, positions, T, xn);
    be_->add(x, xn, x, T * d);
  }
  if (c_.embd_scale != 1.0f) be_->scale(x, c_.embd_scale, x, T * d);
  if (c_.embd_norm)  // bloom: LayerNorm of the embedding, in place
    be_->layer_norm(x, w_.token_embd_norm.data, w_.token_embd_norm_b.data, x, T, d, c_.norm_eps);

  // phi3's LongRoPE factors: the long set when the context (the cache's capacity) exceeds the
  // original one, as llama.cpp picks by its n_ctx_seq.
  rope_factors_ = nullptr;
  if (c_.rope_long_short_factors)
    rope_factors_ = kv.capacity() > c_.rope_n_ctx_orig ? w_.rope_long.data : w_.rope_short.data;

  routing.assign(static_cast<size_t>(c_.n_layer), moe::Routing{});
  // Captured layer inputs: token t's row [x_{l_0} | x_{l_1} | ...] (an EAGLE-3 head's features).
  const int64_t K = static_cast<int64_t>(b.capture_layers.size());
  const size_t row = static_cast<size_t>(d) * sizeof(float), feat_row = static_cast<size_t>(K) * row;
  float* feat = K > 0 ? buf(kFeat, T * K * d) : nullptr;
  auto capture = [&](int l, const float* rows) {
    for (int64_t k = 0; k < K; ++k)
      if (b.capture_layers[k] == l) be_->copy_rows(feat + k * d, feat_row, rows, row, row, T);
  };
  for (int l = 0; l < b.n_layers; ++l) {
    if (K > 0) capture(l, buf(kX, T * d));
    if (c_.router_reads_layer_input && w_.layers[l].is_moe()) {
      const size_t row = static_cast<size_t>(d) * sizeof(float);
      be_->copy_rows(buf(kLayerIn, T * d), row, buf(kX, T * d), row, row, T);
    }
    if (!c_.has_mixer(l))
      ;  // nemotron_h's MLP layers
    else if (c_.is_conv_layer(l))
      conv_block(l, T, conv_prev, kv);
    else if (c_.is_recurrent_layer(l) && c_.recurrent_mixer == RecurrentMixer::Mamba2)
      mamba2_block(l, T, dn_slots, kv);
    else if (c_.is_recurrent_layer(l))
      delta_net_block(l, T, dn_slots, kv);
    else if (c_.is_mla())
      mla_attention_block(l, T, positions, mask, kv);
    else
      attention_block(l, T, positions, row_positions, mask, kv);
    if (c_.has_ffn(l)) ffn_block(l, T, b, routing[l]);  // mamba2's, nemotron_h's layers: one sublayer
    // nanbeige: output_norm at the end of every pass over the blocks but the last.
    if (c_.n_layer_phys > 0 && c_.loop_final_norm && (l + 1) % c_.n_layer_phys == 0 && l + 1 < c_.n_layer) {
      float* x = buf(kX, T * d);
      be_->rms_norm(x, w_.output_norm.data, x, T, d, c_.norm_eps);
    }
  }

  if (c_.is_dflash()) return draft_head(b, T, kv);  // a DFlash block's logits, through d2t
  if (K == 0) return finish(b, T, w_.output_norm, w_.output_norm_b, w_.output, kv);
  // Layer n_layer: the final hidden rows after the output norm, which finish computes for every
  // token when asked.
  const bool last = std::find(b.capture_layers.begin(), b.capture_layers.end(), c_.n_layer) != b.capture_layers.end();
  TransformerBatch bb = b;
  bb.hidden_all = bb.hidden_all || last;
  const Rows logits = finish(bb, T, w_.output_norm, w_.output_norm_b, w_.output, kv);
  if (last) capture(c_.n_layer, hidden_.data);
  hidden_ = Rows{feat, T, K * d, be_.get()};
  return logits;
}

// The final norm and head, for all tokens or only the last one (the norm over every token when
// the batch asks for the hidden rows), then the cache counts the new tokens.
Rows Transformer::finish(const TransformerBatch& b, int64_t T, const VectorView& norm_w, const VectorView& norm_b,
                         const MatrixView& head, KVCache& kv) {
  const int64_t d = c_.n_embd;
  const int64_t first = b.logits_all ? 0 : T - 1;
  const int64_t first_h = b.hidden_all ? 0 : first;
  const int64_t n_out = T - first;
  float* x = buf(kX, T * d);
  float* xn = buf(kXn, T * d);
  norm(norm_w, norm_b, x + first_h * d, xn, T - first_h);
  hidden_ = b.hidden_all ? Rows{xn, T, d, be_.get()} : Rows{};
  // A reduced vocabulary computes the head's first rows only (its rows are independent outputs:
  // the same values as the full head's first columns).
  const int64_t n_vocab = b.head_rows > 0 ? b.head_rows : c_.n_vocab;
  float* logits = buf(kLogits, static_cast<size_t>(n_out) * n_vocab);
  be_->matmul(xn + (first - first_h) * d, n_out, head.rows(0, n_vocab), logits);
  if (!w_.output_b.empty()) be_->add_bias(logits, w_.output_b.data, n_out, n_vocab);  // phi2
  if (c_.logit_scale != 1.0f)  // granite: llama.cpp scales by the float reciprocal
    be_->scale(logits, 1.0f / c_.logit_scale, logits, static_cast<int64_t>(n_out) * n_vocab);
  if (c_.logit_mult != 1.0f)  // command-r, cohere2
    be_->scale(logits, c_.logit_mult, logits, static_cast<int64_t>(n_out) * n_vocab);
  if (c_.final_logit_softcap > 0.0f)
    be_->softcap(logits, c_.final_logit_softcap, logits, static_cast<int64_t>(n_out) * n_vocab);
  kv.append(b.positions);
  return Rows{logits, n_out, n_vocab, be_.get()};
}

// [rmsnorm(embed(ids); embed_norm) | rmsnorm(h; h_norm)] in kMtpCat ([T, 2 n_embd]), the input of a
// draft head (an MTP block's eh_proj, an EAGLE-3 head's attention); kXn keeps rmsnorm(h; h_norm).
const float* Transformer::token_and_row(const MatrixView& embed, const VectorView& embed_norm, const float* h,
                                        const VectorView& h_norm, const int32_t* ids, int64_t T) {
  const int64_t d = c_.n_embd;
  const size_t row = static_cast<size_t>(d) * sizeof(float);
  float* e = buf(kXn, T * d);
  float* cat = buf(kMtpCat, T * 2 * d);
  be_->get_rows(embed, ids, T, e);
  be_->rms_norm(e, embed_norm.data, e, T, d, c_.norm_eps);
  be_->copy_rows(cat, 2 * row, e, row, row, T);
  be_->rms_norm(h, h_norm.data, e, T, d, c_.norm_eps);
  be_->copy_rows(cat + d, 2 * row, e, row, row, T);
  return cat;
}

// The multi-token-prediction block (llama.cpp's graph_mtp of deepseek2, glm4moe, qwen35):
//   x = eh_proj [rmsnorm(embed(t); enorm) | rmsnorm(h; hnorm)]
//   x = the architecture's decoder layer n_layer (attention, then the feed-forward or experts)
//   hidden = rmsnorm(x; head_norm);  logits = head hidden
// Its cache holds that layer's rows only (the trunk's layers are empty in it).
Rows Transformer::forward_mtp(const TransformerBatch& b, const float* h, KVCache& kv, moe::Routing& routing) {
  const int64_t T = static_cast<int64_t>(b.tokens.size());
  const int64_t d = c_.n_embd;
  const int l = c_.n_layer;
  const NextnWeights& N = w_.nextn;
  const Inputs in = upload_inputs(b, kv, false);
  temp_factors_.clear();
  rope_factors_ = nullptr;
  const float* cat = token_and_row(N.embed, N.enorm, h, N.hnorm, in.ids, T);
  be_->matmul(cat, T, N.eh_proj, buf(kX, T * d));
  if (c_.is_mla())
    mla_attention_block(l, T, in.positions, in.mask, kv);
  else
    attention_block(l, T, in.positions, in.row_positions, in.mask, kv);
  ffn_block(l, T, b, routing);
  return finish(b, T, N.head_norm, VectorView{}, N.head, kv);
}


void Transformer::share_target(const MatrixView& token_embd, const MatrixView& output) {
  if (w_.token_embd.empty()) w_.token_embd = token_embd;
  if (w_.output.empty()) w_.output = output;
}

// An EAGLE-3 head's fusion of the target's features (llama.cpp's eagle3 encoder graph):
// g = fc(rmsnorm(f; enc.output_norm)) with norm_before_fc, else fc(f).
Rows Transformer::eagle3_fuse(const float* features, int64_t T) {
  const Eagle3Weights& E = w_.eagle3;
  const int64_t F = c_.head_feature_width();
  const float* in = features;
  if (!E.enc_norm.empty()) {
    float* normed = buf(kFeat, T * F);
    be_->rms_norm(features, E.enc_norm.data, normed, T, F, c_.norm_eps);
    in = normed;
  }
  float* g = buf(kFused, T * c_.n_embd);
  be_->matmul(in, T, E.fc, g);
  return Rows{g, T, c_.n_embd, be_.get()};
}

// An EAGLE-3 head's decoder (llama.cpp's eagle3 decoder graph; Li et al. 2025, EAGLE-3):
//   cat = [rmsnorm(embed(t); attn_norm) | rmsnorm(g; hidden_norm)]      [T, 2 n_embd]
//   x = g (norm_before_residual: rmsnorm(g; hidden_norm)) + attn_output(attention(q, k, v of cat))
//   x += ffn(rmsnorm(x; ffn_norm))                                      (SwiGLU)
//   hidden = x (the next step's g);  logits = output(rmsnorm(x; output_norm)), through d2t
Rows Transformer::forward_eagle3(const TransformerBatch& b, const float* g, KVCache& kv, moe::Routing& routing) {
  const int64_t T = static_cast<int64_t>(b.tokens.size());
  const int64_t d = c_.n_embd;
  const LayerWeights& L = w_.layers[0];
  const Eagle3Weights& E = w_.eagle3;
  const Inputs in = upload_inputs(b, kv, true);
  temp_factors_.clear();
  rope_factors_ = nullptr;
  const size_t row = static_cast<size_t>(d) * sizeof(float);
  const float* cat = token_and_row(w_.token_embd, L.attn_norm, g, E.hidden_norm, in.ids, T);
  // The residual: g, or its normed row (token_and_row leaves it in kXn).
  be_->copy_rows(buf(kX, T * d), row, c_.eagle3_norm_before_residual ? buf(kXn, T * d) : g, row, row, T);
  attention_block(0, T, in.positions, in.row_positions, in.mask, kv, cat);
  ffn_block(0, T, b, routing);
  const Rows logits = draft_head(b, T, kv);
  hidden_ = b.hidden_all ? Rows{buf(kX, T * d), T, d, be_.get()} : Rows{};
  return logits;
}

// A draft head's logits: the draft vocabulary's rows of the head, then scattered into the target's
// through d2t (-inf elsewhere) when it has one.
Rows Transformer::draft_head(const TransformerBatch& b, int64_t T, KVCache& kv) {
  const Eagle3Weights& E = w_.eagle3;
  const bool scatter = E.d2t_host != nullptr;
  TransformerBatch hb = b;
  hb.hidden_all = false;
  if (scatter) hb.head_rows = c_.n_draft_vocab;
  const Rows draft = finish(hb, T, w_.output_norm, VectorView{}, w_.output, kv);
  if (!scatter) return draft;
  float* logits = buf(kDraftLogits, static_cast<size_t>(draft.rows) * c_.n_vocab);
  be_->scatter_cols(draft.data, draft.rows, draft.cols, reinterpret_cast<const int32_t*>(E.d2t.data), logits, c_.n_vocab,
                    -INFINITY);
  return Rows{logits, draft.rows, c_.n_vocab, be_.get()};
}

// A DFlash draft's cache rows from its target's features (llama.cpp's dflash decoder graph on an
// embedding batch, "KV cache injection"):
//   g = rmsnorm(fc f; enc.output_norm)
//   for each layer l: k = rope(rmsnorm_per_head(wk_l g; attn_k_norm_l)), v = wv_l g
// written at the cache's next rows; nothing else of the layers runs.
void Transformer::dflash_inject(const float* features, std::span<const int32_t> positions, KVCache& kv) {
  const int64_t T = static_cast<int64_t>(positions.size());
  const int64_t d = c_.n_embd, kvd = c_.kv_dim();
  const Eagle3Weights& E = w_.eagle3;
  TransformerBatch b;
  b.tokens = positions;  // uploaded beside the positions, never read
  b.positions = positions;
  const Inputs in = upload_inputs(b, kv, false);
  float* g = buf(kFused, T * d);
  be_->matmul(features, T, E.fc, g);
  be_->rms_norm(g, E.hidden_norm.data, g, T, d, c_.norm_eps);
  const int64_t n_past = kv.size();
  float* k_new = buf(kK, T * kvd);
  float* v_new = buf(kV, T * kvd);
  for (int l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& L = layer(l);
    const MatrixView w2[2] = {L.wk, L.wv};
    float* const y2[2] = {k_new, v_new};
    be_->matmul_multi(g, T, w2, y2);
    be_->rms_norm(k_new, L.attn_k_norm.data, k_new, T * c_.n_head_kv, c_.head_dim, c_.norm_eps);
    RopeParams rp = rope_[l];
    rp.n_head = c_.n_head_kv;
    be_->rope(k_new, T, in.positions, rp);
    const KVLayerLayout& layout = kv.layout(l);
    const size_t k_row = kv.k_row_bytes(l), v_row = kv.v_row_bytes(l);
    be_->convert_rows(k_new, T, kvd, layout.k_type, static_cast<uint8_t*>(kv.k_data(l)) + n_past * k_row, k_row);
    be_->convert_rows(v_new, T, kvd, layout.v_type, static_cast<uint8_t*>(kv.v_data(l)) + n_past * v_row, v_row);
  }
  kv.append(positions);
}

}  // namespace specmoe::core
