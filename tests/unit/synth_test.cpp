// Synthetic models: deterministic bytes, loadable, text-like non-degenerate outputs, drafts that
// share their target's tensors bit for bit, and greedy draft/target agreement in [0.5, 0.9]
// (measured on the tiny pair; the 144M target/draft pair is measured in bench_forward).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "base/error.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/synth.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;

namespace {

std::string scratch(const std::string& name) { return (specmoe::testing::scratch_dir() / name).string(); }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const std::vector<std::string> kPrompts = {"Once upon a time", "The quick brown fox", "int main() {",
                                           "In 1905, Einstein", "Hello"};

}  // namespace

TEST(Synth, SameSeedSameBytesOtherSeedOtherBytes) {
  synth_write("tiny", scratch("synth_a.gguf"), 7);
  synth_write("tiny", scratch("synth_b.gguf"), 7);
  synth_write("tiny", scratch("synth_c.gguf"), 8);
  const std::string a = read_bytes(scratch("synth_a.gguf"));
  ASSERT_GT(a.size(), 100000u);
  EXPECT_EQ(a, read_bytes(scratch("synth_b.gguf")));
  EXPECT_NE(a, read_bytes(scratch("synth_c.gguf")));
}

TEST(Synth, PresetsAreListedAndUnknownOnesRejected) {
  const auto presets = synth_presets();
  // tiny, tiny-draft, tiny-256, target, draft, moe-tiny, qwen2moe-tiny, moe-target, moe-draft,
  // target-1b, qwen3-tiny, qwen3-yarn-tiny, gemma3-tiny, llama3-tiny, qwen3moe-tiny, olmoe-tiny,
  // phi3-tiny, gemma2-tiny, granite-tiny, granitemoe-tiny, olmo2-tiny, smollm3-tiny, stablelm-tiny,
  // gemma-tiny, starcoder2-tiny, gptneox-tiny, phi2-tiny, ernie4_5-tiny, exaone-tiny, exaone4-tiny,
  // olmo3-tiny, exaone4-32b-tiny, command-r-tiny, cohere2-tiny, internlm2-tiny, qwen2vl-tiny, seed_oss-tiny,
  // minicpm-tiny, glm4-tiny, hunyuan-dense-tiny, maincoder-tiny, apertus-tiny, qwen3next-tiny,
  // qwen3next-legacy-tiny, mellum-tiny, bailingmoe-tiny, nanbeige-tiny, llama4-tiny, llama4-128e-tiny, mistral4-tiny, nemotron_h_moe-tiny, afmoe-tiny, qwen3vl-tiny, qwen3vlmoe-tiny, deepseek-tiny,
  // dots1-tiny, glm4moe-tiny, ernie4_5-moe-tiny, bailingmoe2-tiny, hunyuan-moe-tiny, minimax-m2-tiny,
  // gpt-oss-tiny, starcoder-tiny, bloom-tiny, mpt-tiny, refact-tiny, jais-tiny, falcon-tiny, falcon40b-tiny,
  // olmo-tiny, baichuan-tiny, baichuan13b-tiny, dbrx-tiny, phimoe-tiny, qwen-tiny, xverse-tiny, orion-tiny,
  // codeshell-tiny, plamo-tiny, chatglm-tiny, exaone-moe-tiny, lfm2-tiny, lfm2-swa-tiny, lfm2moe-tiny, smallthinker-tiny, smallthinker-swa-tiny, qwen35-tiny, qwen35-mix-tiny, qwen35moe-tiny, qwen35-mtp-tiny, qwen35moe-mtp-tiny, qwen35-mtp-only-tiny, glm4moe-mtp-tiny, deepseek2-mtp-tiny, eagle3-tiny, eagle3-d2t-tiny, granitehybrid-tiny, granitehybrid-moe-tiny, mamba2-tiny, nemotron_h-tiny, arcee-tiny, nemotron-tiny, jais2-tiny, maple-tiny, spark2_5-tiny, mistral3-tiny, deepseek2-tiny,
  // deepseek2-lite-tiny, qwen3moe-target, deepseek2-target
  ASSERT_EQ(presets.size(), 112u);
  for (const std::string& p : presets) {
    const std::string name = p.substr(0, p.find(':'));
    EXPECT_NO_THROW(synth_spec(name)) << name;
    EXPECT_GT(p.size(), name.size() + 10) << "description missing: " << p;
  }
  try {
    synth_spec("huge");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("huge"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("tiny"), std::string::npos);
  }
}

