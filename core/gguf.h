// GGUF reading (memory-mapped, bounds-checked) and writing. Specification:
// https://github.com/ggerganov/ggml/blob/master/docs/gguf.md (version 2 and 3 files).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dtype.h"

namespace specmoe::core {

// Metadata value types, numbered as in the GGUF specification.
enum class GGUFType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* gguf_type_name(GGUFType t);

// One metadata value. Scalars use the field matching their type; arrays keep their element type
// and their elements in `items` (strings in `strings` for speed, since vocabularies are big).
struct GGUFValue {
  GGUFType type = GGUFType::UINT32;
  GGUFType elem_type = GGUFType::UINT32;  // arrays only
  int64_t i = 0;                          // all integer types and BOOL (UINT64 stored bit-cast)
  double f = 0.0;                         // FLOAT32 / FLOAT64
  std::string s;                          // STRING
  std::vector<std::string> strings;       // ARRAY of STRING
  std::vector<GGUFValue> items;           // ARRAY of anything else (incl. nested arrays)

  bool is_integer() const;
  bool is_float() const;
  size_t array_size() const;  // 0 for scalars
};

struct GGUFTensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> ne;   // GGUF order: ne[0] is the contiguous (row) dimension
  uint64_t offset = 0;       // relative to the start of the tensor data section
  size_t nbytes = 0;
  int64_t n_elements = 0;
  const uint8_t* data = nullptr;  // into the memory map, valid while the GGUFFile lives
  int64_t rows() const;      // product of ne[1..]
};

class GGUFFile {
 public:
  // Opens and validates a file: every tensor lies inside the file, every count and length is
  // bounded by the file size before anything is allocated. Throws specmoe::Error naming the path.
  static std::shared_ptr<GGUFFile> open(const std::string& path);
  // The header and metadata only, as llama.cpp's vocab_only loading: the tensor table is not read
  // (tensors() is empty), so a file whose tensor types or layout this build does not support still
  // gives its vocabulary and chat template. Same checks on everything it reads.
  static std::shared_ptr<GGUFFile> open_metadata(const std::string& path);
  // The same checks on bytes already in memory (copied into an exact-size buffer the GGUFFile
  // owns, so a sanitizer sees any read past the end); `name` stands in for the path in messages.
  // Used by the fuzz targets and by code that receives a GGUF image rather than a file.
  static std::shared_ptr<GGUFFile> open_memory(std::span<const uint8_t> bytes, const std::string& name);
  ~GGUFFile();
  GGUFFile(const GGUFFile&) = delete;
  GGUFFile& operator=(const GGUFFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }

  const std::vector<std::pair<std::string, GGUFValue>>& metadata() const { return kv_; }
  const GGUFValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: throw Error "<path>: metadata key '<key>' is missing" / "... has type X,
  // expected Y". The overloads with a default return it when the key is absent.
  std::string get_string(std::string_view key) const;
  std::string get_string(std::string_view key, const std::string& def) const;
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t def) const;
  double get_float(std::string_view key) const;
  double get_float(std::string_view key, double def) const;
  bool get_bool(std::string_view key, bool def) const;
  const std::vector<std::string>& get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;

  const std::vector<GGUFTensorInfo>& tensors() const { return tensors_; }
  const GGUFTensorInfo* find_tensor(std::string_view name) const;
  // Throws Error "<path>: tensor '<name>' is missing" when absent.
  const GGUFTensorInfo& tensor(std::string_view name) const;

 private:
  GGUFFile() = default;
  static std::shared_ptr<GGUFFile> open_mapped(const std::string& path, bool with_tensors);
  void parse(bool with_tensors = true);

  std::string path_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  bool mapped_ = false;                 // base_ is an mmap (open) rather than owned_ (open_memory)
  std::unique_ptr<uint8_t[]> owned_;
  std::vector<std::pair<std::string, GGUFValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GGUFTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF file in memory and writes it atomically (temporary file + rename).
class GGUFWriter {
 public:
  void set_string(const std::string& key, const std::string& v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_value(const std::string& key, const GGUFValue& v);  // any type, e.g. copied from a reader
  void set_alignment(uint32_t a);                              // writes general.alignment

  // Adds a tensor whose bytes are already in `type`'s layout (dtype_row_bytes(type, ne[0]) * rows).
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, std::span<const uint8_t> bytes);
  // Quantizes float data into `type` and adds it.
  void add_tensor_f32(const std::string& name, DType type, std::vector<int64_t> ne, std::span<const float> values);

  void write(const std::string& path) const;  // throws Error(Io) naming the path
  // The same file image in memory (fuzz targets and tests that build GGUF bytes without a file).
  std::vector<uint8_t> bytes() const;

 private:
  std::vector<uint8_t> header() const;  // header, metadata, tensor infos and padding
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> bytes;
  };
  std::vector<std::pair<std::string, GGUFValue>> kv_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace specmoe::core
