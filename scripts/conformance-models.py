#!/usr/bin/env python3
"""Writes random-weight GGUF models of qwen3moe, olmoe, phi3, gemma2, deepseek2, granite,
granitemoe, olmo2, OLMo 3 (olmo2 with windows), smollm3, stablelm, starcoder2, gemma, gptneox, phi2,
ernie4_5, exaone, exaone4, EXAONE 4.0 32B's form (exaone4 with 64 layers), mistral3, command-r,
cohere2, internlm2, qwen2vl, seed_oss, minicpm (with its multiplier keys and without), glm4 (with M-RoPE
sections and without), hunyuan-dense, maincoder, apertus, nanbeige (looped, with and without the norm between passes), qwen3vl, qwen3vlmoe, llama4 (and
its Maverick form), mistral4 (deepseek2's graph with an attention temperature), nemotron_h_moe, afmoe, deepseek, dots1, glm4moe, ernie4_5-moe,
bailingmoe2, hunyuan-moe, maple, arcee, nemotron, jais2, spark2_5, starcoder, gpt-oss, minimax-m2, bloom, mpt, refact, jais, falcon (7B's and 40B's forms), olmo, baichuan (7B's and 13B's forms), dbrx, phimoe, qwen (Qwen 1), xverse, orion, codeshell, plamo, chatglm, exaone-moe, lfm2, lfm2moe, smallthinker (with
its sliding-window form and without) qwen35 (by its default interval and by attention.recurrent_layers), qwen35moe, qwen3next (with attn_qkv and with ssm_in), mellum, bailingmoe, granitehybrid (dense and MoE), mamba2 and nemotron_h in llama.cpp's layout with the `gguf` Python package (gguf-py, maintained in llama.cpp's repository), for
scripts/conformance.sh to compare specmoe with llama.cpp on (perplexity with F16 weights, and
after llama-quantize to Q8_0 and Q4_K_M). It shares no code with specmoe's synth writer: keys and
tensor names come from llama.cpp's src/llama-arch.cpp and src/models/<arch>.cpp, shapes from
their create_tensor calls (GGUF ne order; numpy shapes are reversed), and the vocabulary is a
SentencePiece-style byte vocabulary both tokenizers read the same way.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install gguf numpy
    /tmp/venv/bin/python scripts/conformance-models.py OUT_DIR [--f32] [ARCH...]

Writes OUT_DIR/<arch>-f16.gguf, or with --f32 OUT_DIR/<arch>-f32.gguf (the same weights, rounded to
half in both cases first so the two files differ only in storage; for the reference-forward test
tests/unit/conformance_models_test.cpp). Matrices are F16 (the routers' ffn_gate_inp and lfm2's
short-convolution taps F32, as llama.cpp's converter and quantizer keep them), 1-D tensors F32;
every weight is N(0, 1/n_in) so activations stay at unit scale, the norms are 1 + noise (a
skipped norm shows), and the head is scaled for peaked but not one-hot distributions. Row widths
are multiples of 256 where the architecture allows, so Q4_K_M keeps K-quants.
"""
import os
import sys

import numpy as np
import gguf

N_VOCAB = 512  # <unk> <s> </s>, 256 byte tokens, padding


def byte_vocab(w):
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    tokens += ["<pad_%d>" % i for i in range(len(tokens), N_VOCAB)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * (N_VOCAB - 259)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * N_VOCAB)
    w.add_token_types(types)
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    w.add_bool("tokenizer.ggml.add_space_prefix", False)


class Model:
    def __init__(self, path, arch, seed, dtype):
        self.w = gguf.GGUFWriter(path, arch)
        self.dtype = dtype
        self.arch = arch
        self.rng = np.random.default_rng(seed)

    def u32(self, key, v):
        self.w.add_uint32(f"{self.arch}.{key}", int(v))

    def f32(self, key, v):
        self.w.add_float32(f"{self.arch}.{key}", float(v))

    def matrix(self, name, ne, scale=1.0, dtype=None):
        # ne: GGUF order (ne[0] = n_in); numpy holds the reverse.
        a = self.rng.standard_normal(tuple(reversed(ne)), dtype=np.float32) * (scale / np.sqrt(ne[0]))
        if dtype is None:  # the file's matrix type, from the same half-precision values
            a = a.astype(np.float16).astype(self.dtype)
        self.w.add_tensor(name, a.astype(dtype or self.dtype))

    def norm(self, name, n, base=1.0, noise=0.3):
        self.w.add_tensor(name, (base + noise * self.rng.standard_normal(n)).astype(np.float32))

    def common(self, n_embd, n_layer, n_head, n_head_kv, n_ctx=4096, eps=1e-6, embd_scale=None,
               out_norm="output_norm"):
        # n_head_kv: one count, or a list of one per layer (an array key, as lfm2's converter writes)
        self.u32("context_length", n_ctx)
        self.u32("embedding_length", n_embd)
        self.u32("block_count", n_layer)
        self.u32("attention.head_count", n_head)
        if isinstance(n_head_kv, list):
            self.w.add_array(f"{self.arch}.attention.head_count_kv", n_head_kv)
        else:
            self.u32("attention.head_count_kv", n_head_kv)
        self.f32("attention.layer_norm_rms_epsilon", eps)
        byte_vocab(self.w)
        scale = np.sqrt(n_embd) if embd_scale is None else embd_scale  # unit-variance rows by default
        self.matrix("token_embd.weight", [n_embd, N_VOCAB], scale=scale)
        self.norm(out_norm + ".weight", n_embd)

    def moe(self, ff, E, k, expert_ff=None):
        # feed_forward_length, expert_feed_forward_length (when the arch has it), expert_count and
        # expert_used_count, in that order.
        self.u32("feed_forward_length", ff)
        if expert_ff is not None:
            self.u32("expert_feed_forward_length", expert_ff)
        self.u32("expert_count", E)
        self.u32("expert_used_count", k)

    def head(self, n_embd):
        self.matrix("output.weight", [n_embd, N_VOCAB], scale=1.5)

    def experts(self, p, n_embd, ff, E, router=True):
        if router:
            self.matrix(p + "ffn_gate_inp.weight", [n_embd, E], scale=2.0, dtype=np.float32)
        self.matrix(p + "ffn_gate_exps.weight", [n_embd, ff, E])
        self.matrix(p + "ffn_up_exps.weight", [n_embd, ff, E])
        self.matrix(p + "ffn_down_exps.weight", [ff, n_embd, E], scale=0.7)

    def write(self):
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()


def qwen3moe(path, dtype, arch="qwen3moe", seed=1, base=1000000.0, sections=None, shape=(4, 128, 16, 4), keys=None):
    # llama_model_qwen3moe: qwen3's attention (QK-norm per head, heads of key_length) and experts of
    # expert_feed_forward_length, softmax top-k renormalised (norm_w true in its graph).
    # llama_model_qwen3vlmoe (Qwen3-VL-30B-A3B's language model on text) the same with interleaved
    # M-RoPE sections. shape: layers, head width, experts, experts per token; keys: the
    # architecture's own keys (mellum's).
    (L, hd, E, k), d, H, Hkv, ff = shape, 256, 4, 2, 256
    m = Model(path, arch, seed, dtype)
    if sections:
        m.w.add_array(f"{arch}.rope.dimension_sections", sections)
    m.common(d, L, H, Hkv)
    m.moe(ff * k, E, k, ff)
    m.u32("attention.key_length", hd)
    m.u32("attention.value_length", hd)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", base)
    if keys:
        keys(m)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        m.matrix(p + "attn_q.weight", [d, H * hd])
        m.matrix(p + "attn_k.weight", [d, Hkv * hd])
        m.matrix(p + "attn_v.weight", [d, Hkv * hd])
        m.norm(p + "attn_q_norm.weight", hd)
        m.norm(p + "attn_k_norm.weight", hd)
        m.matrix(p + "attn_output.weight", [H * hd, d], scale=0.7)
        m.norm(p + "ffn_norm.weight", d)
        m.experts(p, d, ff, E)
    m.write()


def mellum(path, dtype):
    # llama_model_mellum (Mellum 2, JetBrains' 12B-A2.5B code model): qwen3moe's block (per-head
    # QK-norm before split-halves RoPE, experts of expert_feed_forward_length under a softmax top-k,
    # renormalised; unscaled: its loader reads no scale) with windows of 64 positions on every layer
    # but each fourth (the default period) and YaRN (factor 4 over an original context of 128,
    # attn_factor 1.25), which the global layers carry and the local ones do not (its graph rotates
    # them with the global base, unscaled). 5 layers of heads of 64, 8 experts top-2.
    def keys(m):
        m.u32("attention.sliding_window", 64)
        m.w.add_string("mellum.rope.scaling.type", "yarn")
        m.f32("rope.scaling.factor", 4.0)
        m.u32("rope.scaling.original_context_length", 128)
        m.f32("rope.scaling.attn_factor", 1.25)
    qwen3moe(path, dtype, "mellum", 91, 10000.0, shape=(5, 64, 8, 2), keys=keys)


def maple(path, dtype):
    # llama_model_maple: qwen3moe's block (per-head QK-norm, split-halves RoPE, experts of
    # expert_feed_forward_length under a softmax top-k, renormalised, unscaled) with windows of 64
    # positions on the layers attention.sliding_window_pattern flags (required, an array), RoPE on
    # those layers only (with rope.freq_base_swa) and none on the global ones, and each layer's SwiGLU
    # clamped at swiglu_clamp_exp (layer 1's 0: plain SwiGLU). 5 layers of heads of 64, 8 experts top-2.
    def keys(m):
        m.u32("attention.sliding_window", 64)
        m.w.add_sliding_window_pattern([True, True, False, True, False])
        m.f32("rope.freq_base_swa", 5000.0)
        m.w.add_swiglu_clamp_exp([1.0, 0.0, 1.5, 0.75, 1.25])
    qwen3moe(path, dtype, "maple", 59, 10000.0, shape=(5, 64, 8, 2), keys=keys)


def bailingmoe(path, dtype):
    # llama_model_bailingmoe (Ling-lite / Ling-plus, v1): llama's attention (NORM RoPE, heads of
    # rope.dimension_count) with experts in every layer (a leading_dense_block_count of 1 that its
    # graph ignores), 8 experts of 256 top-2 under a softmax with raw weights (expert_weights_norm
    # absent: no) times expert_weights_scale 2, and 2 ungated shared experts of the expert width.
    d, L, H, Hkv, hd, E, k, ff, n_sh = 256, 4, 4, 2, 64, 8, 2, 256, 2
    m = Model(path, "bailingmoe", 92, dtype)
    m.common(d, L, H, Hkv)
    m.moe(ff * k, E, k, ff)
    m.u32("expert_shared_count", n_sh)
    m.u32("leading_dense_block_count", 1)
    m.f32("expert_weights_scale", 2.0)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "ffn_norm.weight", d)
        m.experts(p, d, ff, E)
        m.matrix(p + "ffn_gate_shexp.weight", [d, ff * n_sh])
        m.matrix(p + "ffn_up_shexp.weight", [d, ff * n_sh])
        m.matrix(p + "ffn_down_shexp.weight", [ff * n_sh, d], scale=0.7)
    m.write()


def olmoe(path, dtype):
    # llama_model_olmoe: attn_q_norm / attn_k_norm over the whole projections, experts of
    # feed_forward_length, raw softmax weights (norm_w false).
    d, L, H, E, k, ff = 256, 4, 4, 8, 2, 256
    m = Model(path, "olmoe", 2, dtype)
    m.common(d, L, H, H)
    m.moe(ff, E, k)
    m.u32("rope.dimension_count", d // H)
    m.f32("rope.freq_base", 10000.0)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        for t in ("q", "k", "v"):
            m.matrix(p + f"attn_{t}.weight", [d, d])
        m.norm(p + "attn_q_norm.weight", d)
        m.norm(p + "attn_k_norm.weight", d)
        m.matrix(p + "attn_output.weight", [d, d], scale=0.7)
        m.norm(p + "ffn_norm.weight", d)
        m.experts(p, d, ff, E)
    m.write()


def longrope_factors(m, hd):
    # LongRoPE's per-pair frequency divisors [hd / 2] (phi3, phimoe): short ones near 1, long ones
    # growing to 25 for the slow pairs.
    half = hd // 2
    u = np.arange(half) / (half - 1)
    m.w.add_tensor("rope_factors_long.weight", (1 + 24 * u * u).astype(np.float32))
    m.w.add_tensor("rope_factors_short.weight", (1 + 0.25 * u).astype(np.float32))


def phi3(path, dtype):
    # llama_model_phi3: fused attn_qkv, ffn_up = [gate | up] of 2 * n_ff (LLM_FFN_SWIGLU), LongRoPE
    # rope_factors_long / rope_factors_short [n_rot / 2] picked by n_ctx_seq > original context
    # (256 here: a context of 256 runs the short factors, 512 the long ones), the converter's
    # attn_factor sqrt(1 + ln(ctx / orig) / ln(orig)) and an (ignored) sliding_window of 0.
    d, L, H, Hkv, ff, n_ctx, orig = 256, 4, 4, 2, 512, 8192, 256
    hd = d // H
    m = Model(path, "phi3", 3, dtype)
    m.common(d, L, H, Hkv, n_ctx=n_ctx)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    m.u32("rope.scaling.original_context_length", orig)
    m.f32("rope.scaling.attn_factor", np.sqrt(1 + np.log(n_ctx / orig) / np.log(orig)))
    m.u32("attention.sliding_window", 0)
    longrope_factors(m, hd)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        m.matrix(p + "attn_qkv.weight", [d, d + 2 * Hkv * hd])
        m.matrix(p + "attn_output.weight", [d, d], scale=0.7)
        m.norm(p + "ffn_norm.weight", d)
        m.matrix(p + "ffn_up.weight", [d, 2 * ff])
        m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)
    m.write()