// The architecture presets load as the architecture they name, with its specifics read back.
TEST(Synth, ArchitecturePresetsLoad) {
  struct Case { const char* preset; Arch arch; };
  for (const Case& c : {Case{"qwen3-tiny", Arch::Qwen3}, Case{"qwen3-yarn-tiny", Arch::Qwen3},
                        Case{"gemma3-tiny", Arch::Gemma3}, Case{"llama3-tiny", Arch::Llama},
                        Case{"gemma3-tiny-q8_0", Arch::Gemma3}}) {
    SCOPED_TRACE(c.preset);
    const std::string path = scratch(std::string("synth_arch_") + c.preset + ".gguf");
    synth_write(c.preset, path, 3);
    auto m = Model::load(path);
    const ModelConfig& cfg = m->config();
    EXPECT_EQ(cfg.arch, c.arch);
    EXPECT_EQ(cfg.qk_norm, c.arch != Arch::Llama);
    EXPECT_EQ(cfg.head_dim, c.arch == Arch::Llama ? 16 : 32);
    EXPECT_EQ(cfg.rope_scaling == RopeScaling::Yarn, std::string(c.preset) == "qwen3-yarn-tiny");
    EXPECT_EQ(cfg.rope_freq_factors, c.arch == Arch::Llama);
    EXPECT_EQ(cfg.n_swa, c.arch == Arch::Gemma3 ? 4 : 0);
  }
  SynthSpec bad = synth_spec("qwen3-tiny");
  bad.n_swa = 4;  // sliding windows are gemma's
  EXPECT_THROW(synth_write(bad, scratch("synth_bad_swa.gguf"), 1), Error);
}

// The presets of issue 19's architectures: what each file holds in llama.cpp's layout and names.
TEST(Synth, MoEAndMlaArchitecturePresetsLoad) {
  struct Case { const char* preset; Arch arch; int n_expert, k; };
  for (const Case& c : {Case{"qwen3moe-tiny", Arch::Qwen3Moe, 16, 4}, Case{"olmoe-tiny", Arch::Olmoe, 8, 2},
                        Case{"phi3-tiny", Arch::Phi3, 0, 0}, Case{"gemma2-tiny", Arch::Gemma2, 0, 0},
                        Case{"deepseek2-tiny", Arch::Deepseek2, 8, 2}, Case{"deepseek2-lite-tiny", Arch::Deepseek2, 8, 2},
                        Case{"olmoe-tiny-q8_0", Arch::Olmoe, 8, 2}}) {
    SCOPED_TRACE(c.preset);
    const std::string path = scratch(std::string("synth_arch_") + c.preset + ".gguf");
    synth_write(c.preset, path, 3);
    auto m = Model::load(path);
    EXPECT_EQ(m->config().arch, c.arch);
    EXPECT_EQ(m->config().n_expert, c.n_expert);
    EXPECT_EQ(m->config().n_expert_used, c.k);
  }
  auto f = GGUFFile::open(scratch("synth_arch_deepseek2-tiny.gguf"));
  EXPECT_EQ(f->tensor("blk.1.attn_k_b.weight").ne, (std::vector<int64_t>{32, 32, 4}));  // {nope, rank, heads}
  EXPECT_EQ(f->tensor("blk.1.attn_v_b.weight").ne, (std::vector<int64_t>{32, 32, 4}));  // {rank, v_head, heads}
  EXPECT_EQ(f->tensor("blk.1.attn_kv_a_mqa.weight").ne, (std::vector<int64_t>{64, 48}));
  EXPECT_EQ(f->tensor("blk.0.ffn_gate.weight").ne, (std::vector<int64_t>{64, 128}));     // the dense lead layer
  EXPECT_EQ(f->tensor("blk.2.ffn_up_shexp.weight").ne, (std::vector<int64_t>{64, 64}));  // 2 shared experts of 32
  EXPECT_EQ(f->get_int("deepseek2.attention.key_length"), 48);
  EXPECT_EQ(f->get_int("deepseek2.attention.key_length_mla"), 48);
  EXPECT_EQ(f->get_int("deepseek2.attention.value_length"), 32);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight"), nullptr);  // the q LoRA
  auto p = GGUFFile::open(scratch("synth_arch_phi3-tiny.gguf"));
  EXPECT_EQ(p->tensor("blk.0.ffn_up.weight").ne, (std::vector<int64_t>{64, 192}));
  EXPECT_EQ(p->tensor("blk.0.attn_qkv.weight").ne, (std::vector<int64_t>{64, 192}));
  EXPECT_EQ(p->tensor("rope_factors_long.weight").ne, (std::vector<int64_t>{8}));
  SynthSpec bad = synth_spec("phi3-tiny");
  bad.kv_lora_rank = 16;  // latent attention is deepseek2's
  EXPECT_THROW(synth_write(bad, scratch("synth_bad_mla.gguf"), 1), Error);
}

// PRESET-TYPE names a preset with its matrices in another type; a type whose blocks do not
// divide the preset's rows is refused by name.
TEST(Synth, TypeSuffixSetsTheMatrixType) {
  SynthSpec s = synth_spec("tiny-q5_0");
  EXPECT_EQ(s.type, DType::Q5_0);
  EXPECT_EQ(s.n_embd, 64);
  EXPECT_EQ(s.name, "tiny-q5_0");
  EXPECT_EQ(synth_spec("tiny-256-IQ4_XS").type, DType::IQ4_XS);
  EXPECT_EQ(synth_spec("tiny-draft-q8_0").keep_layers, 1);
  EXPECT_EQ(synth_spec("target-q2_k").n_embd, 1024);
  EXPECT_THROW(synth_spec("tiny-q4_k_m"), Error);
  EXPECT_THROW(synth_spec("huge-q5_0"), Error);
  const std::string path = scratch("synth_tiny256_q3k.gguf");
  synth_write("tiny-256-q3_k", path, 5);
  auto f = GGUFFile::open(path);
  EXPECT_EQ(f->tensor("token_embd.weight").type, DType::Q3_K);
  EXPECT_EQ(f->tensor("blk.3.ffn_down.weight").type, DType::Q3_K);
  EXPECT_EQ(f->tensor("blk.0.attn_norm.weight").type, DType::F32);
  try {
    synth_write("tiny-q2_k", scratch("synth_bad_type.gguf"), 1);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Q2_K"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blocks of 256"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tiny-256"), std::string::npos) << msg;
  }
}

