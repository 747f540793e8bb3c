// Text fields of JSON output. A byte-level BPE model emits bytes, not characters: generation can
// stop inside a multi-byte character (the -n limit, EOS, a random-weight model), and GGUF strings
// are whatever their writer put there. JSON strings must be valid UTF-8, so every text field is
// written as its bytes decoded with U+FFFD replacement, exactly as a UTF-8 decoder does
// (Unicode 15, section 3.9, "U+FFFD Substitution of Maximal Subparts"; the WHATWG Encoding
// Standard and Python's errors="replace" decode the same way), and when anything was replaced
// the exact bytes ride along as "<key>_bytes_b64" (RFC 4648 base64), so nothing is lost.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace specmoe::exp {

// `bytes` decoded as UTF-8: well-formed sequences copied, each maximal subpart of an ill-formed
// sequence (a truncated character at the end included) replaced by one U+FFFD (EF BF BD).
// *replaced (when given) tells whether anything was replaced.
std::string utf8_replace_invalid(std::string_view bytes, bool* replaced = nullptr);
bool is_valid_utf8(std::string_view bytes);

// RFC 4648 base64 with padding; decode returns nullopt on anything but canonical padded base64.
std::string base64_encode(std::string_view bytes);
std::optional<std::string> base64_decode(std::string_view text);

// j[key] = utf8_replace_invalid(bytes), plus j[key + "_bytes_b64"] = base64(bytes) when a
// replacement happened.
void set_text(nlohmann::json& j, const std::string& key, std::string_view bytes);
// The exact bytes of a field written by set_text: "<key>_bytes_b64" when present, else j[key]
// (which must be a string). nullopt when the key is absent or the fields are malformed.
std::optional<std::string> get_text(const nlohmann::json& j, const std::string& key);

// Reads and parses a JSON file. Anything nlohmann rejects (a parse_error, and the out_of_range
// it throws for a number such as 1e400 that overflows a double) becomes one Error(Format) naming
// the path; an unreadable file is Error(Io).
nlohmann::json parse_json_file(const std::string& path);

}  // namespace specmoe::exp