def gemma2(path, dtype):
    # llama_model_gemma2: embedding times sqrt(n_embd), post-norms (the file's weights already
    # hold Gemma's 1 +), GeGLU, the head tied to token_embd, sliding windows of 64 on every second
    # layer (default pattern 2), soft-capping of scores at 1.5 and logits at 4 (explicit keys, tight
    # enough to bite on random weights).
    d, L, H, Hkv, hd, ff = 256, 4, 4, 2, 64, 512
    m = Model(path, "gemma2", 4, dtype)
    m.common(d, L, H, Hkv, embd_scale=1.0)  # Gemma scales the embedding by sqrt(n_embd) itself
    m.u32("feed_forward_length", ff)
    m.u32("attention.key_length", hd)
    m.u32("attention.value_length", hd)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    m.u32("attention.sliding_window", 64)
    m.f32("attn_logit_softcapping", 1.5)
    m.f32("final_logit_softcapping", 4.0)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        m.matrix(p + "attn_q.weight", [d, H * hd])
        m.matrix(p + "attn_k.weight", [d, Hkv * hd])
        m.matrix(p + "attn_v.weight", [d, Hkv * hd])
        m.matrix(p + "attn_output.weight", [H * hd, d], scale=0.7)
        m.norm(p + "post_attention_norm.weight", d)
        m.norm(p + "ffn_norm.weight", d)
        m.matrix(p + "ffn_gate.weight", [d, ff])
        m.matrix(p + "ffn_up.weight", [d, ff])
        m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)
        m.norm(p + "post_ffw_norm.weight", d)
    m.write()


def deepseek2(path, dtype, lite, arch="deepseek2"):
    # llama_model_deepseek2 with MLA in the converter's split form: attn_kv_a_mqa {n_embd, rank +
    # rope}, attn_kv_a_norm, attn_k_b {nope, rank, H}, attn_v_b {rank, v, H}; a q LoRA (attn_q_a,
    # attn_q_a_norm, attn_q_b) or attn_q (q_lora_rank 0); the first layer dense; 16 routed experts
    # top-4 and 2 shared ones (ffn_*_shexp of 2 x the expert width). Full: softmax routing over 4
    # groups keeping 2, weights scaled by 2 and not renormalised, YaRN (factor 4, original context
    # 256, yarn_log_multiplier 0.1 * mscale_all_dim 0.707). Lite: no groups, scale or YaRN.
    # arch "mistral4": the full form under that name (llama.cpp's deepseek2 graph with llama_context's
    # YaRN magnitude of any other architecture) with Mistral Large 3's attention temperature
    # (attention.temperature_scale 0.5 from temperature_length 128 on).
    d, L, H, rank, rope, nope, v, E, k, ff, dense_ff = 256, 4, 4, 256, 64, 128, 128, 16, 4, 256, 512
    m = Model(path, arch, 5 if lite else 6, dtype)
    m.common(d, L, H, 1, n_ctx=8192)
    m.u32("vocab_size", N_VOCAB)
    m.u32("feed_forward_length", dense_ff)
    m.u32("leading_dense_block_count", 1)
    m.u32("expert_feed_forward_length", ff)
    m.u32("expert_count", E)
    m.u32("expert_used_count", k)
    m.u32("expert_shared_count", 2)
    m.u32("attention.q_lora_rank", 0 if lite else 256)
    m.u32("attention.kv_lora_rank", rank)
    m.u32("attention.key_length", rank + rope)
    m.u32("attention.value_length", rank)
    m.u32("attention.key_length_mla", nope + rope)
    m.u32("attention.value_length_mla", v)
    m.u32("rope.dimension_count", rope)
    m.f32("rope.freq_base", 10000.0)
    if not lite:
        m.u32("expert_gating_func", 1)
        m.u32("expert_group_count", 4)
        m.u32("expert_group_used_count", 2)
        m.f32("expert_weights_scale", 2.0)
        m.w.add_string(f"{arch}.rope.scaling.type", "yarn")
        m.f32("rope.scaling.factor", 4.0)
        m.u32("rope.scaling.original_context_length", 256)
        m.f32("rope.scaling.yarn_log_multiplier", 0.0707)
    if arch == "mistral4":
        m.f32("attention.temperature_scale", 0.5)
        m.u32("attention.temperature_length", 128)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        if lite:
            m.matrix(p + "attn_q.weight", [d, H * (nope + rope)])
        else:
            m.matrix(p + "attn_q_a.weight", [d, 256])
            m.norm(p + "attn_q_a_norm.weight", 256)
            m.matrix(p + "attn_q_b.weight", [256, H * (nope + rope)])
        m.matrix(p + "attn_kv_a_mqa.weight", [d, rank + rope])
        m.norm(p + "attn_kv_a_norm.weight", rank)
        m.matrix(p + "attn_k_b.weight", [nope, rank, H])
        m.matrix(p + "attn_v_b.weight", [rank, v, H])
        m.matrix(p + "attn_output.weight", [H * v, d], scale=0.7)
        m.norm(p + "ffn_norm.weight", d)
        if l == 0:
            m.matrix(p + "ffn_gate.weight", [d, dense_ff])
            m.matrix(p + "ffn_up.weight", [d, dense_ff])
            m.matrix(p + "ffn_down.weight", [dense_ff, d], scale=0.7)
        else:
            m.experts(p, d, ff, E)
            m.matrix(p + "ffn_gate_shexp.weight", [d, 2 * ff])
            m.matrix(p + "ffn_up_shexp.weight", [d, 2 * ff])
            m.matrix(p + "ffn_down_shexp.weight", [2 * ff, d], scale=0.7)
    m.write()


def deepseek_style(path, dtype, arch, seed, keys, qk_norm=False, fused_qkv=False, qkv_bias=False, out_bias=False,
                   rope_dims=None, ffn_norm="ffn_norm", shared=0, sel_bias=None, nextn=0, mha=False):
    # The DeepSeek-style MoE families (llama_model_deepseek, _dots1, _glm4_moe, _ernie4_5_moe,
    # _bailingmoe2): 4 layers of 256, heads 4/2 of 64, layer 0 a dense SwiGLU of 512
    # (leading_dense_block_count 1), then 16 routed experts of 256, top-4, and `shared` ungated
    # shared-expert rows (ffn_*_shexp), an exp_probs_b selection bias of spread sel_bias; `keys`
    # writes the router's keys. nextn: multi-token-prediction blocks counted by block_count, with
    # no tensors (llama.cpp skips them). mha: as many KV heads as heads (llama.cpp binds dots1's
    # attn_k / attn_v with n_head heads, as dots.llm1 has).
    d, L, H, Hkv, hd, E, k, ff, dense_ff = 256, 4, 4, 2, 64, 16, 4, 256, 512
    if mha:
        Hkv = H
    m = Model(path, arch, seed, dtype)
    m.common(d, L + nextn, H, Hkv)
    if nextn:
        m.u32("nextn_predict_layers", nextn)
    m.u32("feed_forward_length", dense_ff)
    m.u32("leading_dense_block_count", 1)
    m.u32("expert_feed_forward_length", ff)
    m.u32("expert_count", E)
    m.u32("expert_used_count", k)
    m.u32("rope.dimension_count", rope_dims or hd)
    m.f32("rope.freq_base", 10000.0)
    keys(m)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        if fused_qkv:
            m.matrix(p + "attn_qkv.weight", [d, (H + 2 * Hkv) * hd])
            m.matrix(p + "attn_output.weight", [H * hd, d], scale=0.7)
        else:
            dense_attention(m, p, d, H, Hkv, hd, bias=qkv_bias, out_bias=out_bias)
        if qk_norm:
            m.norm(p + "attn_q_norm.weight", hd)
            m.norm(p + "attn_k_norm.weight", hd)
        m.norm(p + ffn_norm + ".weight", d)
        if l == 0:
            swiglu(m, p, d, dense_ff)
            continue
        m.experts(p, d, ff, E)
        if sel_bias:
            m.norm(p + "exp_probs_b.bias", E, base=0.0, noise=sel_bias)
        if shared:
            m.matrix(p + "ffn_gate_shexp.weight", [d, shared])
            m.matrix(p + "ffn_up_shexp.weight", [d, shared])
            m.matrix(p + "ffn_down_shexp.weight", [shared, d], scale=0.7)
    m.write()


def deepseek(path, dtype):
    # DeepSeek-MoE: llama's attention (NORM RoPE), softmax top-k with raw weights (its graph fixes
    # both), expert_weights_scale read, 2 shared experts.
    def keys(m):
        m.u32("expert_shared_count", 2)
        m.f32("expert_weights_scale", 1.5)
    deepseek_style(path, dtype, "deepseek", 34, keys, shared=512)


def dots1(path, dtype):
    # dots.llm1: qwen3's attention (QK-norm per head, NEOX RoPE, one KV head per head), sigmoid scores with the selection
    # bias, renormalised, scaled by 2.5, 1 shared expert.
    def keys(m):
        m.u32("expert_shared_count", 1)
        m.u32("expert_gating_func", 2)
        m.w.add_bool("dots1.expert_weights_norm", True)
        m.f32("expert_weights_scale", 2.5)
    deepseek_style(path, dtype, "dots1", 35, keys, qk_norm=True, shared=256, sel_bias=0.3, mha=True)


def glm4moe(path, dtype):
    # GLM-4.5: q/k/v biases, the q/k head norms (the 355B's), NEOX RoPE on half of each head, the
    # FFN's pre-norm named post_attention_norm, sigmoid scores (no expert_gating_func: llama.cpp's
    # default for glm4moe) with the required selection bias, renormalised, scaled by 1.5, 1 shared
    # expert; one NextN block counted by block_count.
    def keys(m):
        m.u32("expert_shared_count", 1)
        m.w.add_bool("glm4moe.expert_weights_norm", True)
        m.f32("expert_weights_scale", 1.5)
    deepseek_style(path, dtype, "glm4moe", 36, keys, qk_norm=True, qkv_bias=True, rope_dims=32,
                   ffn_norm="post_attention_norm", shared=256, sel_bias=0.3, nextn=1)


def ernie4_5_moe(path, dtype):
    # ERNIE-4.5-21B-A3B's form: llama's attention (NORM RoPE) with an attn_output.bias its graph
    # ignores, experts in every layer past the first (interleave_moe_layer_step 1), softmax
    # renormalised (fixed by its graph) with a selection bias, one shared expert of 256.
    def keys(m):
        m.u32("interleave_moe_layer_step", 1)
        m.u32("expert_shared_feed_forward_length", 256)
    deepseek_style(path, dtype, "ernie4_5-moe", 37, keys, qkv_bias=True, out_bias=True, shared=256, sel_bias=0.03)


def bailingmoe2(path, dtype):
    # Ling 2.0: one attn_qkv, the q/k head norms, NEOX RoPE on half of each head, sigmoid scores with
    # the selection bias over 4 expert groups keeping 2, renormalised, scaled by 2.5, 1 shared expert.
    def keys(m):
        m.u32("expert_shared_count", 1)
        m.u32("expert_gating_func", 2)
        m.u32("expert_group_count", 4)
        m.u32("expert_group_used_count", 2)
        m.w.add_bool("bailingmoe2.expert_weights_norm", True)
        m.f32("expert_weights_scale", 2.5)
    deepseek_style(path, dtype, "bailingmoe2", 38, keys, qk_norm=True, fused_qkv=True, rope_dims=32, shared=256,
                   sel_bias=0.3)


