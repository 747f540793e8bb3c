// GGUFWriter: builds a version 3 GGUF file (layout in gguf_reader.cpp) and writes it atomically:
// the bytes go to "<path>.tmp-XXXXXX" in the same folder, which is then renamed over <path>, so a
// reader never sees a half-written model.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "core/gguf.h"
#include "kernels/cpu/quant.h"

namespace specmoe::core {
namespace {

// resize + memcpy rather than vector::insert, which trips GCC 12's -Wstringop-overflow.
void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  const size_t at = out.size();
  out.resize(at + n);
  if (n > 0) std::memcpy(out.data() + at, p, n);
}

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

void put_value(std::vector<uint8_t>& out, const GGUFValue& v, const std::string& key) {
  switch (v.type) {
    case GGUFType::UINT8: put<uint8_t>(out, static_cast<uint8_t>(v.i)); break;
    case GGUFType::INT8: put<int8_t>(out, static_cast<int8_t>(v.i)); break;
    case GGUFType::UINT16: put<uint16_t>(out, static_cast<uint16_t>(v.i)); break;
    case GGUFType::INT16: put<int16_t>(out, static_cast<int16_t>(v.i)); break;
    case GGUFType::UINT32: put<uint32_t>(out, static_cast<uint32_t>(v.i)); break;
    case GGUFType::INT32: put<int32_t>(out, static_cast<int32_t>(v.i)); break;
    case GGUFType::UINT64: put<uint64_t>(out, static_cast<uint64_t>(v.i)); break;
    case GGUFType::INT64: put<int64_t>(out, v.i); break;
    case GGUFType::FLOAT32: put<float>(out, static_cast<float>(v.f)); break;
    case GGUFType::FLOAT64: put<double>(out, v.f); break;
    case GGUFType::BOOL: put<uint8_t>(out, v.i != 0); break;
    case GGUFType::STRING: put_string(out, v.s); break;
    case GGUFType::ARRAY:
      put<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
      if (v.elem_type == GGUFType::STRING) {
        put<uint64_t>(out, v.strings.size());
        for (const auto& s : v.strings) put_string(out, s);
      } else {
        put<uint64_t>(out, v.items.size());
        for (const auto& item : v.items) {
          if (item.type != v.elem_type)
            throw_error(ErrorKind::InvalidArgument, "GGUF writer: array '{}' of {} holds an element of type {}", key,
                        gguf_type_name(v.elem_type), gguf_type_name(item.type));
          put_value(out, item, key);
        }
      }
      break;
    default:
      throw_error(ErrorKind::InvalidArgument, "GGUF writer: key '{}' has unknown value type {}", key,
                  static_cast<uint32_t>(v.type));
  }
}

GGUFValue scalar_int(GGUFType t, int64_t i) {
  GGUFValue v;
  v.type = t;
  v.i = i;
  return v;
}

void write_all(int fd, const uint8_t* p, size_t n, const std::string& tmp) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_error(ErrorKind::Io, "{}: write failed: {}", tmp, std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

void GGUFWriter::set_value(const std::string& key, const GGUFValue& v) {
  for (auto& [k, existing] : kv_)
    if (k == key) {  // replace, so a file never holds a key twice
      existing = v;
      return;
    }
  kv_.emplace_back(key, v);
}

void GGUFWriter::set_string(const std::string& key, const std::string& s) {
  GGUFValue v;
  v.type = GGUFType::STRING;
  v.s = s;
  set_value(key, v);
}
void GGUFWriter::set_u32(const std::string& key, uint32_t x) { set_value(key, scalar_int(GGUFType::UINT32, x)); }
void GGUFWriter::set_i32(const std::string& key, int32_t x) { set_value(key, scalar_int(GGUFType::INT32, x)); }
void GGUFWriter::set_u64(const std::string& key, uint64_t x) {
  set_value(key, scalar_int(GGUFType::UINT64, static_cast<int64_t>(x)));
}
void GGUFWriter::set_bool(const std::string& key, bool x) { set_value(key, scalar_int(GGUFType::BOOL, x)); }
void GGUFWriter::set_f32(const std::string& key, float x) {
  GGUFValue v;
  v.type = GGUFType::FLOAT32;
  v.f = x;
  set_value(key, v);
}

void GGUFWriter::set_string_array(const std::string& key, const std::vector<std::string>& xs) {
  GGUFValue v;
  v.type = GGUFType::ARRAY;
  v.elem_type = GGUFType::STRING;
  v.strings = xs;
  set_value(key, v);
}

void GGUFWriter::set_f32_array(const std::string& key, const std::vector<float>& xs) {
  GGUFValue v;
  v.type = GGUFType::ARRAY;
  v.elem_type = GGUFType::FLOAT32;
  v.items.reserve(xs.size());
  for (float x : xs) {
    GGUFValue item;
    item.type = GGUFType::FLOAT32;
    item.f = x;
    v.items.push_back(std::move(item));
  }
  set_value(key, v);
}

void GGUFWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& xs) {
  GGUFValue v;
  v.type = GGUFType::ARRAY;
  v.elem_type = GGUFType::INT32;
  v.items.reserve(xs.size());
  for (int32_t x : xs) v.items.push_back(scalar_int(GGUFType::INT32, x));
  set_value(key, v);
}

void GGUFWriter::set_alignment(uint32_t a) {
  if (a < 8 || (a & (a - 1)) != 0)
    throw_error(ErrorKind::InvalidArgument, "GGUF writer: alignment {} is not a power of two >= 8 (GGUF: a multiple of 8)", a);
  alignment_ = a;
  set_u32("general.alignment", a);
}

void GGUFWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> ne,
                            std::span<const uint8_t> bytes) {
  for (const auto& t : tensors_)
    if (t.name == name) throw_error(ErrorKind::InvalidArgument, "GGUF writer: duplicate tensor name '{}'", name);
  if (ne.empty() || ne.size() > 4)
    throw_error(ErrorKind::InvalidArgument, "GGUF writer: tensor '{}' has {} dimensions (must be 1 to 4)", name,
                ne.size());
  int64_t rows = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) throw_error(ErrorKind::InvalidArgument, "GGUF writer: tensor '{}' has negative size", name);
    if (d > 0 && __builtin_mul_overflow(rows, ne[d], &rows))
      throw_error(ErrorKind::InvalidArgument, "GGUF writer: tensor '{}' element count overflows", name);
  }
  const size_t expected = dtype_row_bytes(type, ne[0]) * static_cast<size_t>(rows);
  if (bytes.size() != expected)
    throw_error(ErrorKind::InvalidArgument, "GGUF writer: tensor '{}' has {} bytes, its {} shape needs {}", name,
                bytes.size(), dtype_name(type), expected);
  tensors_.push_back(Tensor{name, type, std::move(ne), std::vector<uint8_t>(bytes.begin(), bytes.end())});
}

