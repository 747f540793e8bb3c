// Writes the seed corpus of every fuzz target: small valid inputs the fuzzer mutates from.
//   fuzz_corpus OUT_DIR   ->  OUT_DIR/{gguf,tokenizer,toml,prompts}/<seed files>
// The text seeds committed in tests/fuzz/corpus/ come from this program (scripts/fuzz.sh --seeds
// regenerates them); the GGUF seeds are not committed: every build writes them into
// build/fuzz-seeds/ (target fuzz_seeds) and scripts/fuzz.sh into its build folder. Every file is a
// few KB at most; files named "valid-*" must be accepted by
// their target (tests/unit/fuzz_regression_test.cpp checks it).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <zlib.h>

#include "core/synth.h"
#include "fuzz_entry.h"

namespace fs = std::filesystem;
using namespace specmoe;
using namespace specmoe::core;

namespace {

fs::path g_out;

void put(const std::string& target, const std::string& name, std::string_view bytes) {
  fs::create_directories(g_out / target);
  std::ofstream out(g_out / target / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void put_gguf(const std::string& name, const GGUFWriter& w) {
  const fs::path tmp = fuzz::scratch_dir() / "seed.gguf";
  w.write(tmp.string());
  put("gguf", name, slurp(tmp));
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i % 17) - 2.0f;
  return v;
}

// A tiny model's metadata: `arch` with the keys ModelConfig::from_gguf reads.
void model_keys(GGUFWriter& w, const std::string& arch, bool moe) {
  w.set_string("general.architecture", arch);
  w.set_string("general.name", "fuzz seed " + arch);
  w.set_u32(arch + ".context_length", 64);
  w.set_u32(arch + ".embedding_length", 32);
  w.set_u32(arch + ".block_count", 1);
  w.set_u32(arch + ".feed_forward_length", 64);
  w.set_u32(arch + ".attention.head_count", 4);
  w.set_u32(arch + ".attention.head_count_kv", 2);
  if (arch == "gpt2") {
    w.set_f32(arch + ".attention.layer_norm_epsilon", 1e-5f);
  } else {
    w.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
    w.set_f32(arch + ".rope.freq_base", 10000.0f);
  }
  if (moe) {
    w.set_u32(arch + ".expert_count", 4);
    w.set_u32(arch + ".expert_used_count", 2);
    w.set_u32(arch + ".expert_feed_forward_length", 16);
  }
}

void gguf_seeds() {
  {  // tensors of every supported type, no vocabulary (n_vocab from <arch>.vocab_size)
    GGUFWriter w;
    model_keys(w, "llama", false);
    w.set_u32("llama.vocab_size", 300);
    w.add_tensor_f32("blk.0.attn_norm.weight", DType::F32, {32}, ramp(32));
    w.add_tensor_f32("blk.0.f16", DType::F16, {17, 3}, ramp(51));
    w.add_tensor_f32("blk.0.bf16", DType::BF16, {5}, ramp(5));
    w.add_tensor_f32("blk.0.q8_0", DType::Q8_0, {32, 2}, ramp(64));
    w.add_tensor_f32("blk.0.q4_0", DType::Q4_0, {32, 1}, ramp(32));
    w.add_tensor_f32("blk.0.q4_1", DType::Q4_1, {32, 1, 1, 1}, ramp(32));
    w.add_tensor_f32("blk.0.q4_k", DType::Q4_K, {256, 1}, ramp(256));
    w.add_tensor_f32("blk.0.q5_k", DType::Q5_K, {256}, ramp(256));
    w.add_tensor_f32("blk.0.q6_k", DType::Q6_K, {256, 1}, ramp(256));
    put_gguf("valid-llama-tensors.gguf", w);
  }
  {  // the synth byte vocabulary
    GGUFWriter w;
    model_keys(w, "llama", false);
    write_byte_vocab(w, 259);
    put_gguf("valid-llama-byte-vocab.gguf", w);
  }
  {  // small SentencePiece and BPE vocabularies
    GGUFWriter w;
    model_keys(w, "qwen2", false);
    write_vocab(w, fuzz::small_bpe_vocab("qwen2"));
    put_gguf("valid-qwen2-bpe-vocab.gguf", w);
  }
  {
    GGUFWriter w;
    model_keys(w, "llama", false);
    write_vocab(w, fuzz::small_spm_vocab());
    put_gguf("valid-llama-spm-vocab.gguf", w);
  }
  {  // MoE and gpt2 configurations, RoPE scaling, per-layer arrays, alignment
    GGUFWriter w;
    model_keys(w, "qwen2moe", true);
    w.set_u32("qwen2moe.vocab_size", 260);
    w.set_u32("qwen2moe.expert_shared_feed_forward_length", 32);
    w.set_string("qwen2moe.rope.scaling.type", "linear");
    w.set_f32("qwen2moe.rope.scaling.factor", 4.0f);
    w.set_alignment(64);
    w.add_tensor_f32("blk.0.ffn_gate_inp.weight", DType::F32, {32, 4}, ramp(128));
    put_gguf("valid-qwen2moe.gguf", w);
  }
  {
    GGUFWriter w;
    model_keys(w, "gpt2", false);
    w.set_i32_array("gpt2.attention.head_count_kv", {4});
    w.set_u32("gpt2.vocab_size", 50);
    put_gguf("valid-gpt2.gguf", w);
  }
  // Whole tiny models (every tensor Model::load binds), so the fuzzer reaches the forward pass.
  // The smallest useful shape: 259 byte tokens, 8-wide, F16 weights, tied head (~11 KB).
  for (const char* arch : {"llama", "gpt2"}) {
    SynthSpec spec;
    spec.arch = arch;
    spec.type = DType::F16;
    spec.n_vocab = 259;
    spec.n_embd = 8;
    spec.n_layer = 1;
    spec.n_head = 2;
    spec.n_head_kv = 1;
    spec.n_ff = 8;
    spec.n_ctx = 16;
    spec.tied_output = true;
    const fs::path tmp = fuzz::scratch_dir() / "synth.gguf";
    synth_write(spec, tmp.string(), 1);
    put("gguf", fmt::format("valid-model-{}.gguf", arch), slurp(tmp));
  }
  {  // every metadata value type, nested arrays
    GGUFWriter w;
    w.set_string("general.architecture", "llama");
    const auto scalar = [](GGUFType t, int64_t i, double f) {
      GGUFValue v;
      v.type = t;
      v.i = i;
      v.f = f;
      return v;
    };
    const GGUFType ints[] = {GGUFType::UINT8, GGUFType::INT8, GGUFType::UINT16, GGUFType::INT16, GGUFType::UINT32,
                             GGUFType::INT32, GGUFType::UINT64, GGUFType::INT64, GGUFType::BOOL};
    for (GGUFType t : ints) w.set_value(std::string("test.") + gguf_type_name(t), scalar(t, 1, 0));
    w.set_value("test.FLOAT64", scalar(GGUFType::FLOAT64, 0, 2.5));
    w.set_f32("test.FLOAT32", -1.5f);
    w.set_string("test.STRING", "text");
    GGUFValue inner;
    inner.type = GGUFType::ARRAY;
    inner.elem_type = GGUFType::UINT16;
    inner.items = {scalar(GGUFType::UINT16, 7, 0), scalar(GGUFType::UINT16, 9, 0)};
    GGUFValue outer;
    outer.type = GGUFType::ARRAY;
    outer.elem_type = GGUFType::ARRAY;
    outer.items = {inner, inner};
    w.set_value("test.nested", outer);
    w.set_f32_array("test.f32s", {1.0f, 2.0f});
    w.set_string_array("test.strings", {"a", "", "c"});
    put_gguf("valid-all-value-types.gguf", w);
  }
}

void tokenizer_seeds() {
  // Byte 0: low nibble = vocabulary index, high nibble = flags (see fuzz_entry.h run_tokenizer).
  const std::string texts[] = {"Hello world", " the cat's 123 thing\n\n", "<s>x</s><|endoftext|><tool>",
                               "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80", "  \t\r\n  ab ab"};
  int n = 0;
  for (int vocab = 0; vocab < 15; ++vocab) {
    for (int k : {vocab % 5, (vocab + 2) % 5}) {
      const uint8_t flags = static_cast<uint8_t>((n % 4) << 4);  // add_bos / parse_special variations
      put("tokenizer", fmt::format("text-{:02}", n++), std::string(1, static_cast<char>(vocab | flags)) + texts[k]);
    }
  }
  // Id sequences for decode (flag 4), in range mod n_vocab+2 and raw (flag 8).
  std::vector<int32_t> ids = {1, 5, 300, 2, 0, -1, 259, 260, 100000, 7};
  const std::string id_bytes(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t));
  put("tokenizer", "ids-mod", std::string(1, static_cast<char>(0x40 | 1)) + id_bytes);
  put("tokenizer", "ids-raw", std::string(1, static_cast<char>(0xC0 | 3)) + id_bytes);
}

void toml_seeds() {
  put("toml", "valid-minimal.toml", R"([models.m]
synth = "tiny"

[prompts]
list = ["Hello"]

[[strategy]]
name = "ar"
kind = "autoregressive"
target = "m"
)");
  put("toml", "valid-sweep.toml", R"(# A sweep over draft length and temperature.
[experiment]
name = "sweep-demo"
description = "draft length x temperature"
seed = 42
repeats = 2
warmup = 0
threads = 1
output = "out/sweep"

[models.target]
path = "target.gguf"
[models.draft]
synth = "tiny-draft"
seed = 3

[prompts]
file = "prompts.txt"
jsonl = "questions.jsonl"
categories = ["writing", "coding"]
turn = 1
limit = 3

[sampling]
temperature = 0.7
top_k = 40
top_p = 0.9
min_p = 0.05
max_tokens = 32
repeat_penalty = 1.1

[[strategy]]
name = "baseline"
kind = "autoregressive"
target = "target"

[[strategy]]
name = "model"
kind = "speculative"
target = "target"
drafter = "model"
draft = "draft"
verifier = "speculative"
draft_max = 4
draft_min = 1
draft_p_min = 0.1

[[strategy]]
name = "ngram"
kind = "speculative"
target = "target"
drafter = "ngram"
ngram_min = 1
ngram_max = 3

[sweep]
draft_max = [2, 4, 8]
temperature = [0.0, 0.7]
only = ["model"]
)");
  put("toml", "valid-jsonl.toml", R"([models.t]
path = "/models/t.gguf"
[prompts]
jsonl = "questions.jsonl"
[[strategy]]
name = "a"
kind = "autoregressive"
target = "t"
[[strategy]]
name = "s"
kind = "speculative"
target = "t"
drafter = "layerskip"
exit_layer = 2
verifier = "greedy"
)");
  put("toml", "bad-unknown-key.toml", "[models.m]\nsynth = \"tiny\"\ncolour = 1\n");
}

// gzip data as `gzip -n` writes it (no name, no time stamp), so the seed is the same on every build.
std::string gzip(const std::string& text) {
  z_stream zs{};
  if (deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&zs, text.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate");
  return out;
}

void prompts_seeds() {
  // Byte 0: bit 0 = text file (else JSONL), bit 1 = turn, bits 2-3 = limit, bits 4-5 = filter,
  // bit 6 = gzip.
  const std::string mt_bench =
      "{\"question_id\": 81, \"category\": \"writing\", \"turns\": [\"Compose a blog post.\", \"Rewrite it.\"]}\n"
      "{\"question_id\": 101, \"category\": \"math\", \"turns\": [\"What is 2+2?\", \"And 3+3?\"]}\n"
      "{\"question_id\": \"q3\", \"category\": \"coding\", \"turns\": [\"Sort\\u00e9 a list.\", \"In C.\"]}\r\n";
  const std::string humaneval =
      "{\"task_id\": \"HumanEval/0\", \"prompt\": \"def add(a, b):\\n    \\\"\\\"\\\"Add.\\\"\\\"\\\"\\n\", "
      "\"entry_point\": \"add\"}\n\n";
  put("prompts", "valid-mt-bench.jsonl", std::string(1, '\x00') + mt_bench);
  put("prompts", "valid-mt-bench-turn2-writing.jsonl", std::string(1, '\x12') + mt_bench);
  put("prompts", "valid-mt-bench-coding-math-limit1.jsonl", std::string(1, '\x24') + mt_bench);
  put("prompts", "valid-humaneval.jsonl", std::string(1, '\x00') + humaneval);
  put("prompts", "valid-text.txt", std::string(1, '\x01') + "First prompt\n# comment\n\n  Second\\nline\\\\\r\nThird\n");
  put("prompts", "bad-json.jsonl", std::string(1, '\x00') + "{\"turns\": [\"a\"]\n");
  put("prompts", "valid-mt-bench-gzip.jsonl.gz", std::string(1, '\x42') + gzip(mt_bench));
  put("prompts", "bad-gzip-truncated.jsonl.gz", std::string(1, '\x40') + gzip(mt_bench).substr(0, 30));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_corpus OUT_DIR\n";
    return 2;
  }
  g_out = argv[1];
  try {
    gguf_seeds();
    tokenizer_seeds();
    toml_seeds();
    prompts_seeds();
  } catch (const std::exception& e) {
    std::cerr << "fuzz_corpus: " << e.what() << "\n";
    return 1;
  }
  std::error_code ec;
  fs::remove_all(fuzz::scratch_dir(), ec);
  return 0;
}
