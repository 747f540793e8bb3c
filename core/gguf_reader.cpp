// GGUF parsing over a read-only memory map. Layout (ggml docs/gguf.md, versions 2 and 3):
//   header: magic "GGUF", u32 version, u64 n_tensors, u64 n_kv
//   n_kv x (string key, u32 value type, value)        string = u64 length + bytes (no NUL)
//   n_tensors x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset)
//   padding to general.alignment (default 32), then the tensor data section.
// Every read is checked against the bytes remaining, and every count or length is bounded by
// those bytes before anything is allocated, so no byte sequence can read out of bounds or make
// the parser allocate more than a small multiple of the file size.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "core/gguf.h"

namespace specmoe::core {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;        // nested arrays deeper than this are not real metadata
constexpr uint32_t kMaxAlignment = 1u << 30;
// Decoded metadata costs more than its encoding (a one-byte UINT8 array element becomes a whole
// GGUFValue), so the memory the decoded values need is added up before each array is reserved and
// capped here. The biggest real metadata (256k-token vocabularies with scores, types and merges)
// needs well under 200 MiB.
constexpr size_t kMaxMetadataBytes = size_t{1} << 30;

// ggml_type names, so an unsupported type is reported by the name users see in llama.cpp.
const char* ggml_type_name(uint32_t id) {
  static constexpr const char* kNames[] = {
      "F32",     "F16",    "Q4_0",    "Q4_1",  nullptr, nullptr, "Q5_0",  "Q5_1",   "Q8_0",  "Q8_1",
      "Q2_K",    "Q3_K",   "Q4_K",    "Q5_K",  "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL",  "IQ3_S",  "IQ2_S",   "IQ4_XS", "I8",   "I16",   "I32",   "I64",    "F64",   "IQ1_M",
      "BF16",    nullptr,  nullptr,   nullptr, "TQ1_0", "TQ2_0", nullptr, nullptr,  nullptr, "MXFP4"};
  return id < std::size(kNames) ? kNames[id] : nullptr;
}

// Size in bytes of a scalar metadata value, or the minimum encoded size of a string (its u64
// length) or array (u32 type + u64 count); 0 for an unknown type id.
size_t min_value_bytes(uint32_t type) {
  switch (static_cast<GGUFType>(type)) {
    case GGUFType::UINT8: case GGUFType::INT8: case GGUFType::BOOL: return 1;
    case GGUFType::UINT16: case GGUFType::INT16: return 2;
    case GGUFType::UINT32: case GGUFType::INT32: case GGUFType::FLOAT32: return 4;
    case GGUFType::UINT64: case GGUFType::INT64: case GGUFType::FLOAT64: case GGUFType::STRING: return 8;
    case GGUFType::ARRAY: return 12;
  }
  return 0;
}

// Bounds-checked little-endian reader. `ctx` names what is being read (a key or tensor) for errors.
struct Cursor {
  const std::string& path;
  const uint8_t* base;
  size_t size;
  size_t pos = 0;
  size_t metadata_bytes = 0;  // memory the decoded metadata values need so far

  // Adds `bytes` of decoded metadata for `key`, throwing Error(Limit) past kMaxMetadataBytes.
  void charge(size_t bytes, std::string_view key) {
    if (bytes > kMaxMetadataBytes - metadata_bytes)
      throw_error(ErrorKind::Limit,
                  "{}: metadata key '{}' at offset {} would need more than {} MiB of memory for decoded metadata",
                  path, key, pos, kMaxMetadataBytes >> 20);
    metadata_bytes += bytes;
  }

  size_t remaining() const { return size - pos; }

  void need(size_t n, const char* what, std::string_view ctx) const {
    if (n > remaining())
      throw_error(ErrorKind::Format, "{}: truncated file: reading {}{}{} at offset {} needs {} bytes, {} remain", path,
                  what, ctx.empty() ? "" : " of ", ctx, pos, n, remaining());
  }