def exaone_moe(path, dtype):
    # K-EXAONE (llama_model_exaone_moe): the q/k head norms, windows of 128 (attention.sliding_window,
    # required) on every layer but each fourth (the default pattern) with NEOX RoPE, no RoPE on the
    # global layer 3; a dense first layer, sigmoid scores (expert_gating_func, required) with the
    # selection bias, renormalised, scaled by 2.5, and one ungated shared expert of
    # expert_shared_feed_forward_length.
    def keys(m):
        m.u32("attention.sliding_window", 128)
        m.u32("expert_shared_feed_forward_length", 384)
        m.u32("expert_gating_func", 2)
        m.w.add_bool("exaone-moe.expert_weights_norm", True)
        m.f32("expert_weights_scale", 2.5)
    deepseek_style(path, dtype, "exaone-moe", 59, keys, qk_norm=True, shared=384, sel_bias=0.3)


def hunyuan_moe(path, dtype):
    # llama_model_hunyuan_moe (Hunyuan-A13B's form): hunyuan-dense's attention (the q/k head norms
    # after RoPE, NEOX), 16 experts of feed_forward_length 256 top-4 (llama.cpp requires
    # expert_feed_forward_length but binds the experts with n_ff), softmax renormalised, and an
    # ungated shared expert of expert_shared_feed_forward_length 512 in every layer.
    d, L, H, Hkv, hd, E, k, ff, sh = 256, 4, 4, 2, 64, 16, 4, 256, 512
    m = Model(path, "hunyuan-moe", 39, dtype)
    m.common(d, L, H, Hkv)
    m.u32("feed_forward_length", ff)
    m.u32("expert_feed_forward_length", ff)
    m.u32("expert_shared_feed_forward_length", sh)
    m.u32("expert_count", E)
    m.u32("expert_used_count", k)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "attn_q_norm.weight", hd)
        m.norm(p + "attn_k_norm.weight", hd)
        m.norm(p + "ffn_norm.weight", d)
        m.experts(p, d, ff, E)
        m.matrix(p + "ffn_gate_shexp.weight", [d, sh])
        m.matrix(p + "ffn_up_shexp.weight", [d, sh])
        m.matrix(p + "ffn_down_shexp.weight", [sh, d], scale=0.7)
    m.write()


def afmoe(path, dtype):
    # Arcee's Trinity (llama_model_afmoe, shrunk): 4 layers of 256, heads 4/2 of 64, the embedding
    # times sqrt(256), pre- and post-norms around both sublayers (post_attention_norm,
    # post_ffw_norm), QK-norm per head, an attention output gate (attn_gate: sigmoid of it times the
    # attention's output, before attn_output), split-halves RoPE except on layer 3 (llama.cpp's NoPE
    # step of 4), windows of 128 on layers 0-2 rotated with a local base of 5000; layer 0 dense (512),
    # then 16 experts of 256 top-4 and one shared, sigmoid (no expert_gating_func: its default) with
    # the exp_probs_b selection bias, renormalised, scaled by 2.5.
    d, L, H, Hkv, hd, E, k, ff, dense_ff = 256, 4, 4, 2, 64, 16, 4, 256, 512
    m = Model(path, "afmoe", 44, dtype)
    m.common(d, L, H, Hkv, eps=1e-5, embd_scale=1.0)
    m.moe(dense_ff, E, k, ff)
    m.u32("leading_dense_block_count", 1)
    m.u32("expert_shared_count", 1)
    m.w.add_bool("afmoe.expert_weights_norm", True)
    m.f32("expert_weights_scale", 2.5)
    m.u32("attention.sliding_window", 128)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    m.f32("rope.freq_base_swa", 5000.0)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.matrix(p + "attn_gate.weight", [d, H * hd])
        m.norm(p + "attn_q_norm.weight", hd)
        m.norm(p + "attn_k_norm.weight", hd)
        m.norm(p + "post_attention_norm.weight", d)
        m.norm(p + "ffn_norm.weight", d)
        m.norm(p + "post_ffw_norm.weight", d)
        if l == 0:
            swiglu(m, p, d, dense_ff)
            continue
        m.experts(p, d, ff, E)
        m.norm(p + "exp_probs_b.bias", E, base=0.0, noise=0.3)
        shared_expert(m, p, d, ff)
    m.write()


def llama4(path, dtype, maverick=False):
    # Llama 4: llama's attention (NORM RoPE with rope_freqs.weight), 4 layers of 256, heads 4/2 of
    # 64; chunked attention (llama.cpp's fixed 8192-position chunks) and a QK L2 norm on layers 0-2,
    # no RoPE on layer 3; experts in layers 1 and 3 (interleave_moe_layer_step 2, Maverick's; Scout
    # has 1), 16 of 256, top-1 (Scout's and Maverick's k), their sigmoid scores multiplying the
    # experts' inputs, one shared expert of the expert width; dense SwiGLUs of 512 in layers 0 and 2.
    # maverick: 128 experts of 64, which llama.cpp runs without the QK norm, and the chunked layers
    # given by flags (layers 0 and 2). A context of 16384, for runs past the first chunk.
    d, L, H, Hkv, hd, dense_ff = 256, 4, 4, 2, 64, 512
    E, ff = (128, 64) if maverick else (16, 256)
    m = Model(path, "llama4", 43 if maverick else 42, dtype)
    m.common(d, L, H, Hkv, n_ctx=16384, eps=1e-5)
    m.u32("feed_forward_length", dense_ff)
    m.u32("expert_feed_forward_length", ff)
    m.u32("expert_count", E)
    m.u32("expert_used_count", 1)
    m.u32("interleave_moe_layer_step", 2)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 500000.0)
    if maverick:
        m.w.add_array("llama4.attention.sliding_window_pattern", [True, False, True, False])
    m.head(d)
    rope_freq_factors(m, hd)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "ffn_norm.weight", d)
        if l % 2 == 0:
            swiglu(m, p, d, dense_ff)
            continue
        m.experts(p, d, ff, E)
        shared_expert(m, p, d, ff)
    m.write()


def dense_attention(m, p, d, H, Hkv, hd, bias=False, out_bias=False):
    m.matrix(p + "attn_q.weight", [d, H * hd])
    m.matrix(p + "attn_k.weight", [d, Hkv * hd])
    m.matrix(p + "attn_v.weight", [d, Hkv * hd])
    if bias:
        for t, n in (("q", H * hd), ("k", Hkv * hd), ("v", Hkv * hd)):
            m.norm(p + f"attn_{t}.bias", n, base=0.0, noise=0.2)
    m.matrix(p + "attn_output.weight", [H * hd, d], scale=0.7)
    if out_bias:
        m.norm(p + "attn_output.bias", d, base=0.0, noise=0.2)


def swiglu(m, p, d, ff):
    m.matrix(p + "ffn_gate.weight", [d, ff])
    m.matrix(p + "ffn_up.weight", [d, ff])
    m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)


def shared_expert(m, p, d, ff):
    m.matrix(p + "ffn_gate_shexp.weight", [d, ff])
    m.matrix(p + "ffn_up_shexp.weight", [d, ff])
    m.matrix(p + "ffn_down_shexp.weight", [ff, d], scale=0.7)


def granite(path, dtype, moe, rope=True):
    # llama_model_granite / granite_moe: llama with embedding_scale, residual_scale (each
    # sublayer's output), attention.scale (kq_scale) and logit_scale (logits / it). The MoE form:
    # 8 experts top-2 of feed_forward_length, renormalised softmax, and Granite MoE Shared's
    # ungated shared expert (expert_shared_feed_forward_length). rope=False: the dense form with
    # rope.scaling.finetuned false, granite's switch that turns RoPE off in every layer.
    arch = "granitemoe" if moe else "granite"
    d, L, H, Hkv, ff, E, k, sh = 256, 4, 4, 2, 512, 8, 2, 256
    hd = d // H
    m = Model(path, arch, 7 if moe else 8, dtype)
    m.common(d, L, H, Hkv)
    m.u32("feed_forward_length", 256 if moe else ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    m.f32("embedding_scale", 3.0)
    m.f32("residual_scale", 0.4)
    m.f32("attention.scale", 0.6 / np.sqrt(hd))
    m.f32("logit_scale", 1.5)
    if not rope:
        m.w.add_bool("granite.rope.scaling.finetuned", False)
    if moe:
        m.u32("expert_count", E)
        m.u32("expert_used_count", k)
        m.u32("expert_shared_feed_forward_length", sh)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "ffn_norm.weight", d)
        if moe:
            m.experts(p, d, 256, E)
            m.matrix(p + "ffn_gate_shexp.weight", [d, sh])
            m.matrix(p + "ffn_up_shexp.weight", [d, sh])
            m.matrix(p + "ffn_down_shexp.weight", [sh, d], scale=0.7)
        else:
            swiglu(m, p, d, ff)
    m.write()


def minicpm(path, dtype, keys):
    # llama_model_minicpm: llama run with granite's graph, the multipliers as its converter writes
    # them (embedding_scale = scale_emb, residual_scale = scale_depth / sqrt(n_layer), logit_scale
    # = hidden_size / dim_model_base: logits / it), or without the keys (MiniCPM's defaults 12,
    # 1.4 / sqrt(n_layer), 256 / n_embd); attention.scale, written here, is not read.
    def write_keys(m):
        if keys:
            m.f32("embedding_scale", 12.0)
            m.f32("residual_scale", 1.4 / np.sqrt(4))
            m.f32("logit_scale", 256 / 128)
        m.f32("attention.scale", 0.3)

    plain_model(path, dtype, "minicpm", 27 if keys else 28, 10000.0, False, write_keys)


def glm4(path, dtype, mrope):
    # llama_model_glm4 (GLM-4-0414): RMS pre-norms and post-norms (post_attention_norm,
    # post_ffw_norm) around both sublayers, q/k/v biases, ffn_up holding [gate | up] (SwiGLU), RoPE
    # on half of each head: adjacent pairs, or with M-RoPE sections (GLM-4.1V's form) split halves.
    d, L, H, Hkv, ff = 256, 4, 4, 2, 512
    hd = d // H
    m = Model(path, "glm4", 30 if mrope else 29, dtype)
    m.common(d, L, H, Hkv)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd // 2)
    m.f32("rope.freq_base", 10000.0)
    if mrope:
        m.w.add_array("glm4.rope.dimension_sections", [4, 6, 6, 0])
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd, bias=True)
        m.norm(p + "post_attention_norm.weight", d)
        m.norm(p + "ffn_norm.weight", d)
        m.matrix(p + "ffn_up.weight", [d, 2 * ff])
        m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)
        m.norm(p + "post_ffw_norm.weight", d)
    m.write()


def plain_model(path, dtype, arch, seed, base, tied, keys, head_norms=False):
    # llama's block (4 layers of 256, heads 4/2 of 64, SwiGLU of 512), with an RMSNorm of every q
    # and k head (attn_q_norm / attn_k_norm of the head width) when head_norms; `keys` writes the
    # architecture's own keys.
    d, L, H, Hkv, ff = 256, 4, 4, 2, 512
    hd = d // H
    m = Model(path, arch, seed, dtype)
    m.common(d, L, H, Hkv, embd_scale=1.0 if tied else None)  # tied: unit-norm rows keep logits O(1)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", base)
    keys(m)
    if not tied:
        m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        if head_norms:
            m.norm(p + "attn_q_norm.weight", hd)
            m.norm(p + "attn_k_norm.weight", hd)
        m.norm(p + "ffn_norm.weight", d)
        swiglu(m, p, d, ff)
    m.write()


def hunyuan_dense(path, dtype):
    # llama_model_hunyuan_dense (Hunyuan 0.5B-7B): the q/k head norms after RoPE, tied head;
    # rope.scaling.alpha 4 (base times alpha^(d / (d - 2)), which the dense converter applies
    # itself, but llama.cpp's loader applies for any file that has the key).
    plain_model(path, dtype, "hunyuan-dense", 31, 10000.0, True, lambda m: m.f32("rope.scaling.alpha", 4.0),
                head_norms=True)


def maincoder(path, dtype):
    # llama_model_maincoder (Maincoder-1B): llama's block with adjacent-pair RoPE and the q/k head
    # norms after it, a separate head.
    plain_model(path, dtype, "maincoder", 87, 10000.0, False, lambda m: None, head_norms=True)


def qwen3vl(path, dtype):
    # llama_model_qwen3vl (Qwen3-VL's language model, text only: the deepstack inputs are zero):
    # qwen3's block (the q/k head norms before RoPE) with interleaved M-RoPE sections
    # [12, 10, 10, 0] over 32 pairs, Qwen3-VL's [24, 20, 20, 0] halved, which leave pair 31 in the
    # fourth section (position 0 for text); a RoPE base of 100 makes that pair turn visibly.
    plain_model(path, dtype, "qwen3vl", 32, 100.0, False,
                lambda m: m.w.add_array("qwen3vl.rope.dimension_sections", [12, 10, 10, 0]), head_norms=True)