TEST(Synth, TinyLoadsAndGivesFiniteSpreadLogits) {
  const std::string path = scratch("synth_tiny_load.gguf");
  synth_write("tiny", path, 3);
  auto m = Model::load(path);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.n_vocab, 320);
  EXPECT_EQ(c.n_layer, 4);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(m->tokenizer().bos(), 1);
  const std::vector<int32_t> ids = m->tokenizer().encode("Hello, world", true);
  KVCache kv = m->new_cache(64);
  std::vector<float> logits;
  m->forward(ids, kv).logits.to_host(logits);
  for (size_t t = 0; t < ids.size(); ++t) {
    const float* row = logits.data() + t * c.n_vocab;
    float lo = row[0], hi = row[0];
    double mean = 0, var = 0;
    for (int j = 0; j < c.n_vocab; ++j) {
      ASSERT_TRUE(std::isfinite(row[j]));
      lo = std::min(lo, row[j]);
      hi = std::max(hi, row[j]);
      mean += row[j] / c.n_vocab;
    }
    for (int j = 0; j < c.n_vocab; ++j) var += (row[j] - mean) * (row[j] - mean) / c.n_vocab;
    // A spread of a few nats: neither uniform (std ~ 0) nor one-hot (std ~ 100).
    EXPECT_GT(std::sqrt(var), 0.5);
    EXPECT_LT(std::sqrt(var), 20.0);
  }
}

TEST(Synth, GreedyTextIsNotDegenerate) {
  const std::string path = scratch("synth_tiny_text.gguf");
  synth_write("tiny", path, 11);
  auto m = Model::load(path);
  std::set<int32_t> distinct;
  int printable = 0, total = 0;
  for (const std::string& prompt : kPrompts) {
    std::vector<int32_t> ids = m->tokenizer().encode(prompt, true);
    KVCache kv = m->new_cache(256);
    std::vector<float> logits;
    std::vector<int32_t> feed = ids;
    for (int step = 0; step < 60; ++step) {
      ForwardOptions o;
      o.logits_all = false;
      m->forward(feed, kv, o).logits.to_host(logits);
      const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      distinct.insert(next);
      const std::string piece = m->tokenizer().token_to_piece(next);
      printable += piece.size() == 1 && piece[0] >= 0x20 && piece[0] < 0x7f;
      ++total;
      feed = {next};
    }
  }
  EXPECT_GE(distinct.size(), 10u);       // not all the same token
  EXPECT_GE(printable, total * 8 / 10);  // mostly printable ASCII bytes
}

TEST(Synth, DraftSharesTheTargetsTensorsBitForBit) {
  synth_write("tiny", scratch("synth_pair_t.gguf"), 5);
  synth_write("tiny-draft", scratch("synth_pair_d.gguf"), 5);
  auto t = GGUFFile::open(scratch("synth_pair_t.gguf"));
  auto d = GGUFFile::open(scratch("synth_pair_d.gguf"));
  EXPECT_EQ(d->get_int("llama.block_count"), 1);
  EXPECT_EQ(t->get_int("llama.block_count"), 4);
  size_t compared = 0;
  for (const auto& dt : d->tensors()) {
    const GGUFTensorInfo& tt = t->tensor(dt.name);
    ASSERT_EQ(tt.nbytes, dt.nbytes) << dt.name;
    EXPECT_EQ(std::memcmp(tt.data, dt.data, dt.nbytes), 0) << dt.name;
    ++compared;
  }
  EXPECT_EQ(compared, 3u + 9u);  // token_embd, output_norm, output + one layer of 9 tensors
  EXPECT_EQ(d->find_tensor("blk.1.attn_q.weight"), nullptr);
}

TEST(Synth, TinyDraftAgreesWithTinyTargetMostButNotAllOfTheTime) {
  synth_write("tiny", scratch("synth_agree_t.gguf"), 1);
  synth_write("tiny-draft", scratch("synth_agree_d.gguf"), 1);
  auto t = Model::load(scratch("synth_agree_t.gguf"));
  auto d = Model::load(scratch("synth_agree_d.gguf"));
  const double agreement = synth_greedy_agreement(*t, *d, kPrompts, 100);
  std::printf("tiny / tiny-draft greedy agreement over %zu x 100 tokens: %.3f\n", kPrompts.size(), agreement);
  EXPECT_GE(agreement, 0.5);
  EXPECT_LE(agreement, 0.9);
}
