// specmoe tokenize: prints the token ids of a text, separated by spaces.
#include <cstdio>

#include "cli_common.h"
#include "core/gguf.h"
#include "core/tokenizer.h"

namespace specmoe::cli {

void add_tokenize_command(CLI::App& app) {
  struct Args {
    std::string model, prompt, file;
    bool bos = false, special = false, pieces = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text");
  cmd->add_option("-m,--model", a->model, "GGUF model or vocabulary file")->required();
  cmd->add_option("-p,--prompt", a->prompt, "text to tokenize");
  cmd->add_option("-f,--file", a->file, "read the text from a file");
  cmd->add_flag("--bos", a->bos, "prepend BOS");
  cmd->add_flag("--parse-special", a->special, "match special-token texts such as <|im_start|>");
  cmd->add_flag("--pieces", a->pieces, "print id:piece pairs, one per line");
  cmd->callback([a] {
    InputOptions in;
    in.prompt = a->prompt;
    in.file = a->file;
    const std::string text = read_prompt(in);
    // Only the vocabulary is needed: vocabulary-only GGUF files work too, and so do models whose
    // tensor types this build cannot run.
    auto file = core::GGUFFile::open_metadata(a->model);
    auto tok = core::Tokenizer::from_gguf(*file);
    const std::vector<int32_t> ids = tok->encode(text, a->bos, a->special);
    if (a->pieces) {
      for (int32_t id : ids) std::printf("%d:%s\n", id, tok->token_to_piece(id, true).c_str());
      return;
    }
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
  });
}

}  // namespace specmoe::cli