def post_norm_layer(m, p, d, H, Hkv, hd, ff, q_norm, k_norm):
    # olmo2's and exaone4's layer: no pre-norms, attn_q_norm / attn_k_norm of the given widths
    # (the whole projections, or one head), post-norms of both sublayers, SwiGLU.
    dense_attention(m, p, d, H, Hkv, hd)
    m.norm(p + "attn_q_norm.weight", q_norm)
    m.norm(p + "attn_k_norm.weight", k_norm)
    m.norm(p + "post_attention_norm.weight", d)
    swiglu(m, p, d, ff)
    m.norm(p + "post_ffw_norm.weight", d)


def olmo2(path, dtype, olmo3=False):
    # llama_model_olmo2: no pre-norms; attn_q_norm {n_embd} and attn_k_norm {kv width} over the
    # whole projections; post_attention_norm and post_ffw_norm on the sublayers' outputs; SwiGLU.
    # OLMo 3 as its converter writes it: windows (128 here, so a context of 512 reaches past them)
    # on every layer but each fourth, given as one flag per layer, and YaRN (factor 8 over an
    # original context of 128, with the attention_factor key llama.cpp does not read for olmo2, and
    # rope.scaling.attn_factor 1.1), which the local layers do not apply.
    d, L, H, Hkv, ff = 256, 8 if olmo3 else 4, 4, 2, 512
    hd = d // H
    m = Model(path, "olmo2", 20 if olmo3 else 9, dtype)
    m.common(d, L, H, Hkv)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 500000.0)
    if olmo3:
        m.u32("attention.sliding_window", 128)
        m.w.add_array("olmo2.attention.sliding_window_pattern", [(l + 1) % 4 != 0 for l in range(L)])
        m.w.add_string("olmo2.rope.scaling.type", "yarn")
        m.f32("rope.scaling.factor", 8.0)
        m.u32("rope.scaling.original_context_length", 128)
        m.f32("rope.scaling.yarn_attn_factor", 1.2079)
        m.f32("rope.scaling.attn_factor", 1.1)  # read for every architecture; olmo2's local layers pass 1
        m.f32("rope.scaling.yarn_beta_fast", 32.0)
        m.f32("rope.scaling.yarn_beta_slow", 1.0)
    m.head(d)
    for l in range(L):
        post_norm_layer(m, f"blk.{l}.", d, H, Hkv, hd, ff, d, Hkv * hd)
    m.write()


def smollm3(path, dtype):
    # llama_model_smollm3: llama with no RoPE on layers l where (l + 1) % 4 == 0; tied head.
    d, L, H, Hkv, ff = 256, 4, 4, 1, 512
    hd = d // H
    m = Model(path, "smollm3", 10, dtype)
    m.common(d, L, H, Hkv, embd_scale=1.0)  # rows of unit norm: the tied head's logits stay O(1)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 5000000.0)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "ffn_norm.weight", d)
        swiglu(m, p, d, ff)
    m.write()


def bias(m, name, n):
    m.norm(name, n, base=0.0, noise=0.2)


def layer_norms(m, p, d):
    for n in ("attn_norm", "ffn_norm"):
        m.norm(p + n + ".weight", d)
        bias(m, p + n + ".bias", d)


def layer_norm_model(path, arch, seed, dtype, d, L, H, Hkv, ff, rope_dims, base, tied=False):
    # The keys and global tensors of the LayerNorm architectures (stablelm, starcoder2, gptneox,
    # phi2): LayerNorm's epsilon key, partial RoPE, output_norm with a bias, a separate head (tied:
    # none, token_embd's rows of unit norm so that the tied head's logits stay O(1)).
    m = Model(path, arch, seed, dtype)
    m.common(d, L, H, Hkv, embd_scale=1.0 if tied else None)
    m.f32("attention.layer_norm_epsilon", 1e-5)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", rope_dims)
    m.f32("rope.freq_base", base)
    bias(m, "output_norm.bias", d)
    if not tied:
        m.head(d)
    return m


def fused_attention(m, p, d):
    # attn_qkv and attn_output with biases (gptneox, phi2; heads of d / H, as many KV heads).
    m.matrix(p + "attn_qkv.weight", [d, 3 * d])
    bias(m, p + "attn_qkv.bias", 3 * d)
    m.matrix(p + "attn_output.weight", [d, d], scale=0.7)
    bias(m, p + "attn_output.bias", d)


def gelu_mlp(m, p, d, ff):
    # The ungated GELU MLP with biases (LLM_FFN_GELU, LLM_FFN_SEQ).
    m.matrix(p + "ffn_up.weight", [d, ff])
    bias(m, p + "ffn_up.bias", ff)
    m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)
    bias(m, p + "ffn_down.bias", d)


def minimax_m2(path, dtype):
    # llama_model_minimax_m2 (MiniMax-M2): RMSNorm of the whole q and k projections (attn_q_norm of
    # n_head * head, attn_k_norm of the KV width), NEOX RoPE on 32 of 64 dims, 16 experts of
    # feed_forward_length 256 top-4 (expert_feed_forward_length required, the experts bound with
    # n_ff), sigmoid scores (expert_gating_func 2) with the required selection bias, renormalised.
    d, L, H, Hkv, hd, E, k, ff = 256, 4, 4, 2, 64, 16, 4, 256
    m = Model(path, "minimax-m2", 44, dtype)
    m.common(d, L, H, Hkv)
    m.moe(ff, E, k, ff)
    m.u32("expert_gating_func", 2)
    m.u32("rope.dimension_count", 32)
    m.f32("rope.freq_base", 10000.0)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "attn_q_norm.weight", H * hd)
        m.norm(p + "attn_k_norm.weight", Hkv * hd)
        m.norm(p + "ffn_norm.weight", d)
        m.experts(p, d, ff, E)
        m.norm(p + "exp_probs_b.bias", E, base=0.0, noise=0.3)
    m.write()


def dbrx(path, dtype):
    # llama_model_dbrx: fused attn_qkv and attn_output without biases, LayerNorms without biases
    # (attn_norm, attn_output_norm before the experts, output_norm), q/k/v clamped to
    # +-attention.clamp_kqv (required), NEOX RoPE, 16 experts of feed_forward_length top-4 under a
    # softmax renormalised and unscaled (the graph fixes it), a separate head.
    d, L, H, Hkv, E, k, ff = 256, 4, 8, 2, 16, 4, 256
    hd = d // H
    m = Model(path, "dbrx", 51, dtype)
    m.common(d, L, H, Hkv)
    m.f32("attention.layer_norm_epsilon", 1e-5)
    m.f32("attention.clamp_kqv", 2.0)
    m.moe(ff, E, k)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 500000.0)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        m.matrix(p + "attn_qkv.weight", [d, d + 2 * Hkv * hd])
        m.matrix(p + "attn_output.weight", [d, d], scale=0.7)
        m.norm(p + "attn_output_norm.weight", d)
        m.experts(p, d, ff, E)
    m.write()


def phimoe(path, dtype):
    # llama_model_phimoe (Phi-3.5-MoE, phi3's graph): RMSNorms that add a bias (attn_norm, ffn_norm,
    # output_norm), q/k/v and output biases, NEOX RoPE with LongRoPE factors (original context 256:
    # the 512-token chunks take the long ones), 16 experts top-2 under a renormalised softmax, a
    # separate head with a bias.
    d, L, H, Hkv, E, k, ff = 256, 4, 4, 2, 16, 2, 256
    hd = d // H
    m = Model(path, "phimoe", 52, dtype)
    m.common(d, L, H, Hkv)
    m.moe(ff, E, k)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    m.u32("rope.scaling.original_context_length", 256)
    longrope_factors(m, hd)
    bias(m, "output_norm.bias", d)
    m.head(d)
    m.norm("output.bias", N_VOCAB, base=0.0, noise=1.0)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        bias(m, p + "attn_norm.bias", d)
        dense_attention(m, p, d, H, Hkv, hd, bias=True, out_bias=True)
        m.norm(p + "ffn_norm.weight", d)
        bias(m, p + "ffn_norm.bias", d)
        m.experts(p, d, ff, E)
    m.write()


def gpt_oss(path, dtype):
    # llama_model_openai_moe (gpt-oss): heads 8/2 of 64 (key_length; q is 512 wide against n_embd
    # 256), q/k/v and output biases, attn_sinks, NEOX RoPE with YaRN (factor 4 over an original
    # context of 256, as gpt-oss's 32 over 4096), windows of 128 on layers 0 and 2 (rotated as the
    # global ones), post_attention_norm as the FFN's pre-norm, 16 experts of 256 top-4 with router
    # and expert biases ({rows, n_expert}), the clamped SwiGLU, softmax over the 4 selected logits.
    d, L, H, Hkv, hd, E, k, ff = 256, 4, 8, 2, 64, 16, 4, 256
    m = Model(path, "gpt-oss", 43, dtype)
    m.common(d, L, H, Hkv)
    m.moe(ff, E, k, ff)
    m.u32("attention.key_length", hd)
    m.u32("attention.value_length", hd)
    m.u32("attention.sliding_window", 128)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 150000.0)
    m.w.add_string("gpt-oss.rope.scaling.type", "yarn")
    m.f32("rope.scaling.factor", 4.0)
    m.u32("rope.scaling.original_context_length", 256)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd, bias=True, out_bias=True)
        m.norm(p + "attn_sinks.weight", H, base=0.0, noise=1.0)
        m.norm(p + "post_attention_norm.weight", d)
        m.experts(p, d, ff, E)
        m.norm(p + "ffn_gate_inp.bias", E, base=0.0, noise=0.5)
        for name, rows in (("ffn_gate_exps", ff), ("ffn_up_exps", ff), ("ffn_down_exps", d)):
            m.w.add_tensor(p + name + ".bias", (0.3 * m.rng.standard_normal((E, rows))).astype(np.float32))
    m.write()


def starcoder(path, dtype):
    # llama_model_starcoder (StarCoder / SantaCoder): gpt2's block, LayerNorm with biases, learned
    # positions (position_embd of context_length rows), fused attn_qkv {n_embd, n_embd + 2 kv} with
    # one KV head (multi-query), biases everywhere, the ungated GELU MLP.
    d, L, H, ff, n_ctx = 256, 4, 4, 1024, 1024
    hd = d // H
    m = Model(path, "starcoder", 42, dtype)
    m.common(d, L, H, 1, n_ctx=n_ctx)
    m.f32("attention.layer_norm_epsilon", 1e-5)
    m.u32("feed_forward_length", ff)
    m.matrix("position_embd.weight", [d, n_ctx], scale=0.3 * np.sqrt(d))
    bias(m, "output_norm.bias", d)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        layer_norms(m, p, d)
        m.matrix(p + "attn_qkv.weight", [d, d + 2 * hd])
        bias(m, p + "attn_qkv.bias", d + 2 * hd)
        m.matrix(p + "attn_output.weight", [d, d], scale=0.7)
        bias(m, p + "attn_output.bias", d)
        gelu_mlp(m, p, d, ff)
    m.write()


def alibi_model(path, dtype, arch, seed, d, L, H, Hkv, ff, keys=None, biases=True, embd_norm=False, tied=False,
                gated=False, layer_norm=True):
    # The ALiBi architectures (no RoPE keys): bloom (LayerNorm of the embedding, gpt2's block, a tied
    # head), mpt (gpt2's block, here without biases, q/k/v clamped), jais (gpt2's attention, a
    # SwiGLU with biases) and refact (llama's block under RMSNorm).
    m = Model(path, arch, seed, dtype)
    # A tied head reads token_embd: rows of std 0.15 keep its logits of the other heads' scale.
    m.common(d, L, H, Hkv, embd_scale=0.15 * np.sqrt(d) if tied else None)
    if layer_norm:
        m.f32("attention.layer_norm_epsilon", 1e-5)
    m.u32("feed_forward_length", ff)
    for k, v in (keys or {}).items():
        m.f32(k, v)
    if embd_norm:
        m.norm("token_embd_norm.weight", d)
        bias(m, "token_embd_norm.bias", d)
    if layer_norm and biases:
        bias(m, "output_norm.bias", d)
    if not tied:
        m.head(d)
    hd = d // H
    for l in range(L):
        p = f"blk.{l}."
        if not layer_norm:  # refact
            m.norm(p + "attn_norm.weight", d)
            dense_attention(m, p, d, H, Hkv, hd)
            m.norm(p + "ffn_norm.weight", d)
            swiglu(m, p, d, ff)
            continue
        for n in ("attn_norm", "ffn_norm"):
            m.norm(p + n + ".weight", d)
            if biases:
                bias(m, p + n + ".bias", d)
        m.matrix(p + "attn_qkv.weight", [d, d + 2 * Hkv * hd])
        m.matrix(p + "attn_output.weight", [d, d], scale=0.7)
        if biases:
            bias(m, p + "attn_qkv.bias", d + 2 * Hkv * hd)
            bias(m, p + "attn_output.bias", d)
        if gated:  # jais
            swiglu(m, p, d, ff)
            for n, k in (("ffn_gate", ff), ("ffn_up", ff), ("ffn_down", d)):
                bias(m, p + n + ".bias", k)
        elif biases:
            gelu_mlp(m, p, d, ff)
        else:
            m.matrix(p + "ffn_up.weight", [d, ff])
            m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)
    m.write()