  template <typename T>
  T read(const char* what, std::string_view ctx = {}) {
    need(sizeof(T), what, ctx);
    T v;
    std::memcpy(&v, base + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }

  std::string read_string(const char* what, std::string_view ctx = {}) {
    const uint64_t len = read<uint64_t>(what, ctx);
    if (len > remaining())
      throw_error(ErrorKind::Format, "{}: truncated file: {}{}{} at offset {} has length {} but only {} bytes remain",
                  path, what, ctx.empty() ? "" : " of ", ctx, pos, len, remaining());
    if (len > 15) charge(static_cast<size_t>(len) + 1, ctx);  // beyond std::string's inline buffer
    std::string s(reinterpret_cast<const char*>(base + pos), static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
    return s;
  }

  GGUFValue read_value(uint32_t type, std::string_view key, int depth) {
    GGUFValue v;
    v.type = static_cast<GGUFType>(type);
    switch (v.type) {
      case GGUFType::UINT8: v.i = read<uint8_t>("value", key); break;
      case GGUFType::INT8: v.i = read<int8_t>("value", key); break;
      case GGUFType::UINT16: v.i = read<uint16_t>("value", key); break;
      case GGUFType::INT16: v.i = read<int16_t>("value", key); break;
      case GGUFType::UINT32: v.i = read<uint32_t>("value", key); break;
      case GGUFType::INT32: v.i = read<int32_t>("value", key); break;
      case GGUFType::UINT64: v.i = static_cast<int64_t>(read<uint64_t>("value", key)); break;
      case GGUFType::INT64: v.i = read<int64_t>("value", key); break;
      case GGUFType::FLOAT32: v.f = read<float>("value", key); break;
      case GGUFType::FLOAT64: v.f = read<double>("value", key); break;
      case GGUFType::BOOL: v.i = read<uint8_t>("value", key) != 0; break;
      case GGUFType::STRING: v.s = read_string("string value", key); break;
      case GGUFType::ARRAY: read_array(v, key, depth); break;
      default:
        throw_error(ErrorKind::Format, "{}: metadata key '{}' has unknown value type {}", path, key, type);
    }
    return v;
  }

  void read_array(GGUFValue& v, std::string_view key, int depth) {
    if (depth >= kMaxArrayDepth)
      throw_error(ErrorKind::Format, "{}: metadata key '{}' nests arrays more than {} deep", path, key, kMaxArrayDepth);
    const uint32_t elem = read<uint32_t>("array element type", key);
    const size_t elem_min = min_value_bytes(elem);
    if (elem_min == 0)
      throw_error(ErrorKind::Format, "{}: metadata key '{}' is an array of unknown value type {}", path, key, elem);
    v.elem_type = static_cast<GGUFType>(elem);
    const uint64_t count = read<uint64_t>("array length", key);
    // Bound the count by the bytes left before reserving anything.
    if (count > remaining() / elem_min)
      throw_error(ErrorKind::Format,
                  "{}: truncated file: array '{}' at offset {} claims {} elements of {} but only {} bytes remain",
                  path, key, pos, count, gguf_type_name(v.elem_type), remaining());
    charge(static_cast<size_t>(count) * (v.elem_type == GGUFType::STRING ? sizeof(std::string) : sizeof(GGUFValue)),
           key);
    if (v.elem_type == GGUFType::STRING) {
      v.strings.reserve(count);
      for (uint64_t k = 0; k < count; ++k) v.strings.push_back(read_string("array string", key));
    } else {
      v.items.reserve(count);
      for (uint64_t k = 0; k < count; ++k) v.items.push_back(read_value(elem, key, depth + 1));
    }
  }
};

bool checked_mul(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }

}  // namespace

GGUFFile::~GGUFFile() {
  if (base_ && mapped_) munmap(const_cast<uint8_t*>(base_), size_);
  if (fd_ >= 0) close(fd_);
}

std::shared_ptr<GGUFFile> GGUFFile::open(const std::string& path) { return open_mapped(path, true); }

std::shared_ptr<GGUFFile> GGUFFile::open_metadata(const std::string& path) { return open_mapped(path, false); }

std::shared_ptr<GGUFFile> GGUFFile::open_mapped(const std::string& path, bool with_tensors) {
  std::shared_ptr<GGUFFile> f(new GGUFFile());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_error(ErrorKind::Io, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    throw_error(ErrorKind::Io, "{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    throw_error(ErrorKind::Io, "{}: not a regular file", path);
  }
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ == 0) {
    close(fd);
    throw_error(ErrorKind::Format, "{}: truncated file: empty (0 bytes), not a GGUF file", path);
  }
  void* m = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  close(fd);  // the mapping keeps the file alive
  if (m == MAP_FAILED) throw_error(ErrorKind::Io, "{}: cannot mmap {} bytes: {}", path, f->size_, std::strerror(err));
  f->base_ = static_cast<const uint8_t*>(m);
  f->mapped_ = true;
  f->parse(with_tensors);
  return f;
}

std::shared_ptr<GGUFFile> GGUFFile::open_memory(std::span<const uint8_t> bytes, const std::string& name) {
  std::shared_ptr<GGUFFile> f(new GGUFFile());
  f->path_ = name;
  if (bytes.empty()) throw_error(ErrorKind::Format, "{}: truncated file: empty (0 bytes), not a GGUF file", name);
  f->owned_.reset(new uint8_t[bytes.size()]);
  std::memcpy(f->owned_.get(), bytes.data(), bytes.size());
  f->base_ = f->owned_.get();
  f->size_ = bytes.size();
  f->parse();
  return f;
}

void GGUFFile::parse(bool with_tensors) {
  Cursor c{path_, base_, size_};
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic)
    throw_error(ErrorKind::Format, "{}: not a GGUF file (bad magic 0x{:08x}, expected \"GGUF\")", path_, magic);
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    // A big-endian file has its version byte-swapped (e.g. 0x03000000).
    const bool swapped = version_ >= 0x01000000u && (version_ & 0xffffu) == 0;
    throw_error(ErrorKind::Unsupported, "{}: unsupported GGUF version {} (supported: 2, 3){}", path_, version_,
                swapped ? "; this looks like a big-endian file" : "");
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Minimum encoded sizes: kv = key length + type + 1 value byte; tensor info = name length +
  // n_dims + type + offset. Bounding the counts first keeps reserve() proportional to the file.
  if (n_kv > c.remaining() / 13)
    throw_error(ErrorKind::Format, "{}: truncated file: header claims {} metadata entries but only {} bytes remain",
                path_, n_kv, c.remaining());
  if (n_tensors > c.remaining() / 24)
    throw_error(ErrorKind::Format, "{}: truncated file: header claims {} tensors but only {} bytes remain", path_,
                n_tensors, c.remaining());

