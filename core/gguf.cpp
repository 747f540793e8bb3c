// GGUF metadata values and the typed getters of GGUFFile (parsing is in gguf_reader.cpp).
#include "core/gguf.h"

#include "base/error.h"

namespace specmoe::core {

const char* gguf_type_name(GGUFType t) {
  switch (t) {
    case GGUFType::UINT8: return "UINT8";
    case GGUFType::INT8: return "INT8";
    case GGUFType::UINT16: return "UINT16";
    case GGUFType::INT16: return "INT16";
    case GGUFType::UINT32: return "UINT32";
    case GGUFType::INT32: return "INT32";
    case GGUFType::FLOAT32: return "FLOAT32";
    case GGUFType::BOOL: return "BOOL";
    case GGUFType::STRING: return "STRING";
    case GGUFType::ARRAY: return "ARRAY";
    case GGUFType::UINT64: return "UINT64";
    case GGUFType::INT64: return "INT64";
    case GGUFType::FLOAT64: return "FLOAT64";
  }
  return "UNKNOWN";
}

namespace {

bool integer_type(GGUFType t) {
  switch (t) {
    case GGUFType::UINT8: case GGUFType::INT8: case GGUFType::UINT16: case GGUFType::INT16:
    case GGUFType::UINT32: case GGUFType::INT32: case GGUFType::UINT64: case GGUFType::INT64:
      return true;
    default:
      return false;
  }
}

bool float_type(GGUFType t) { return t == GGUFType::FLOAT32 || t == GGUFType::FLOAT64; }

std::string describe(const GGUFValue& v) {
  if (v.type == GGUFType::ARRAY) return fmt::format("ARRAY of {}", gguf_type_name(v.elem_type));
  return gguf_type_name(v.type);
}

}  // namespace

bool GGUFValue::is_integer() const { return integer_type(type); }
bool GGUFValue::is_float() const { return float_type(type); }
size_t GGUFValue::array_size() const {
  if (type != GGUFType::ARRAY) return 0;
  return elem_type == GGUFType::STRING ? strings.size() : items.size();
}

const GGUFValue* GGUFFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {

const GGUFValue& require(const GGUFFile& f, std::string_view key) {
  const GGUFValue* v = f.find(key);
  if (!v) throw_error(ErrorKind::Format, "{}: metadata key '{}' is missing", f.path(), key);
  return *v;
}

[[noreturn]] void wrong_type(const GGUFFile& f, std::string_view key, const GGUFValue& v, const char* expected) {
  throw_error(ErrorKind::Format, "{}: metadata key '{}' has type {}, expected {}", f.path(), key, describe(v),
              expected);
}

int64_t as_int(const GGUFFile& f, std::string_view key, const GGUFValue& v) {
  // UINT64 is stored bit-cast; a value above INT64_MAX shows up negative and cannot be returned.
  if (v.type == GGUFType::UINT64 && v.i < 0)
    throw_error(ErrorKind::Format, "{}: metadata key '{}' value {} does not fit in int64", f.path(), key,
                static_cast<uint64_t>(v.i));
  return v.i;
}

}  // namespace

std::string GGUFFile::get_string(std::string_view key) const {
  const GGUFValue& v = require(*this, key);
  if (v.type != GGUFType::STRING) wrong_type(*this, key, v, "STRING");
  return v.s;
}

std::string GGUFFile::get_string(std::string_view key, const std::string& def) const {
  return has(key) ? get_string(key) : def;
}

int64_t GGUFFile::get_int(std::string_view key) const {
  const GGUFValue& v = require(*this, key);
  if (!v.is_integer()) wrong_type(*this, key, v, "an integer");
  return as_int(*this, key, v);
}

int64_t GGUFFile::get_int(std::string_view key, int64_t def) const { return has(key) ? get_int(key) : def; }

double GGUFFile::get_float(std::string_view key) const {
  const GGUFValue& v = require(*this, key);
  if (v.is_float()) return v.f;
  // Some converters write e.g. rope.freq_base as an integer; the value is still exact enough.
  if (v.is_integer()) return static_cast<double>(as_int(*this, key, v));
  wrong_type(*this, key, v, "FLOAT32 or FLOAT64");
}

double GGUFFile::get_float(std::string_view key, double def) const { return has(key) ? get_float(key) : def; }

bool GGUFFile::get_bool(std::string_view key, bool def) const {
  const GGUFValue* v = find(key);
  if (!v) return def;
  if (v->type != GGUFType::BOOL) wrong_type(*this, key, *v, "BOOL");
  return v->i != 0;
}

const std::vector<std::string>& GGUFFile::get_string_array(std::string_view key) const {
  const GGUFValue& v = require(*this, key);
  if (v.type != GGUFType::ARRAY || v.elem_type != GGUFType::STRING) wrong_type(*this, key, v, "ARRAY of STRING");
  return v.strings;
}

std::vector<int64_t> GGUFFile::get_int_array(std::string_view key) const {
  const GGUFValue& v = require(*this, key);
  if (v.type != GGUFType::ARRAY || !integer_type(v.elem_type)) wrong_type(*this, key, v, "ARRAY of integers");
  std::vector<int64_t> out;
  out.reserve(v.items.size());
  for (const auto& item : v.items) out.push_back(as_int(*this, key, item));
  return out;
}

std::vector<double> GGUFFile::get_float_array(std::string_view key) const {
  const GGUFValue& v = require(*this, key);
  if (v.type != GGUFType::ARRAY || !(float_type(v.elem_type) || integer_type(v.elem_type)))
    wrong_type(*this, key, v, "ARRAY of FLOAT32/FLOAT64");
  std::vector<double> out;
  out.reserve(v.items.size());
  for (const auto& item : v.items) out.push_back(item.is_float() ? item.f : static_cast<double>(item.i));
  return out;
}

const GGUFTensorInfo* GGUFFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GGUFTensorInfo& GGUFFile::tensor(std::string_view name) const {
  const GGUFTensorInfo* t = find_tensor(name);
  if (!t) throw_error(ErrorKind::Format, "{}: tensor '{}' is missing", path_, name);
  return *t;
}

int64_t GGUFTensorInfo::rows() const {
  int64_t r = 1;
  for (size_t d = 1; d < ne.size(); ++d) r *= ne[d];  // no overflow: the reader checked the product
  return r;
}

}  // namespace specmoe::core