def falcon(path, dtype, big):
    # llama_model_falcon: a parallel residual x + attn(n(x)) + mlp(n(x)) under attn_norm (LayerNorm
    # with a bias), fused attn_qkv and attn_output without biases, the ungated GELU MLP without
    # biases, NEOX RoPE over the whole head; Falcon-7B's multi-query attention, or Falcon-40B's
    # grouped one with the attention's own attn_norm_2.
    d, L, H, ff = 256, 4, 8, 1024
    Hkv, hd = (2 if big else 1), d // H
    m = Model(path, "falcon", 47 + big, dtype)
    m.common(d, L, H, Hkv)
    m.f32("attention.layer_norm_epsilon", 1e-5)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    bias(m, "output_norm.bias", d)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        for n in ("attn_norm", "attn_norm_2") if big else ("attn_norm",):
            m.norm(p + n + ".weight", d)
            bias(m, p + n + ".bias", d)
        m.matrix(p + "attn_qkv.weight", [d, d + 2 * Hkv * hd])
        m.matrix(p + "attn_output.weight", [d, d], scale=0.7)
        m.matrix(p + "ffn_up.weight", [d, ff])
        m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)
    m.write()


def olmo(path, dtype):
    # llama_model_olmo (OLMo 1): LayerNorms without weight or bias (no norm tensors: output_norm is
    # absent too), q/k/v clamped to +-attention.clamp_kqv, llama's attention and SwiGLU, NORM RoPE,
    # a tied head.
    d, L, H, ff = 256, 4, 4, 512
    hd = d // H
    m = Model(path, "olmo", 49, dtype)
    for k, v in (("context_length", 4096), ("embedding_length", d), ("block_count", L), ("attention.head_count", H),
                 ("attention.head_count_kv", H), ("feed_forward_length", ff), ("rope.dimension_count", hd)):
        m.u32(k, v)
    m.f32("attention.layer_norm_epsilon", 1e-5)
    m.f32("attention.clamp_kqv", 1.5)
    m.f32("rope.freq_base", 10000.0)
    byte_vocab(m.w)
    m.matrix("token_embd.weight", [d, N_VOCAB], scale=0.15 * np.sqrt(d))  # tied: logits of moderate size
    for l in range(L):
        p = f"blk.{l}."
        dense_attention(m, p, d, H, H, hd)
        swiglu(m, p, d, ff)
    m.write()


def baichuan(path, dtype, layers):
    # llama_model_baichuan: llama's block (attn_q/k/v as the converter splits W_pack), a separate
    # head; llama.cpp rotates (NORM RoPE) only the 32-layer model and gives the 40-layer one ALiBi
    # with max bias 8. Dim 128 keeps 32-40 layers small.
    d, H, ff = 128, 4, 256
    hd = d // H
    m = Model(path, "baichuan", 50 + layers, dtype)
    m.common(d, layers, H, H)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    m.head(d)
    for l in range(layers):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, H, hd)
        m.norm(p + "ffn_norm.weight", d)
        swiglu(m, p, d, ff)
    m.write()


