// Tokenizers built from GGUF metadata (tokenizer.ggml.*): SentencePiece-style (`llama`) and
// byte-level BPE (`gpt2`) with the pre-tokenizer selected by tokenizer.ggml.pre. Token ids match
// llama.cpp's on its tokenizer test vectors.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specmoe::core {

class GGUFFile;

enum class TokenizerKind { SentencePiece, BytePairEncoding };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer a GGUF file describes; throws Error naming the file and the key.
  static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile& file);
  // A byte-level vocabulary (256 byte tokens + BOS/EOS) used by `specmoe synth` models.
  // (Its exact shape is defined by the implementation and documented there.)

  virtual TokenizerKind kind() const = 0;
  virtual int n_vocab() const = 0;
  virtual int32_t bos() const = 0;            // -1 when the vocabulary has none
  virtual int32_t eos() const = 0;            // -1 when the vocabulary has none
  virtual bool add_bos_by_default() const = 0;  // tokenizer.ggml.add_bos_token, else the model type's default
  virtual bool is_eog(int32_t id) const = 0;  // end of generation (EOS, EOT, ...)
  virtual const std::string& token_text(int32_t id) const = 0;  // the raw vocabulary string

  // Text -> ids. add_bos prepends BOS; parse_special matches special/control token texts
  // (e.g. "<|im_start|>") in the input instead of encoding them as plain text.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const = 0;
  // The bytes one token stands for (SentencePiece "▁" -> " ", byte tokens <0x0A> -> "\n",
  // byte-level BPE unicode mapping undone). Special tokens render as "" unless render_special.
  virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;
  // Ids -> text, as llama.cpp's detokenizer: concatenated pieces; for SentencePiece the leading
  // space of the first piece is removed when it follows BOS or starts the text.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
};

}  // namespace specmoe::core
