// specmoe quantize: a GGUF model's weights in another type, as llama-quantize writes them
// (core/quantize.h), e.g. a Q4_K_M draft requantized to Q4_0 to lower the draft's cost.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "base/error.h"
#include "cli_common.h"
#include "core/quantize.h"

namespace specmoe::cli {
namespace {

DType parse_type(const std::string& name, const char* what) {
  const std::optional<DType> t = core::quantize_type_from_name(name);
  if (!t)
    throw_error(ErrorKind::InvalidArgument, "{} '{}' is not a tensor type; one of: {}, MXFP4_MOE", what, name,
                dtype_supported_names());
  return *t;
}

std::string shape(const std::vector<int64_t>& ne) {
  std::string s;
  for (int64_t n : ne) s += (s.empty() ? "" : " x ") + std::to_string(n);
  return s;
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

void add_quantize_command(CLI::App& app) {
  struct Args {
    std::string input, output, type, output_tensor_type, token_embedding_type;
    bool allow_requantize = false, pure = false, quiet = false;
    int threads = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "convert a GGUF model's weights to another type (llama-quantize's rules; Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
      "Q6_K, MXFP4_MOE, F16, BF16 and F32 byte for byte as llama-quantize writes them)");
  cmd->add_option("input", a->input, "input GGUF model")->required();
  cmd->add_option("output", a->output, "output GGUF file (written atomically)")->required();
  cmd->add_option("type", a->type,
                  "type of the quantized tensors: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q6_K, F16, BF16, F32, or Q2_K, Q3_K, "
                  "Q4_K, Q5_K, IQ4_NL, IQ4_XS (specmoe's own scale search for these, not llama.cpp's), or "
                  "MXFP4_MOE (= MXFP4: experts in MXFP4, the rest Q8_0, as llama-quantize writes it)")
      ->required();
  cmd->add_flag("--allow-requantize", a->allow_requantize, "allow converting tensors that are already quantized");
  cmd->add_flag("--pure", a->pure, "every quantizable tensor in TYPE: no per-tensor rules (output in Q6_K, ...)");
  cmd->add_option("--output-tensor-type", a->output_tensor_type, "type of output.weight (or of a tied token_embd.weight)");
  cmd->add_option("--token-embedding-type", a->token_embedding_type, "type of token_embd.weight");
  cmd->add_option("-t,--threads", a->threads, "threads (0 = all cores)")->capture_default_str();
  cmd->add_flag("-q,--quiet", a->quiet, "no line per tensor");
  cmd->callback([a] {
    check_threads(a->threads, "--threads");
    core::QuantizeOptions o;
    o.type = parse_type(a->type, "type");
    if (!a->output_tensor_type.empty()) o.output_tensor_type = parse_type(a->output_tensor_type, "--output-tensor-type");
    if (!a->token_embedding_type.empty())
      o.token_embedding_type = parse_type(a->token_embedding_type, "--token-embedding-type");
    o.allow_requantize = a->allow_requantize;
    o.pure = a->pure;
    o.threads = a->threads;
    size_t i = 0;
    const core::QuantizeSummary s = core::quantize_model(a->input, a->output, o, [&](const core::QuantizedTensor& t) {
      ++i;
      if (a->quiet) return;
      std::fprintf(stderr, "[%4zu] %-40s %-18s %-6s %s\n", i, t.name.c_str(), shape(t.ne).c_str(), dtype_name(t.from),
                   t.converted ? fmt::format("-> {} ({:.2f} -> {:.2f} MiB)", dtype_name(t.to), mib(t.bytes_in),
                                             mib(t.bytes_out)).c_str()
                               : "copied");
    });
    std::fprintf(stderr, "wrote %s: %zu tensors, %.2f MiB -> %.2f MiB of weights, general.file_type %u%s\n",
                 a->output.c_str(), s.tensors.size(), mib(s.bytes_in), mib(s.bytes_out), s.file_type,
                 s.n_fallback > 0 ? fmt::format(" ({} tensors fell back to another type: rows not a multiple of the "
                                                "block)", s.n_fallback).c_str()
                                  : "");
  });
}

}  // namespace specmoe::cli