def llama_family(path, dtype, arch, seed):
    # Llama-like blocks by llama.cpp's loaders: qwen (Qwen 1: attn_qkv with a bias, NEOX RoPE, an MLP of
    # half of feed_forward_length), xverse (llama's block, NORM RoPE), orion (LayerNorms with biases,
    # q/k/v biases here, NEOX), codeshell (LayerNorms, q/k/v and output biases, gpt2's GELU MLP with
    # biases, NEOX, and no token_embd: llama.cpp reads the embedding from output.weight), plamo (one
    # RMSNorm for a parallel residual, NEOX over whole heads) and chatglm (ChatGLM3: attn_qkv with a
    # bias, ffn_up = [gate | up], NORM RoPE over half of each head, a tied head).
    d, L, H, Hkv, ff = 256, 4, 4, 2, 512
    hd = d // H
    layer_norm = arch in ("orion", "codeshell")
    m = Model(path, arch, seed, dtype)
    for k, v in (("context_length", 4096), ("embedding_length", d), ("block_count", L), ("attention.head_count", H),
                 ("attention.head_count_kv", H if arch == "qwen" else Hkv),
                 ("feed_forward_length", 2 * ff if arch == "qwen" else ff),
                 ("rope.dimension_count", hd // 2 if arch == "chatglm" else hd)):
        m.u32(k, v)
    m.f32("attention.layer_norm_epsilon" if layer_norm else "attention.layer_norm_rms_epsilon", 1e-5)
    m.f32("rope.freq_base", 10000.0)
    byte_vocab(m.w)
    if arch == "chatglm":  # tied: rows of std 0.15 keep the logits of the other heads' scale
        m.matrix("token_embd.weight", [d, N_VOCAB], scale=0.15 * np.sqrt(d))
    elif arch != "codeshell":
        m.matrix("token_embd.weight", [d, N_VOCAB], scale=np.sqrt(d))
    m.norm("output_norm.weight", d)
    if layer_norm:
        bias(m, "output_norm.bias", d)
    if arch != "chatglm":
        m.head(d)
    kv = (H if arch == "qwen" else Hkv) * hd
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        if layer_norm:
            bias(m, p + "attn_norm.bias", d)
        if arch in ("qwen", "chatglm"):
            m.matrix(p + "attn_qkv.weight", [d, d + 2 * kv])
            bias(m, p + "attn_qkv.bias", d + 2 * kv)
            m.matrix(p + "attn_output.weight", [d, d], scale=0.7)
        else:
            dense_attention(m, p, d, H, Hkv, hd, bias=layer_norm, out_bias=arch == "codeshell")
        if arch != "plamo":
            m.norm(p + "ffn_norm.weight", d)
            if layer_norm:
                bias(m, p + "ffn_norm.bias", d)
        if arch == "codeshell":
            gelu_mlp(m, p, d, ff)
        elif arch == "chatglm":
            m.matrix(p + "ffn_up.weight", [d, 2 * ff])
            m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)
        else:
            swiglu(m, p, d, ff)
    m.write()


def spark2_5(path, dtype):
    # llama_model_spark2_5 (Spark-X 2.5): llama's block with the converter's fused attn_qkv, NEOX
    # RoPE on every layer, windows of 64 on the layers attention.sliding_window_pattern flags
    # (required, an array) rotating rope.dimension_count_swa of 64 dims with rope.freq_base_swa, a
    # sigmoid gate per head (attn_gate, n_embd -> n_head) on the attention's output before
    # attn_output, a GELU-gated MLP and a separate head.
    d, L, H, Hkv, hd, ff = 256, 4, 4, 2, 64, 512
    m = Model(path, "spark2_5", 60, dtype)
    m.common(d, L, H, Hkv)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.u32("rope.dimension_count_swa", hd // 2)
    m.f32("rope.freq_base", 100000.0)
    m.f32("rope.freq_base_swa", 10000.0)
    m.u32("attention.sliding_window", 64)
    m.w.add_sliding_window_pattern([True, False, True, True])
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        m.matrix(p + "attn_qkv.weight", [d, (H + 2 * Hkv) * hd])
        m.matrix(p + "attn_gate.weight", [d, H], scale=2.0)
        m.matrix(p + "attn_output.weight", [H * hd, d], scale=0.7)
        m.norm(p + "ffn_norm.weight", d)
        swiglu(m, p, d, ff)
    m.write()


def nemotron(path, dtype, jais2=False):
    # llama_model_nemotron: LayerNorm with biases (the converter's 1 + w already in the weights), q/k/v
    # and output biases, NEOX RoPE on half of each head, the ungated squared-ReLU MLP with biases
    # (LLM_FFN_RELU_SQR, gelu_mlp's tensors). jais2 (llama_model_jais2, Jais 2): the same block with the
    # attention output and MLP biases required, RoPE over whole heads (base 500000) and the head tied
    # to token_embd (no output.weight).
    d, L, H, Hkv, ff = 256, 4, 4, 2, 512
    if jais2:
        m = layer_norm_model(path, "jais2", 58, dtype, d, L, H, Hkv, ff, d // H, 500000.0, tied=True)
    else:
        m = layer_norm_model(path, "nemotron", 40, dtype, d, L, H, Hkv, ff, 32, 10000.0)
    for l in range(L):
        p = f"blk.{l}."
        layer_norms(m, p, d)
        dense_attention(m, p, d, H, Hkv, d // H, bias=True, out_bias=True)
        gelu_mlp(m, p, d, ff)
    m.write()


def rope_freq_factors(m, hd):
    # rope_freqs.weight with factors that bite: pair i's frequency divided by 1 + 7 (i / (pairs - 1))^2.
    u = np.arange(hd // 2) / (hd // 2 - 1)
    m.w.add_tensor("rope_freqs.weight", (1 + 7 * u * u).astype(np.float32))


def nanbeige(path, dtype, skip=False):
    # llama_model_nanbeige (Nanbeige 4.2, a looped transformer): llama's block (NORM RoPE,
    # rope_freqs.weight with factors that bite), its 3 blocks run num_loops 2 times over with the
    # same weights and a cache per pass, output_norm between the passes; skip: 3 passes with
    # skip_loop_final_norm (no norm between them).
    d, L, H, Hkv, ff = 256, 3, 4, 2, 512
    hd = d // H
    m = Model(path, "nanbeige", 94 if skip else 93, dtype)
    m.common(d, L, H, Hkv)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    m.u32("num_loops", 3 if skip else 2)
    if skip:
        m.w.add_bool("nanbeige.skip_loop_final_norm", True)
    rope_freq_factors(m, hd)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "ffn_norm.weight", d)
        swiglu(m, p, d, ff)
    m.write()


def apertus(path, dtype):
    # llama_model_apertus (Apertus-8B): llama's attention (NEOX RoPE, rope_freqs.weight with factors
    # that bite) with the q/k head norms before RoPE (and their optional biases, which llama.cpp
    # binds and its graph does not add), and the ungated xIELU MLP
    # (ffn_up, ffn_down) whose scalars are global keys: alpha_n and alpha_p one per layer, beta and
    # eps one value for all (both forms llama.cpp's loader takes).
    d, L, H, Hkv, ff = 256, 4, 4, 2, 512
    hd = d // H
    m = Model(path, "apertus", 88, dtype)
    m.common(d, L, H, Hkv)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    m.w.add_array("xielu.alpha_n", [0.8 + 0.2 * l for l in range(L)])
    m.w.add_array("xielu.alpha_p", [0.9 - 0.1 * l for l in range(L)])
    m.w.add_float32("xielu.beta", 0.5)
    m.w.add_float32("xielu.eps", -1e-6)
    rope_freq_factors(m, hd)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        for t in ("q", "k"):
            m.norm(p + f"attn_{t}_norm.weight", hd)
            m.norm(p + f"attn_{t}_norm.bias", hd, base=0.0, noise=0.3)
        m.norm(p + "ffn_norm.weight", d)
        m.matrix(p + "ffn_up.weight", [d, ff])
        m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)
    m.write()


def arcee(path, dtype):
    # llama_model_arcee (AFM-4.5B): llama's attention (NORM RoPE, rope_freqs.weight with factors that
    # bite) with the ungated squared-ReLU MLP (ffn_up, ffn_down, no biases).
    d, L, H, Hkv, ff = 256, 4, 4, 2, 512
    hd = d // H
    m = Model(path, "arcee", 41, dtype)
    m.common(d, L, H, Hkv)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    rope_freq_factors(m, hd)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "ffn_norm.weight", d)
        m.matrix(p + "ffn_up.weight", [d, ff])
        m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)
    m.write()


def stablelm(path, dtype):
    # llama_model_stablelm (StableLM 2 1.6B's form): LayerNorm with biases, q/k/v biases, SwiGLU,
    # NEOX RoPE over the first quarter of each head (rope.dimension_count 16 of 64).
    d, L, H, ff = 256, 4, 4, 512
    m = layer_norm_model(path, "stablelm", 11, dtype, d, L, H, H, ff, d // H // 4, 10000.0)
    for l in range(L):
        p = f"blk.{l}."
        layer_norms(m, p, d)
        dense_attention(m, p, d, H, H, d // H, bias=True)
        swiglu(m, p, d, ff)
    m.write()


def starcoder2(path, dtype):
    # llama_model_starcoder2: LayerNorm with biases, q/k/v and output biases, an ungated GELU MLP
    # with biases, NEOX RoPE.
    d, L, H, Hkv, ff = 256, 4, 4, 2, 1024
    m = layer_norm_model(path, "starcoder2", 12, dtype, d, L, H, Hkv, ff, d // H, 100000.0)
    for l in range(L):
        p = f"blk.{l}."
        layer_norms(m, p, d)
        dense_attention(m, p, d, H, Hkv, d // H, bias=True, out_bias=True)
        gelu_mlp(m, p, d, ff)
    m.write()


def gemma(path, dtype):
    # llama_model_gemma (Gemma 1): embedding times sqrt(n_embd), GeGLU, the head tied to
    # token_embd, one KV head of 256 (Gemma 2B's shape, narrowed).
    d, L, H, hd, ff = 256, 4, 4, 256, 512
    m = Model(path, "gemma", 13, dtype)
    m.common(d, L, H, 1, embd_scale=1.0)
    m.u32("feed_forward_length", ff)
    m.u32("attention.key_length", hd)
    m.u32("attention.value_length", hd)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, 1, hd)
        m.norm(p + "ffn_norm.weight", d)
        swiglu(m, p, d, ff)
    m.write()


def gptneox(path, dtype):
    # llama_model_gptneox (Pythia): LayerNorm with biases, fused attn_qkv with bias, output biases,
    # an ungated GELU MLP with biases, NEOX RoPE over a quarter of each head, and the parallel
    # residual (use_parallel_residual, required): x + attn(norm1 x) + ffn(norm2 x).
    d, L, H, ff = 256, 4, 4, 1024
    m = layer_norm_model(path, "gptneox", 14, dtype, d, L, H, H, ff, d // H // 4, 10000.0)
    m.w.add_bool("gptneox.use_parallel_residual", True)
    for l in range(L):
        p = f"blk.{l}."
        layer_norms(m, p, d)
        fused_attention(m, p, d)
        gelu_mlp(m, p, d, ff)
    m.write()


def phi2(path, dtype):
    # llama_model_phi2: one LayerNorm (attn_norm) feeding attention and the MLP in parallel, fused
    # attn_qkv with bias, output biases, an ungated GELU MLP, NEOX RoPE over 32 of 64 dims, and a
    # bias on the logits (output.bias).
    d, L, H, ff = 256, 4, 4, 1024
    m = layer_norm_model(path, "phi2", 15, dtype, d, L, H, H, ff, d // H // 2, 10000.0)
    m.norm("output.bias", N_VOCAB, base=0.0, noise=0.5)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        bias(m, p + "attn_norm.bias", d)
        fused_attention(m, p, d)
        gelu_mlp(m, p, d, ff)
    m.write()


def llama_like(path, dtype, arch, seed, freqs=False, out_bias=False, sections=None, head_bias=False,
               ffn_norm="ffn_norm"):
    # llama_model_ernie4_5 (dense) and llama_model_exaone: llama's block under their names (ernie4_5
    # NORM RoPE, its graph ignoring an attn_output.bias, written here so that a reader that used it
    # would show; exaone NEOX RoPE with rope_freqs.weight, written here with factors that bite).
    # internlm2 (NORM RoPE), qwen2vl (M-RoPE sections; an output.bias that llama.cpp binds and its
    # graph does not add, written here so that a reader that added it would show) and seed_oss
    # (NEOX RoPE, the FFN's pre-norm named post_attention_norm) likewise.
    d, L, H, Hkv, ff = 256, 4, 4, 2, 512
    hd = d // H
    m = Model(path, arch, seed, dtype)
    m.common(d, L, H, Hkv)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0)
    if freqs:
        rope_freq_factors(m, hd)
    if sections:
        m.w.add_array(f"{arch}.rope.dimension_sections", sections)
    m.head(d)
    if head_bias:
        m.norm("output.bias", N_VOCAB, base=0.0, noise=1.0)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd, bias=True, out_bias=out_bias)
        m.norm(p + ffn_norm + ".weight", d)
        swiglu(m, p, d, ff)
    m.write()


def exaone4(path, dtype, big=False):
    # llama_model_exaone4 (EXAONE 4.0 1.2B's form, no windows below 64 layers): no pre-norms, an
    # RMSNorm of every q and k head (attn_q_norm / attn_k_norm of the head width), post-norms of
    # both sublayers, SwiGLU, NEOX RoPE, tied head. The 32B's form: 64 layers (llama.cpp's
    # condition for windows), windows of 128 (the key; 4096 without it) on every layer but each
    # fourth (the default pattern), which has no RoPE.
    d, L, H, Hkv, hd, ff = 256, 64 if big else 4, 4, 2, 64, 512
    m = Model(path, "exaone4", 21 if big else 18, dtype)
    m.common(d, L, H, Hkv, embd_scale=1.0)  # rows of unit norm: the tied head's logits stay O(1)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 1000000.0)
    if big:
        m.u32("attention.sliding_window", 128)
    for l in range(L):
        post_norm_layer(m, f"blk.{l}.", d, H, Hkv, hd, ff, hd, hd)
    m.write()


def cohere(path, dtype, arch):
    # llama_model_command_r and llama_model_cohere2: LayerNorm without biases (attn_norm, output_norm
    # weights only), whose one attn_norm feeds both sublayers of a parallel residual; SwiGLU; NORM
    # RoPE; the head always token_embd; logits times logit_scale. cohere2: windows (128 here) on
    # every layer but each fourth (the default pattern), which has no RoPE.
    d, L, H, Hkv, ff = 256, 8 if arch == "cohere2" else 4, 4, 2, 512
    hd = d // H
    m = Model(path, arch, 22 if arch == "cohere2" else 23, dtype)
    m.common(d, L, H, Hkv, embd_scale=1.0)  # rows of unit norm: the tied head's logits stay O(1)
    m.f32("attention.layer_norm_epsilon", 1e-5)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 10000.0 if arch == "command-r" else 50000.0)
    m.f32("logit_scale", 1.0)  # with unit-norm embedding rows: logits of a few units
    if arch == "cohere2":
        m.u32("attention.sliding_window", 128)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        swiglu(m, p, d, ff)
    m.write()


def mistral3(path, dtype):
    # llama_model_mistral3 (Ministral 3): llama with YaRN (factor 4 over an original context of
    # 256, its yarn_beta_fast / yarn_beta_slow / yarn_log_multiplier keys read as they are) and
    # Llama 4's attention temperature (temperature_scale 0.3: the queries of positions 256 and on
    # times log(floor(p / 256) + 1) * 0.3 + 1, so a context of 512 reaches it).
    d, L, H, Hkv, ff = 256, 4, 4, 2, 512
    hd = d // H
    m = Model(path, "mistral3", 19, dtype)
    m.common(d, L, H, Hkv, n_ctx=8192)
    m.u32("feed_forward_length", ff)
    m.u32("rope.dimension_count", hd)
    m.f32("rope.freq_base", 1000000.0)
    m.w.add_string("mistral3.rope.scaling.type", "yarn")
    m.f32("rope.scaling.factor", 4.0)
    m.u32("rope.scaling.original_context_length", 256)
    m.f32("rope.scaling.yarn_beta_fast", 16.0)
    m.f32("rope.scaling.yarn_beta_slow", 2.0)
    m.f32("rope.scaling.yarn_log_multiplier", 1.0)
    m.f32("attention.temperature_scale", 0.3)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "ffn_norm.weight", d)
        swiglu(m, p, d, ff)
    m.write()


def lfm2(path, dtype, moe=False):
    # llama_model_lfm2 (LFM2-350M's form, shrunk): 6 layers of 256, gated short convolutions with
    # attention layers interleaved (conv, conv, attn, conv, attn, conv: the zeros of the per-layer
    # attention.head_count_kv array mark the conv layers), each layer's mixer under the "operator
    # norm" attn_norm and a SwiGLU of 512 under ffn_norm. A conv layer: in_proj to [B | C | x] of
    # 3 * 256, y = out_proj(C * conv(B * x)), conv a causal filter of shortconv.l_cache 3 taps per
    # channel (shortconv.conv.weight ne {3, 256}, F32 as the converter writes it and llama-quantize
    # keeps it; the 2 previous tokens' state starts at zero). An attention layer: heads 4/2 of
    # 64 (n_embd / head_count: llama.cpp binds attn_q and attn_output n_embd square), an RMSNorm of
    # every q and k head before NEOX RoPE. No rope.dimension_count (the converter writes none: the
    # head width). The final norm is named token_embd_norm; the head is tied to token_embd, as
    # LFM2's. moe (llama_model_lfm2moe, LFM2-8B-A1B's form): 2 leading dense layers
    # (leading_dense_block_count), then 16 experts of expert_feed_forward_length 256, top-4, by
    # sigmoid scores (expert_gating_func, required) with the exp_probs_b selection bias,
    # renormalised (fixed by its graph), unscaled (expert_weights_scale is not read); an untied head.
    d, L, H, Hkv, ff, n_conv = 256, 6, 4, 2, 512, 3
    E, k, exp_ff, n_dense = 16, 4, 256, 2
    hd = d // H
    attn = [False, False, True, False, True, False]
    arch = "lfm2moe" if moe else "lfm2"
    m = Model(path, arch, 62 if moe else 60, dtype)
    m.common(d, L, H, [Hkv if a else 0 for a in attn], eps=1e-5, embd_scale=None if moe else 1.0,
             out_norm="token_embd_norm")  # lfm2's tied head: unit-norm rows keep logits O(1)
    if moe:
        m.moe(ff, E, k, exp_ff)
        m.u32("leading_dense_block_count", n_dense)
        m.u32("expert_gating_func", 2)
    else:
        m.u32("feed_forward_length", ff)
    m.u32("shortconv.l_cache", n_conv)
    m.f32("rope.freq_base", 1000000.0)
    if moe:
        m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        if attn[l]:
            dense_attention(m, p, d, H, Hkv, hd)
            m.norm(p + "attn_q_norm.weight", hd)
            m.norm(p + "attn_k_norm.weight", hd)
        else:
            m.matrix(p + "shortconv.in_proj.weight", [d, 3 * d])
            m.matrix(p + "shortconv.conv.weight", [n_conv, d], dtype=np.float32)  # unit output
            m.matrix(p + "shortconv.out_proj.weight", [d, d], scale=0.7)
        m.norm(p + "ffn_norm.weight", d)
        if moe and l >= n_dense:
            m.experts(p, d, exp_ff, E)
            m.norm(p + "exp_probs_b.bias", E, base=0.0, noise=0.3)
        else:
            swiglu(m, p, d, ff)
    m.write()


def qwen35(path, dtype, mix=False, moe=False):
    # llama_model_qwen35 (Qwen3.5's dense form, shrunk): layers of 256 that are either a gated
    # DeltaNet (src/models/qwen35.cpp build_layer_attn_linear) or a gated attention layer, each under
    # attn_norm, then a SwiGLU of 512 under post_attention_norm (the FFN's pre-norm). DeltaNet:
    # attn_qkv to [q | k | v] (2 query/key heads of ssm.state_size 64, ssm.time_step_rank value
    # heads of 64: conv_dim 2*128 + value_dim), attn_gate to z, ssm_alpha and ssm_beta to one value
    # per value head, a causal depthwise convolution of ssm.conv_kernel 4 taps (ssm_conv1d ne
    # {4, conv_dim}, F32), SiLU, L2-normalised q and k, gates g = softplus(alpha + ssm_dt.bias) *
    # ssm_a (ssm_a = -exp(A_log), stored negated by the converter, F32), beta = sigmoid, the delta
    # rule per value head (query/key head h % group_count: the converter tiles the value heads),
    # then rmsnorm(o; ssm_norm) * silu(z) and ssm_out. Attention: heads 4/2 of 64 (key_length),
    # attn_q giving [q_h | gate_h] per head (2 * 256), per-head RMSNorm of q and k, interleaved
    # M-RoPE over rope.dimension_count 32 of the 64 dims (sections [6, 5, 5, 0]), the output times
    # sigmoid(gate). The plain form: 4 layers, llama.cpp's default full_attention_interval 4 (no key:
    # layer 3 is attention), 4 value heads, a tied head. mix: 5 layers given by
    # attention.recurrent_layers (BOOLs: attention on 1 and 4), 2 value heads, an untied head.
    # moe (llama_model_qwen35moe, Qwen3.5-35B-A3B's form): the plain form's layers with, in place of
    # the SwiGLU, 16 experts of expert_feed_forward_length 256 top-4 under a softmax renormalised
    # (fixed by its graph, unscaled) and a shared expert of expert_shared_feed_forward_length 512
    # times sigmoid(ffn_gate_inp_shexp . h) (a 1-D tensor of n_embd); an untied head.
    E, k, exp_ff, sh_ff = 16, 4, 256, 512
    d, H, Hkv, hd, ff = 256, 4, 2, 64, 512
    S, n_k, d_conv = 64, 2, 4
    n_v = 2 if mix else 4
    recurrent = [True, False, True, True, False] if mix else [True, True, True, False]
    L = len(recurrent)
    key_dim, value_dim = n_k * S, n_v * S
    conv_dim = 2 * key_dim + value_dim
    arch = "qwen35moe" if moe else "qwen35"
    m = Model(path, arch, 65 if moe else 64 if mix else 63, dtype)
    tied = not mix and not moe
    m.common(d, L, H, Hkv, eps=1e-6, embd_scale=1.0 if tied else None)  # the tied head: unit-norm rows
    if moe:
        m.moe(ff, E, k, exp_ff)
        m.u32("expert_shared_feed_forward_length", sh_ff)
    else:
        m.u32("feed_forward_length", ff)
    m.u32("attention.key_length", hd)
    m.u32("attention.value_length", hd)
    m.u32("rope.dimension_count", 32)
    m.f32("rope.freq_base", 10000000.0)
    m.w.add_array(f"{arch}.rope.dimension_sections", [6, 5, 5, 0])
    m.u32("ssm.conv_kernel", d_conv)
    m.u32("ssm.state_size", S)
    m.u32("ssm.group_count", n_k)
    m.u32("ssm.time_step_rank", n_v)
    m.u32("ssm.inner_size", value_dim)
    if mix:
        m.w.add_array("qwen35.attention.recurrent_layers", recurrent)
    if not tied:
        m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        if recurrent[l]:
            m.matrix(p + "attn_qkv.weight", [d, conv_dim])
            m.matrix(p + "attn_gate.weight", [d, value_dim])
            m.matrix(p + "ssm_alpha.weight", [d, n_v])
            m.matrix(p + "ssm_beta.weight", [d, n_v], scale=2.0)
            m.matrix(p + "ssm_conv1d.weight", [d_conv, conv_dim], dtype=np.float32)  # unit output
            m.norm(p + "ssm_dt.bias", n_v, base=0.5, noise=0.5)
            m.w.add_tensor(p + "ssm_a", (-np.exp(m.rng.uniform(-1.0, 0.5, n_v))).astype(np.float32))
            m.norm(p + "ssm_norm.weight", S)
            m.matrix(p + "ssm_out.weight", [value_dim, d], scale=0.7)
        else:
            m.matrix(p + "attn_q.weight", [d, 2 * H * hd])
            m.matrix(p + "attn_k.weight", [d, Hkv * hd])
            m.matrix(p + "attn_v.weight", [d, Hkv * hd])
            m.matrix(p + "attn_output.weight", [H * hd, d], scale=0.7)
            m.norm(p + "attn_q_norm.weight", hd)
            m.norm(p + "attn_k_norm.weight", hd)
        m.norm(p + "post_attention_norm.weight", d)
        if moe:
            m.experts(p, d, exp_ff, E)
            m.matrix(p + "ffn_gate_inp_shexp.weight", [d], scale=2.0, dtype=np.float32)
            m.matrix(p + "ffn_gate_shexp.weight", [d, sh_ff])
            m.matrix(p + "ffn_up_shexp.weight", [d, sh_ff])
            m.matrix(p + "ffn_down_shexp.weight", [sh_ff, d], scale=0.7)
        else:
            swiglu(m, p, d, ff)
    m.write()


def qwen3next(path, dtype, legacy=False):
    # llama_model_qwen3next (Qwen3-Next-80B-A3B's form, shrunk): qwen35moe's layers (gated DeltaNet or
    # gated attention under attn_norm; experts and the sigmoid-gated shared expert under
    # post_attention_norm) with Qwen3-Next's differences: plain split-halves RoPE over
    # rope.dimension_count 16 of the 64 dims (no sections), beta and alpha from one ssm_ba giving
    # [beta (r) | alpha (r)] per query/key head, and the value heads of query/key head g being
    # g r .. g r + r - 1 (llama.cpp repeats q and k interleaved; r = 3 here). 5 layers, attention on
    # 3 (llama.cpp's default full_attention_interval 4) and 4 (attention.recurrent_layers absent:
    # the interval's), a separate head. legacy: the older converters' ssm_in ([q | k | v | z] per
    # query/key head) in place of attn_qkv and attn_gate.
    E, k, exp_ff, sh_ff = 8, 2, 256, 384
    d, H, Hkv, hd = 256, 4, 2, 64
    S, n_k, n_v, d_conv = 64, 2, 6, 4
    r = n_v // n_k
    L = 5
    recurrent = [(l + 1) % 4 != 0 for l in range(L)]
    key_dim, value_dim = n_k * S, n_v * S
    conv_dim = 2 * key_dim + value_dim
    m = Model(path, "qwen3next", 90 if legacy else 89, dtype)
    m.common(d, L, H, Hkv, eps=1e-6)
    m.moe(512, E, k, exp_ff)
    m.u32("expert_shared_feed_forward_length", sh_ff)
    m.u32("attention.key_length", hd)
    m.u32("attention.value_length", hd)
    m.u32("rope.dimension_count", 16)
    m.f32("rope.freq_base", 10000.0)
    m.u32("ssm.conv_kernel", d_conv)
    m.u32("ssm.state_size", S)
    m.u32("ssm.group_count", n_k)
    m.u32("ssm.time_step_rank", n_v)
    m.u32("ssm.inner_size", value_dim)
    m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        if recurrent[l]:
            if legacy:
                m.matrix(p + "ssm_in.weight", [d, conv_dim + value_dim])
            else:
                m.matrix(p + "attn_qkv.weight", [d, conv_dim])
                m.matrix(p + "attn_gate.weight", [d, value_dim])
            m.matrix(p + "ssm_ba.weight", [d, 2 * n_v], scale=2.0)
            m.matrix(p + "ssm_conv1d.weight", [d_conv, conv_dim], dtype=np.float32)  # unit output
            m.norm(p + "ssm_dt.bias", n_v, base=0.5, noise=0.5)
            m.w.add_tensor(p + "ssm_a", (-np.exp(m.rng.uniform(-1.0, 0.5, n_v))).astype(np.float32))
            m.norm(p + "ssm_norm.weight", S)
            m.matrix(p + "ssm_out.weight", [value_dim, d], scale=0.7)
        else:
            m.matrix(p + "attn_q.weight", [d, 2 * H * hd])
            m.matrix(p + "attn_k.weight", [d, Hkv * hd])
            m.matrix(p + "attn_v.weight", [d, Hkv * hd])
            m.matrix(p + "attn_output.weight", [H * hd, d], scale=0.7)
            m.norm(p + "attn_q_norm.weight", hd)
            m.norm(p + "attn_k_norm.weight", hd)
        m.norm(p + "post_attention_norm.weight", d)
        m.experts(p, d, exp_ff, E)
        m.matrix(p + "ffn_gate_inp_shexp.weight", [d], scale=2.0, dtype=np.float32)
        m.matrix(p + "ffn_gate_shexp.weight", [d, sh_ff])
        m.matrix(p + "ffn_up_shexp.weight", [d, sh_ff])
        m.matrix(p + "ffn_down_shexp.weight", [sh_ff, d], scale=0.7)
    m.write()


def mamba2_keys(m, d_inner, n_ssm, S, d_conv, n_group):
    # The Mamba-2 sizes (ssm.*), in the order granite_hybrid, mamba2 and nemotron_h write them.
    m.u32("ssm.conv_kernel", d_conv)
    m.u32("ssm.inner_size", d_inner)
    m.u32("ssm.state_size", S)
    m.u32("ssm.time_step_rank", n_ssm)
    m.u32("ssm.group_count", n_group)


def mamba2_mixer(m, p, d, d_inner, n_ssm, S, d_conv, n_group):
    # One Mamba-2 mixer's tensors (src/models/granite-hybrid.cpp and mamba2.cpp's create_tensor
    # calls): ssm_in to [z | xBC | dt], the convolution's taps and bias (F32), the dt bias, A =
    # -exp(A_log) and D as {1, heads}, the grouped norm as {d_inner / groups, groups}, ssm_out.
    conv_dim = d_inner + 2 * n_group * S
    m.matrix(p + "ssm_in.weight", [d, d_inner + conv_dim + n_ssm])
    m.matrix(p + "ssm_conv1d.weight", [d_conv, conv_dim], dtype=np.float32)
    m.norm(p + "ssm_conv1d.bias", conv_dim, base=0.0, noise=0.2)
    m.norm(p + "ssm_dt.bias", n_ssm, base=0.5, noise=0.5)
    m.w.add_tensor(p + "ssm_a", (-np.exp(m.rng.uniform(-1.0, 0.5, (n_ssm, 1)))).astype(np.float32))
    m.w.add_tensor(p + "ssm_d", m.rng.standard_normal((n_ssm, 1)).astype(np.float32))
    m.w.add_tensor(p + "ssm_norm.weight",
                   (1.0 + 0.3 * m.rng.standard_normal((n_group, d_inner // n_group))).astype(np.float32))
    m.matrix(p + "ssm_out.weight", [d_inner, d], scale=0.7)


def granite_hybrid(path, dtype, moe=False):
    # llama_model_granite_hybrid (Granite 4.0 H, shrunk): 4 layers of 256, Mamba-2 mixers where
    # attention.head_count_kv (per layer) is 0 (layers 0, 1 and 3) and granite's attention on layer 2
    # (heads 4/2 of 64, adjacent-pair RoPE), granite's multipliers (embedding_scale, residual_scale on
    # both sublayers' outputs, attention.scale, logit_scale), ffn_norm before the FFN. A Mamba-2
    # mixer (src/models/mamba-base.cpp build_mamba2_layer): ssm_in to [z | xBC | dt] (d_inner 512 =
    # 2 n_embd, as llama.cpp asserts; 8 heads of 64, ssm.state_size 64, ssm.group_count groups of B
    # and C), a causal depthwise convolution of ssm.conv_kernel 4 taps with its bias (F32), SiLU, the
    # scan with dt = softplus(dt + ssm_dt.bias), A = ssm_a (negative, {1, heads}), D = ssm_d, then
    # y * silu(z) RMS-normed over each group's channels (ssm_norm {d_inner / groups, groups}) and
    # ssm_out. Dense: SwiGLUs of 512, one group, RoPE, a tied head. moe (Granite 4.0 H Tiny's form):
    # 16 experts of feed_forward_length 256 top-4 (softmax, renormalised: fixed by its graph) plus an
    # ungated shared expert of expert_shared_feed_forward_length 512 in every layer, 2 groups, no
    # RoPE (rope.scaling.finetuned false), an untied head.
    d, H, Hkv, hd, ff = 256, 4, 2, 64, 512
    d_inner, n_ssm, S, d_conv = 512, 8, 64, 4
    n_group = 2 if moe else 1
    E, k, exp_ff, sh_ff = 16, 4, 256, 512
    mamba = [True, True, False, True]
    L = len(mamba)
    m = Model(path, "granitehybrid", 67 if moe else 66, dtype)
    m.common(d, L, H, [0 if r else Hkv for r in mamba], eps=1e-5, embd_scale=None if moe else 1.0)
    if moe:
        m.moe(exp_ff, E, k)
        m.u32("expert_shared_feed_forward_length", sh_ff)
        m.w.add_bool("granitehybrid.rope.scaling.finetuned", False)
        m.head(d)
    else:
        m.u32("feed_forward_length", ff)
    m.f32("rope.freq_base", 10000.0)
    m.f32("embedding_scale", 2.0)
    m.f32("residual_scale", 0.5)
    m.f32("attention.scale", 0.75 / np.sqrt(hd))
    m.f32("logit_scale", 2.0)
    mamba2_keys(m, d_inner, n_ssm, S, d_conv, n_group)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        if mamba[l]:
            mamba2_mixer(m, p, d, d_inner, n_ssm, S, d_conv, n_group)
        else:
            dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "ffn_norm.weight", d)
        if moe:
            m.experts(p, d, exp_ff, E)
            m.matrix(p + "ffn_gate_shexp.weight", [d, sh_ff])
            m.matrix(p + "ffn_up_shexp.weight", [d, sh_ff])
            m.matrix(p + "ffn_down_shexp.weight", [sh_ff, d], scale=0.7)
        else:
            swiglu(m, p, d, ff)
    m.write()


def mamba2(path, dtype):
    # llama_model_mamba2 (Mamba-2, shrunk; src/models/mamba.cpp with build_mamba2_layer): 4 layers of
    # 256, each x += mixer(attn_norm(x)) with granite_hybrid's Mamba-2 mixer (d_inner 512, 8 heads of
    # 64, state 64, 2 groups, a convolution of 4 taps with its bias, required here), no feed-forward,
    # no attention (head_count and feed_forward_length 0, as the converter writes them), a tied head.
    d, L, d_inner, n_ssm, S, d_conv, n_group = 256, 4, 512, 8, 64, 4, 2
    m = Model(path, "mamba2", 68, dtype)
    m.u32("context_length", 4096)
    m.u32("embedding_length", d)
    m.u32("block_count", L)
    m.u32("feed_forward_length", 0)
    m.u32("attention.head_count", 0)
    m.f32("attention.layer_norm_rms_epsilon", 1e-5)
    byte_vocab(m.w)
    m.matrix("token_embd.weight", [d, N_VOCAB], scale=1.0)
    m.norm("output_norm.weight", d)
    mamba2_keys(m, d_inner, n_ssm, S, d_conv, n_group)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        mamba2_mixer(m, p, d, d_inner, n_ssm, S, d_conv, n_group)
    m.write()


def nemotron_h(path, dtype, moe=False):
    # llama_model_nemotron_h (Nemotron-H / Nemotron Nano 2, shrunk): 6 layers of 256 in the pattern
    # M M * - M - (M: a Mamba-2 mixer as mamba2_mixer's, 8 heads of 64, state 64, 2 groups, its
    # convolution bias; *: attention, heads 4/2 of key_length 64, no RoPE; -: an ungated MLP of
    # 512 with a squared ReLU), each the layer's one sublayer under its attn_norm: the kinds come
    # from attention.head_count_kv and feed_forward_length per layer (0 where a layer has no
    # attention, no MLP). layer_norm_epsilon (required by llama.cpp) and the RMS epsilon; a
    # separate head. moe: nemotron_h_moe (Nemotron 3 Nano, shrunk), its MLP layers 16 ungated
    # squared-ReLU experts of 256 top-4 and one such shared expert of 512, sigmoid scores with the
    # exp_probs_b selection bias, renormalised and scaled by 2.5.
    d, H, Hkv, hd, ff = 256, 4, 2, 64, 512
    d_inner, n_ssm, S, d_conv, n_group = 512, 8, 64, 4, 2
    E, k, exp_ff = 16, 4, 256
    kinds = "MM*-M-"
    arch = "nemotron_h_moe" if moe else "nemotron_h"
    m = Model(path, arch, 70 if moe else 69, dtype)
    m.common(d, len(kinds), H, [Hkv if k == "*" else 0 for k in kinds], eps=1e-5)
    m.f32("attention.layer_norm_epsilon", 1e-5)
    m.w.add_array(f"{arch}.feed_forward_length", [(k * exp_ff if moe else ff) if kd == "-" else 0 for kd in kinds])
    if moe:
        m.u32("expert_count", E)
        m.u32("expert_used_count", k)
        m.u32("expert_feed_forward_length", exp_ff)
        m.u32("expert_shared_feed_forward_length", ff)
        m.w.add_bool(f"{arch}.expert_weights_norm", True)
        m.f32("expert_weights_scale", 2.5)
    m.u32("attention.key_length", hd)
    m.u32("attention.value_length", hd)
    mamba2_keys(m, d_inner, n_ssm, S, d_conv, n_group)
    m.head(d)
    for l, kind in enumerate(kinds):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        if kind == "M":
            mamba2_mixer(m, p, d, d_inner, n_ssm, S, d_conv, n_group)
        elif kind == "*":
            dense_attention(m, p, d, H, Hkv, hd)
        elif moe:
            m.matrix(p + "ffn_gate_inp.weight", [d, E], scale=2.0, dtype=np.float32)
            m.norm(p + "exp_probs_b.bias", E, base=0.0, noise=0.3)
            m.matrix(p + "ffn_up_exps.weight", [d, exp_ff, E])
            m.matrix(p + "ffn_down_exps.weight", [exp_ff, d, E], scale=0.7)
            m.matrix(p + "ffn_up_shexp.weight", [d, ff])
            m.matrix(p + "ffn_down_shexp.weight", [ff, d], scale=0.7)
        else:
            m.matrix(p + "ffn_up.weight", [d, ff])
            m.matrix(p + "ffn_down.weight", [ff, d], scale=0.7)
    m.write()


def smallthinker(path, dtype, swa=False):
    # llama_model_smallthinker (PowerInfer's SmallThinker, shrunk): 4 layers of 256, every one MoE:
    # 8 experts of expert_feed_forward_length 256 (feed_forward_length the same, as the converter
    # writes it), top-2, no shared expert and no selection bias, each a ReLU-gated GLU
    # (down(relu(gate x) * up x)); the router (ffn_gate_inp) reads the layer's INPUT, the residual
    # stream before attn_norm, not the ffn_norm'd input the experts get; the top-k weights
    # renormalised (fixed by its graph), unscaled (expert_weights_scale is not read), the scores
    # from expert_gating_func (required: llama.cpp aborts on the default none): softmax (1) here,
    # sigmoid (2) in the swa form. Attention: RMSNorm, q/k/v/o without biases, heads 4/2 of
    # key_length 64 (written as the converter does from head_dim; n_rot follows it), NEOX RoPE,
    # 1/sqrt(head_dim) scale; an untied head. Without attention.sliding_window every layer rotates
    # (llama.cpp sets n_no_rope_layer_step to n_layer). swa (SmallThinker's sliding_window_layout
    # form: the converter writes attention.sliding_window and no pattern): llama.cpp FORCES the
    # window to 4096 whatever the key says, makes layer l local unless l % 4 == 0 (load_swa_pattern
    # 4, dense first), gives the local layers rope.freq_base_swa (default rope.freq_base) and the
    # global ones (l % 4 == 0) NO RoPE at all (n_no_rope_layer_step 4) -- unless n_layer is 4, when
    # its test "n_no_rope_layer_step == n_layer" rotates every layer: so 5 layers here (0 and 4
    # global, unrotated; 1-3 local). At ctx 512 the forced window never bites, so what this model
    # checks is the unrotated global layers and the local layers' base (10000 here against the
    # global 1000000, which no layer uses); sigmoid scores, and the head tied to token_embd.
    d, L, H, Hkv, hd, E, k, exp_ff = 256, 5 if swa else 4, 4, 2, 64, 8, 2, 256
    m = Model(path, "smallthinker", 65 if swa else 64, dtype)
    m.common(d, L, H, Hkv, embd_scale=1.0 if swa else None)  # tied: unit-norm rows keep logits O(1)
    m.moe(exp_ff, E, k, exp_ff)
    m.u32("expert_gating_func", 2 if swa else 1)
    m.u32("attention.key_length", hd)
    m.u32("attention.value_length", hd)
    m.f32("rope.freq_base", 1000000.0)
    if swa:
        m.u32("attention.sliding_window", 64)  # any value > 0: llama.cpp uses 4096
        m.f32("rope.freq_base_swa", 10000.0)
    else:
        m.head(d)
    for l in range(L):
        p = f"blk.{l}."
        m.norm(p + "attn_norm.weight", d)
        dense_attention(m, p, d, H, Hkv, hd)
        m.norm(p + "ffn_norm.weight", d)
        m.experts(p, d, exp_ff, E)
    m.write()


WRITERS = {
    "llama4": llama4,
    "llama4-maverick": lambda p, t: llama4(p, t, maverick=True),
    "qwen3moe": qwen3moe,
    "olmoe": olmoe,
    "phi3": phi3,
    "gemma2": gemma2,
    "deepseek2": lambda p, t: deepseek2(p, t, False),
    "deepseek2-lite": lambda p, t: deepseek2(p, t, True),
    "mistral4": lambda p, t: deepseek2(p, t, False, "mistral4"),
    "nemotron_h_moe": lambda p, t: nemotron_h(p, t, moe=True),
    "afmoe": afmoe,
    "granite": lambda p, t: granite(p, t, False),
    "granitemoe": lambda p, t: granite(p, t, True),
    "granite-norope": lambda p, t: granite(p, t, False, rope=False),
    "olmo2": olmo2,
    "olmo3": lambda p, t: olmo2(p, t, olmo3=True),
    "smollm3": smollm3,
    "stablelm": stablelm,
    "starcoder2": starcoder2,
    "gemma": gemma,
    "gptneox": gptneox,
    "phi2": phi2,
    "ernie4_5": lambda p, t: llama_like(p, t, "ernie4_5", 16, out_bias=True),
    "exaone": lambda p, t: llama_like(p, t, "exaone", 17, freqs=True),
    "exaone4": exaone4,
    "exaone4-32b": lambda p, t: exaone4(p, t, big=True),
    "mistral3": mistral3,
    "internlm2": lambda p, t: llama_like(p, t, "internlm2", 24),
    "hunyuan-dense": hunyuan_dense,
    "maincoder": maincoder,
    "qwen3vl": qwen3vl,
    "glm4": lambda p, t: glm4(p, t, False),
    "glm4-mrope": lambda p, t: glm4(p, t, True),
    "minicpm": lambda p, t: minicpm(p, t, True),
    "minicpm-defaults": lambda p, t: minicpm(p, t, False),
    "qwen2vl": lambda p, t: llama_like(p, t, "qwen2vl", 25, sections=[8, 12, 12, 0], head_bias=True),
    "seed_oss": lambda p, t: llama_like(p, t, "seed_oss", 26, ffn_norm="post_attention_norm"),
    "command-r": lambda p, t: cohere(p, t, "command-r"),
    "cohere2": lambda p, t: cohere(p, t, "cohere2"),
    "qwen3vlmoe": lambda p, t: qwen3moe(p, t, "qwen3vlmoe", 33, 100.0, [24, 20, 20, 0]),
    "deepseek": deepseek,
    "dots1": dots1,
    "glm4moe": glm4moe,
    "ernie4_5-moe": ernie4_5_moe,
    "bailingmoe2": bailingmoe2,
    "hunyuan-moe": hunyuan_moe,
    "starcoder": starcoder,
    "gpt-oss": gpt_oss,
    "minimax-m2": minimax_m2,
    "arcee": arcee,
    "apertus": apertus,
    "nanbeige": nanbeige,
    "nanbeige-skip": lambda p, t: nanbeige(p, t, skip=True),
    "maple": maple,
    "spark2_5": spark2_5,
    "nemotron": nemotron,
    "jais2": lambda p, t: nemotron(p, t, jais2=True),
    # ALiBi: 8 heads (bloom, refact), 12 (mpt: interleaved slopes, rows of 384 that the K-quants leave
    # to their fallback types), 4 (jais).
    "bloom": lambda p, t: alibi_model(p, t, "bloom", 43, 256, 4, 8, 8, 1024, embd_norm=True, tied=True),
    "mpt": lambda p, t: alibi_model(p, t, "mpt", 44, 384, 4, 12, 12, 768, biases=False,
                                    keys={"attention.max_alibi_bias": 8.0, "attention.clamp_kqv": 1.5}),
    "refact": lambda p, t: alibi_model(p, t, "refact", 45, 256, 4, 8, 1, 512, layer_norm=False),
    "jais": lambda p, t: alibi_model(p, t, "jais", 46, 256, 4, 4, 4, 512, gated=True,
                                     keys={"attention.max_alibi_bias": 8.0}),
    "qwen": lambda p, t: llama_family(p, t, "qwen", 53),
    "xverse": lambda p, t: llama_family(p, t, "xverse", 54),
    "orion": lambda p, t: llama_family(p, t, "orion", 55),
    "codeshell": lambda p, t: llama_family(p, t, "codeshell", 56),
    "plamo": lambda p, t: llama_family(p, t, "plamo", 57),
    "chatglm": lambda p, t: llama_family(p, t, "chatglm", 58),
    "exaone-moe": exaone_moe,
    "dbrx": dbrx,
    "phimoe": phimoe,
    "falcon": lambda p, t: falcon(p, t, False),
    "falcon40b": lambda p, t: falcon(p, t, True),
    "olmo": olmo,
    "baichuan": lambda p, t: baichuan(p, t, 32),
    "baichuan13b": lambda p, t: baichuan(p, t, 40),
    "lfm2": lfm2,
    "lfm2moe": lambda p, t: lfm2(p, t, moe=True),
    "smallthinker": smallthinker,
    "smallthinker-swa": lambda p, t: smallthinker(p, t, swa=True),
    "qwen35": qwen35,
    "qwen35-mix": lambda p, t: qwen35(p, t, mix=True),
    "qwen35moe": lambda p, t: qwen35(p, t, moe=True),
    "qwen3next": qwen3next,
    "mellum": mellum,
    "bailingmoe": bailingmoe,
    "qwen3next-legacy": lambda p, t: qwen3next(p, t, legacy=True),
    "granitehybrid": granite_hybrid,
    "granitehybrid-moe": lambda p, t: granite_hybrid(p, t, moe=True),
    "mamba2": mamba2,
    "nemotron_h": nemotron_h,
}

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    args = sys.argv[2:]
    f32 = "--f32" in args
    names = [a for a in args if a != "--f32"] or list(WRITERS)
    os.makedirs(out, exist_ok=True)
    for name in names:
        if name not in WRITERS:
            sys.exit(f"conformance-models: unknown architecture {name!r} (one of {', '.join(WRITERS)})")
        path = os.path.join(out, f"{name}-{'f32' if f32 else 'f16'}.gguf")
        WRITERS[name](path, np.float32 if f32 else np.float16)
        print(path)
