// UTF-8 replacement decoding and base64 for JSON text fields: see json_text.h.
#include "experiments/json_text.h"

#include <array>
#include <cstdint>

#include "base/error.h"
#include "experiments/atomic_file.h"

namespace specmoe::exp {
namespace {

// The well-formed UTF-8 byte sequences (Unicode 15, Table 3-7): for a lead byte, the number of
// continuation bytes and the allowed range of the first one (the others are always 80..BF).
// Overlong forms (C0, C1, E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and code points above
// U+10FFFF (F4 90.., F5..FF) are excluded by these ranges.
struct LeadRule {
  int continuation = -1;  // -1: not a lead byte
  uint8_t lo = 0x80, hi = 0xBF;
};

LeadRule lead_rule(uint8_t b) {
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b == 0xE0) return {2, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {2, 0x80, 0xBF};
  if (b == 0xED) return {2, 0x80, 0x9F};
  if (b == 0xF0) return {3, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {3, 0x80, 0xBF};
  if (b == 0xF4) return {3, 0x80, 0x8F};
  return {};
}

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string utf8_replace_invalid(std::string_view bytes, bool* replaced) {
  std::string out;
  out.reserve(bytes.size());
  bool any = false;
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    const LeadRule rule = lead_rule(b);
    if (rule.continuation < 0) {  // a stray continuation byte or a byte never used in UTF-8
      out += kReplacement;
      any = true;
      ++i;
      continue;
    }
    // Take continuation bytes while they fit; the lead plus the bytes taken is the maximal
    // subpart when the sequence breaks off, and the byte that did not fit starts anew.
    size_t j = i + 1;
    int taken = 0;
    while (taken < rule.continuation && j < n) {
      const auto c = static_cast<uint8_t>(bytes[j]);
      const uint8_t lo = taken == 0 ? rule.lo : 0x80, hi = taken == 0 ? rule.hi : 0xBF;
      if (c < lo || c > hi) break;
      ++j;
      ++taken;
    }
    if (taken == rule.continuation) {
      out.append(bytes.substr(i, j - i));
    } else {
      out += kReplacement;
      any = true;
    }
    i = j;
  }
  if (replaced) *replaced = any;
  return out;
}

bool is_valid_utf8(std::string_view bytes) {
  bool replaced = false;
  utf8_replace_invalid(bytes, &replaced);
  return !replaced;
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16 |
                       static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8 |
                       static_cast<uint8_t>(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
    if (rest == 2) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  static const std::array<int, 256> value = [] {
    std::array<int, 256> v{};
    v.fill(-1);
    for (int k = 0; k < 64; ++k) v[static_cast<uint8_t>(kAlphabet[k])] = k;
    return v;
  }();
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int pad = 0;
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && last && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      const int d = value[static_cast<uint8_t>(c)];
      if (d < 0 || pad > 0) return std::nullopt;  // a character after '=' or outside the alphabet
      v = v << 6 | static_cast<uint32_t>(d);
    }
    // Canonical form: the bits below the last encoded byte are zero.
    if ((pad == 1 && (v & 0xFF) != 0) || (pad == 2 && (v & 0xFFFF) != 0)) return std::nullopt;
    out += static_cast<char>((v >> 16) & 0xFF);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(v & 0xFF);
  }
  return out;
}

void set_text(nlohmann::json& j, const std::string& key, std::string_view bytes) {
  bool replaced = false;
  j[key] = utf8_replace_invalid(bytes, &replaced);
  if (replaced) j[key + "_bytes_b64"] = base64_encode(bytes);
}

std::optional<std::string> get_text(const nlohmann::json& j, const std::string& key) {
  if (!j.is_object()) return std::nullopt;
  if (auto it = j.find(key + "_bytes_b64"); it != j.end()) {
    if (!it->is_string()) return std::nullopt;
    return base64_decode(it->get_ref<const std::string&>());
  }
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

nlohmann::json parse_json_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::Format, "{}: invalid JSON: {}", path, e.what());
  }
}

}  // namespace specmoe::exp