  kv_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.read_string("metadata key");
    const uint32_t type = c.read<uint32_t>("value type", key);
    if (kv_index_.count(key)) throw_error(ErrorKind::Format, "{}: duplicate metadata key '{}'", path_, key);
    GGUFValue value = c.read_value(type, key, 0);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(value));
  }

  if (const GGUFValue* a = find("general.alignment")) {
    if (!a->is_integer())
      throw_error(ErrorKind::Format, "{}: metadata key 'general.alignment' has type {}, expected UINT32", path_,
                  gguf_type_name(a->type));
    // The GGUF specification: "it must be a multiple of 8". Smaller alignments put F16/F32 data
    // and block scales at odd addresses, which the kernels read as uint16_t and float
    // (misaligned loads, undefined behaviour; found by fuzz_model).
    if (a->i < 8 || a->i > kMaxAlignment || (a->i & (a->i - 1)) != 0)
      throw_error(ErrorKind::Format, "{}: general.alignment {} is not a power of two in [8, 2^30]", path_, a->i);
    alignment_ = static_cast<size_t>(a->i);
  }
  if (!with_tensors) return;

  tensors_.reserve(n_tensors);
  for (uint64_t t = 0; t < n_tensors; ++t) {
    GGUFTensorInfo info;
    info.name = c.read_string("tensor name");
    if (tensor_index_.count(info.name))
      throw_error(ErrorKind::Format, "{}: duplicate tensor name '{}'", path_, info.name);
    const uint32_t n_dims = c.read<uint32_t>("dimension count", info.name);
    if (n_dims == 0 || n_dims > kMaxDims)
      throw_error(ErrorKind::Format, "{}: tensor '{}' has {} dimensions (must be 1 to {})", path_, info.name, n_dims,
                  kMaxDims);
    info.ne.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>("dimension", info.name);
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw_error(ErrorKind::Format, "{}: tensor '{}' dimension {} has size {} (negative or too large)", path_,
                    info.name, d, static_cast<int64_t>(ne));
      info.ne[d] = static_cast<int64_t>(ne);
    }
    const uint32_t type_id = c.read<uint32_t>("tensor type", info.name);
    const auto dt = dtype_info(type_id);
    if (!dt) {
      if (const char* known = ggml_type_name(type_id))
        throw_error(ErrorKind::Unsupported,
                    "{}: unsupported tensor type {} ({}) for tensor '{}' (supported: {})", path_, known, type_id,
                    info.name, dtype_readable_names());
      throw_error(ErrorKind::Unsupported, "{}: unknown tensor type {} for tensor '{}'", path_, type_id, info.name);
    }
    info.type = dt->type;
    info.offset = c.read<uint64_t>("tensor offset", info.name);

    // Every partial product must fit too, not just the total: with a zero dimension the total is 0
    // however large the others are, yet rows() (the product of ne[1..]) would overflow.
    int64_t n = 1, nonzero = 1;
    for (int64_t ne : info.ne)
      if (!checked_mul(n, ne, n) || !checked_mul(nonzero, std::max<int64_t>(ne, 1), nonzero))
        throw_error(ErrorKind::Format, "{}: tensor '{}' element count overflows (shape has {} dimensions)", path_,
                    info.name, n_dims);
    info.n_elements = n;
    if (info.ne[0] % dt->block_size != 0)
      throw_error(ErrorKind::Format, "{}: tensor '{}' row of {} elements is not a multiple of the {} block size {}",
                  path_, info.name, info.ne[0], dt->name, dt->block_size);
    int64_t nbytes = 0;
    if (!checked_mul(n / dt->block_size, static_cast<int64_t>(dt->block_bytes), nbytes))
      throw_error(ErrorKind::Format, "{}: tensor '{}' byte size overflows", path_, info.name);
    info.nbytes = static_cast<size_t>(nbytes);
    tensor_index_.emplace(info.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }

  // The data section starts at the next multiple of the alignment; a file without tensors may
  // end before that padding.
  const size_t data_start = (c.pos + alignment_ - 1) / alignment_ * alignment_;
  const size_t data_size = data_start <= size_ ? size_ - data_start : 0;
  for (auto& info : tensors_) {
    if (info.offset % alignment_ != 0)
      throw_error(ErrorKind::Format, "{}: tensor '{}' offset {} is not a multiple of the alignment {}", path_,
                  info.name, info.offset, alignment_);
    if (info.offset > data_size || info.nbytes > data_size - info.offset)
      throw_error(ErrorKind::Format,
                  "{}: tensor '{}' data ({} bytes at offset {}) lies past the end of the file (data section has "
                  "{} bytes; truncated?)",
                  path_, info.name, info.nbytes, info.offset, data_size);
    info.data = info.nbytes > 0 ? base_ + data_start + info.offset : nullptr;
  }
}

}  // namespace specmoe::core
