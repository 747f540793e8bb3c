// Tokenizers built from GGUF metadata (tokenizer.ggml.*): SentencePiece-style (`llama`) and
// byte-level BPE (`gpt2`) with the pre-tokenizer selected by tokenizer.ggml.pre, and Gemma 4's
// SentencePiece-style BPE (`gemma4`). Token ids match llama.cpp's on its tokenizer test vectors.
//
// The algorithms work on a plain `Vocab` (what the GGUF metadata says); `read_vocab` is the only
// place that knows the GGUF key names, so tests and `specmoe synth` can build vocabularies directly.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specmoe::core {

class GGUFFile;
class GGUFWriter;

enum class TokenizerKind { SentencePiece, BytePairEncoding };

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// Everything a tokenizer needs, as the GGUF metadata states it. Ids are -1 when absent.
struct Vocab {
  std::string source;  // file the vocabulary came from, for error messages ("" when built in code)
  std::string model;   // tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (byte-level BPE) or "gemma4"
  std::string pre;     // tokenizer.ggml.pre ("" when absent: llama.cpp's "default" pre-tokenizer)
  std::string name;    // general.name (llama.cpp keys a few per-model token attributes on it)
  std::vector<std::string> tokens;  // tokenizer.ggml.tokens, index = id
  std::vector<float> scores;        // tokenizer.ggml.scores: empty, or one per token
  std::vector<TokenType> types;     // tokenizer.ggml.token_type: empty (all Normal), or one per token
  std::vector<std::string> merges;  // tokenizer.ggml.merges ("left right", rank = index); BPE only
  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1, pad = -1;
  // Fill-in-the-middle tokens (tokenizer.ggml.fim_{pre,suf,mid,pad,rep,sep}_token_id).
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  std::optional<bool> add_bos, add_eos, add_space_prefix;  // absent: the model type's default
  std::string chat_template;        // tokenizer.chat_template (Jinja source; "" when absent)

  // Throws Error(Format) naming `source` when the arrays disagree in length, an id is out of range,
  // or a token text repeats.
  void validate() const;
};

// Reads the tokenizer.ggml.* keys of a GGUF file; throws Error naming the file and the key.
// Special ids missing from the file get llama.cpp's defaults for the model type (llama: unk 0,
// BOS 1, EOS 2); ids out of range are dropped (-1).
Vocab read_vocab(const GGUFFile& file);

// The vocabulary of `specmoe synth` models: a SentencePiece ("llama") vocabulary of
//   <unk> = 0 (Unknown), <s> = 1 (Control, BOS), </s> = 2 (Control, EOS),
//   <0x00>..<0xFF> = 3..258 (Byte), then "<pad_N>" Normal tokens up to n_vocab,
// with add_bos = true, add_eos = false, add_space_prefix = false. Every text encodes through byte
// fallback (a space becomes "▁" = bytes E2 96 81) and decodes back exactly.
// Throws Error(InvalidArgument) when n_vocab < 259.
Vocab byte_vocab(int n_vocab);
// Writes byte_vocab(n_vocab) as tokenizer.ggml.* keys.
void write_byte_vocab(GGUFWriter& w, int n_vocab);
// Writes any vocabulary as tokenizer.ggml.* keys (the inverse of read_vocab).
void write_vocab(GGUFWriter& w, const Vocab& vocab);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer a GGUF file describes; throws Error naming the file and the key.
  static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile& file);
  // Builds a tokenizer from a vocabulary; throws Error(Unsupported) for an unknown
  // tokenizer.ggml.model or tokenizer.ggml.pre (naming `vocab.source` and the value).
  static std::unique_ptr<Tokenizer> from_vocab(Vocab vocab);

  virtual TokenizerKind kind() const = 0;
  virtual int n_vocab() const = 0;
  virtual int32_t bos() const = 0;            // -1 when the vocabulary has none
  virtual int32_t eos() const = 0;            // -1 when the vocabulary has none
  virtual bool add_bos_by_default() const = 0;  // tokenizer.ggml.add_bos_token, else the model type's default
  virtual bool add_eos_by_default() const = 0;  // tokenizer.ggml.add_eos_token, else false
  virtual bool is_eog(int32_t id) const = 0;  // end of generation (EOS, EOT, EOM, <|im_end|>, ...)
  virtual const std::string& token_text(int32_t id) const = 0;  // the raw vocabulary string
  virtual TokenType token_type(int32_t id) const = 0;  // after llama.cpp's fix-ups (EOG texts -> Control)
  // tokenizer.chat_template as the GGUF states it ("" when absent); core/chat_template.h reads it.
  virtual const std::string& chat_template() const = 0;

  // Text -> ids. add_bos prepends BOS (Error(InvalidArgument) when the vocabulary has none);
  // parse_special matches control token texts (e.g. "<|im_start|>") in the input instead of
  // encoding them as plain text. User-defined tokens are always matched, as in llama.cpp.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const = 0;
  // The bytes one token stands for (SentencePiece "▁" -> " ", byte tokens <0x0A> -> "\n",
  // byte-level BPE unicode mapping undone). Special tokens render as "" unless render_special.
  // Ids out of range throw Error(InvalidArgument).
  virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;
  // Ids -> text, as llama.cpp's detokenizer: concatenated pieces; for SentencePiece the leading
  // space of the first piece is removed when it follows BOS or starts the text. Runs of
  // SentencePiece byte tokens spelling "▁" also decode to " " (byte-only vocabularies).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
};

}  // namespace specmoe::core