void GGUFWriter::add_tensor_f32(const std::string& name, DType type, std::vector<int64_t> ne,
                                std::span<const float> values) {
  if (ne.empty()) throw_error(ErrorKind::InvalidArgument, "GGUF writer: tensor '{}' has no dimensions", name);
  int64_t n = 1;
  for (int64_t d : ne)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      throw_error(ErrorKind::InvalidArgument, "GGUF writer: tensor '{}' has an invalid shape", name);
  if (static_cast<int64_t>(values.size()) != n)
    throw_error(ErrorKind::InvalidArgument, "GGUF writer: tensor '{}' has {} values, its shape needs {}", name,
                values.size(), n);
  const int64_t row = ne[0];
  const size_t row_bytes = dtype_row_bytes(type, row);
  const int64_t rows = row > 0 ? n / row : 0;
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    kernels::cpu::quantize_row(type, values.data() + r * row, bytes.data() + r * row_bytes, row);
  add_tensor(name, type, std::move(ne), bytes);
}

std::vector<uint8_t> GGUFWriter::header() const {
  std::vector<uint8_t> head;
  put<uint32_t>(head, 0x46554747);  // "GGUF"
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kv_.size());
  for (const auto& [key, value] : kv_) {
    put_string(head, key);
    put<uint32_t>(head, static_cast<uint32_t>(value.type));
    put_value(head, value, key);
  }
  size_t offset = 0;  // relative to the data section; every tensor starts aligned
  for (const auto& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, offset);
    offset = align_up(offset + t.bytes.size(), alignment_);
  }
  head.resize(align_up(head.size(), alignment_), 0);
  return head;
}

std::vector<uint8_t> GGUFWriter::bytes() const {
  std::vector<uint8_t> out = header();
  for (const auto& t : tensors_) {
    put_bytes(out, t.bytes.data(), t.bytes.size());
    out.resize(align_up(out.size(), alignment_), 0);
  }
  return out;
}

void GGUFWriter::write(const std::string& path) const {
  const std::vector<uint8_t> head = header();

  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) throw_error(ErrorKind::Io, "{}: cannot create temporary file: {}", path, std::strerror(errno));
  bool closed = false;
  try {
    fchmod(fd, 0644);  // mkstemp creates 0600; a model file is normally world-readable
    write_all(fd, head.data(), head.size(), tmp);
    const std::vector<uint8_t> zeros(alignment_, 0);
    for (const auto& t : tensors_) {
      write_all(fd, t.bytes.data(), t.bytes.size(), tmp);
      write_all(fd, zeros.data(), align_up(t.bytes.size(), alignment_) - t.bytes.size(), tmp);
    }
    closed = true;
    if (::close(fd) != 0) throw_error(ErrorKind::Io, "{}: close failed: {}", tmp, std::strerror(errno));
  } catch (...) {
    if (!closed) ::close(fd);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw_error(ErrorKind::Io, "{}: cannot rename {} over it: {}", path, tmp, std::strerror(err));
  }
}

}  // namespace specmoe::core
