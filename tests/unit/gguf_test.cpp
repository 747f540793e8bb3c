// GGUF reader and writer: round trips of every value and tensor type, hand-built files with
// every kind of corruption the reader must reject, and the shared stories260K model.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "base/error.h"
#include "core/gguf.h"
#include "kernels/cpu/quant.h"
#include "test_data.h"

using namespace specmoe;
using namespace specmoe::core;

namespace {

std::string scratch_file(const std::string& stem) {
  static std::atomic<int> counter{0};
  return (specmoe::testing::scratch_dir() /
          fmt::format("gguf_test_{}_{}_{}.gguf", ::getpid(), counter++, stem))
      .string();
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Little-endian byte builder for hand-made files.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void u32(uint32_t v) { put(v); }
  void u64(uint64_t v) { put(v); }
  void str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void pad(size_t a) { b.resize((b.size() + a - 1) / a * a, 0); }
  size_t size() const { return b.size(); }
};

// A small valid file, with knobs to corrupt one field at a time. Records where each part starts.
struct Spec {
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  bool dup_key = false;
  bool dup_tensor = false;
  uint32_t type_a = 0;  // F32
  uint32_t n_dims_a = 2;
  std::vector<uint64_t> ne_a = {4, 2};
  uint64_t offset_b = 32;  // tensor a is 4*2 F32 = 32 bytes at offset 0
  uint64_t n_kv_override = 0;
};

struct Built {
  std::vector<uint8_t> bytes;
  size_t kv_start, kv_string_value, kv_array, tensors_start, tensor_b_info, data_start;
};

Built build(const Spec& s) {
  Bytes f;
  Built out{};
  f.u32(s.magic);
  f.u32(s.version);
  f.u64(2);                                            // tensors
  f.u64(s.n_kv_override ? s.n_kv_override : (s.dup_key ? 4 : 3));  // kv
  out.kv_start = f.size();
  f.str("general.architecture");
  f.u32(8);  // STRING
  out.kv_string_value = f.size();
  f.str("llama");
  f.str("test.u32");
  f.u32(4);
  f.u32(7);
  f.str("test.tokens");
  f.u32(9);  // ARRAY
  out.kv_array = f.size();
  f.u32(8);  // of STRING
  f.u64(3);
  f.str("a");
  f.str("bb");
  f.str("ccc");
  if (s.dup_key) {
    f.str("test.u32");
    f.u32(4);
    f.u32(8);
  }
  out.tensors_start = f.size();
  f.str("a");
  f.u32(s.n_dims_a);
  for (uint64_t ne : s.ne_a) f.u64(ne);
  f.u32(s.type_a);
  f.u64(0);
  out.tensor_b_info = f.size();
  f.str(s.dup_tensor ? "a" : "b");
  f.u32(1);
  f.u64(8);
  f.u32(0);
  f.u64(s.offset_b);
  f.pad(32);
  out.data_start = f.size();
  for (int k = 0; k < 8; ++k) f.put<float>(static_cast<float>(k) + 0.5f);  // a
  for (int k = 0; k < 8; ++k) f.put<float>(-static_cast<float>(k));       // b
  out.bytes = f.b;
  return out;
}

// Opens `bytes` written to a scratch file and expects an Error of `kind` whose message names the
// path and contains `phrase`.
void expect_error(const std::vector<uint8_t>& bytes, ErrorKind kind, const std::string& phrase) {
  const std::string path = scratch_file("bad");
  write_bytes(path, bytes);
  try {
    GGUFFile::open(path);
    ADD_FAILURE() << "expected an error containing '" << phrase << "'";
  } catch (const Error& e) {
    EXPECT_EQ(error_kind_name(e.kind()), std::string(error_kind_name(kind))) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace

TEST(GGUFReader, HandBuiltFileParses) {
  const Built b = build(Spec{});
  const std::string path = scratch_file("ok");
  write_bytes(path, b.bytes);
  auto f = GGUFFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->file_size(), b.bytes.size());
  ASSERT_EQ(f->metadata().size(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("test.u32"), 7);
  EXPECT_EQ(f->get_string_array("test.tokens"), (std::vector<std::string>{"a", "bb", "ccc"}));
  ASSERT_EQ(f->tensors().size(), 2u);
  const auto& a = f->tensor("a");
  EXPECT_EQ(a.ne, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(a.n_elements, 8);
  EXPECT_EQ(a.rows(), 2);
  EXPECT_EQ(a.nbytes, 32u);
  EXPECT_EQ(a.type, DType::F32);
  float va[8];
  std::memcpy(va, a.data, 32);
  EXPECT_EQ(va[0], 0.5f);
  EXPECT_EQ(va[7], 7.5f);
  const auto& tb = f->tensor("b");
  EXPECT_EQ(tb.offset, 32u);
  float vb[8];
  std::memcpy(vb, tb.data, 32);
  EXPECT_EQ(vb[3], -3.0f);
  EXPECT_EQ(f->find_tensor("zzz"), nullptr);
  std::remove(path.c_str());
}

TEST(GGUFReader, GettersReportMissingAndWrongType) {
  const Built b = build(Spec{});
  const std::string path = scratch_file("getters");
  write_bytes(path, b.bytes);
  auto f = GGUFFile::open(path);
  EXPECT_EQ(f->get_int("nope", 42), 42);
  EXPECT_EQ(f->get_string("nope", "x"), "x");
  EXPECT_EQ(f->get_float("nope", 2.5), 2.5);
  EXPECT_TRUE(f->get_bool("nope", true));
  try {
    f->get_int("nope");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": metadata key 'nope' is missing"), std::string::npos) << e.what();
  }
  try {
    f->get_int("general.architecture");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has type STRING, expected an integer"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f->get_string("test.u32"), Error);
  EXPECT_THROW(f->get_string_array("test.u32"), Error);
  EXPECT_THROW(f->get_int_array("test.tokens"), Error);
  try {
    f->tensor("zzz");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'zzz' is missing"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(GGUFReader, Version2Accepted) {
  Spec s;
  s.version = 2;
  const std::string path = scratch_file("v2");
  write_bytes(path, build(s).bytes);
  EXPECT_EQ(GGUFFile::open(path)->version(), 2u);
  std::remove(path.c_str());
}

TEST(GGUFReader, RejectsBadMagic) {
  Spec s;
  s.magic = 0x46554746;
  expect_error(build(s).bytes, ErrorKind::Format, "bad magic");
}

TEST(GGUFReader, RejectsUnsupportedVersions) {
  for (uint32_t v : {1u, 4u}) {
    Spec s;
    s.version = v;
    expect_error(build(s).bytes, ErrorKind::Unsupported, fmt::format("unsupported GGUF version {}", v));
  }
}

TEST(GGUFReader, RejectsTruncationAtTenOffsets) {
  const Built b = build(Spec{});
  const size_t n = b.bytes.size();
  const std::vector<size_t> cuts = {
      2,                        // inside the magic
      10,                       // inside the tensor count
      b.kv_start + 5,           // inside the first key's length
      b.kv_string_value + 10,   // inside the first string value
      b.kv_array + 14,          // inside the string array
      b.tensors_start + 3,      // inside the first tensor name length
      b.tensor_b_info + 12,     // inside the second tensor's info
      b.data_start - 1,         // inside the padding before the data
      b.data_start + 20,        // inside tensor a's data
      n - 1,                    // one byte short of tensor b's end
  };
  for (size_t cut : cuts) {
    SCOPED_TRACE(fmt::format("truncated at {} of {}", cut, n));
    ASSERT_LT(cut, n);
    expect_error(std::vector<uint8_t>(b.bytes.begin(), b.bytes.begin() + static_cast<ptrdiff_t>(cut)),
                 ErrorKind::Format, "truncated");
  }
  expect_error({}, ErrorKind::Format, "truncated");
}

TEST(GGUFReader, RejectsTensorPastEnd) {
  Spec s;
  s.offset_b = 4096;
  expect_error(build(s).bytes, ErrorKind::Format, "tensor 'b' data (32 bytes at offset 4096) lies past the end");
}

TEST(GGUFReader, RejectsMisalignedOffset) {
  Spec s;
  s.offset_b = 36;
  expect_error(build(s).bytes, ErrorKind::Format, "tensor 'b' offset 36 is not a multiple of the alignment 32");
}

TEST(GGUFReader, RejectsUnknownTensorType) {
  Spec s;
  s.type_a = 77;
  expect_error(build(s).bytes, ErrorKind::Unsupported, "unknown tensor type 77 for tensor 'a'");
  s.type_a = 28;  // a real ggml type specmoe does not read
  expect_error(build(s).bytes, ErrorKind::Unsupported, "unsupported tensor type F64 (28) for tensor 'a'");
}

TEST(GGUFReader, RejectsTooManyDims) {
  Spec s;
  s.n_dims_a = 5;
  s.ne_a = {4, 2, 1, 1, 1};
  expect_error(build(s).bytes, ErrorKind::Format, "tensor 'a' has 5 dimensions");
}

TEST(GGUFReader, RejectsElementCountOverflow) {
  Spec s;
  s.n_dims_a = 3;
  s.ne_a = {1ull << 32, 1ull << 32, 4};
  expect_error(build(s).bytes, ErrorKind::Format, "tensor 'a' element count overflows");
  s.n_dims_a = 2;
  s.ne_a = {4, 1ull << 63};  // does not fit in int64
  expect_error(build(s).bytes, ErrorKind::Format, "negative or too large");
}

TEST(GGUFReader, RejectsRowNotMultipleOfBlock) {
  Spec s;
  s.type_a = 8;  // Q8_0, block 32; ne[0] = 4
  expect_error(build(s).bytes, ErrorKind::Format, "row of 4 elements is not a multiple of the Q8_0 block size 32");
}

TEST(GGUFReader, RejectsDuplicates) {
  Spec s;
  s.dup_key = true;
  expect_error(build(s).bytes, ErrorKind::Format, "duplicate metadata key 'test.u32'");
  Spec t;
  t.dup_tensor = true;
  expect_error(build(t).bytes, ErrorKind::Format, "duplicate tensor name 'a'");
}

TEST(GGUFReader, RejectsHugeCountsBeforeAllocating) {
  Spec s;
  s.n_kv_override = 1ull << 60;
  expect_error(build(s).bytes, ErrorKind::Format, "metadata entries");
  // An array claiming 2^61 strings: rejected by the count bound, not by a failed allocation.
  Built b = build(Spec{});
  const uint64_t huge = 1ull << 61;
  std::memcpy(b.bytes.data() + b.kv_array + 4, &huge, 8);
  expect_error(b.bytes, ErrorKind::Format, "claims 2305843009213693952 elements");
  // A string length beyond the file.
  b = build(Spec{});
  std::memcpy(b.bytes.data() + b.kv_string_value, &huge, 8);
  expect_error(b.bytes, ErrorKind::Format, "has length 2305843009213693952");
}

TEST(GGUFReader, RejectsUnknownValueTypeAndDeepNesting) {
  Built b = build(Spec{});
  const uint32_t bad = 13;
  std::memcpy(b.bytes.data() + b.kv_string_value - 4, &bad, 4);
  expect_error(b.bytes, ErrorKind::Format, "metadata key 'general.architecture' has unknown value type 13");

  Bytes f;  // a chain of arrays each holding one array, 20 deep
  f.u32(0x46554747);
  f.u32(3);
  f.u64(0);
  f.u64(1);
  f.str("deep");
  f.u32(9);
  for (int k = 0; k < 20; ++k) {
    f.u32(9);
    f.u64(1);
  }
  expect_error(f.b, ErrorKind::Format, "nests arrays more than");
}

TEST(GGUFReader, MissingFileIsIo) {
  const std::string path = scratch_file("does_not_exist");
  try {
    GGUFFile::open(path);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
}

// Every byte sequence must be rejected cleanly or parsed: flip random bytes of a valid file and
// truncate it at every offset. Failure here is a crash or a non-specmoe exception.
TEST(GGUFReader, SurvivesCorruption) {
  const Built b = build(Spec{});
  const std::string path = scratch_file("fuzz");
  std::mt19937 rng(1234);
  int parsed = 0, rejected = 0;
  auto attempt = [&](const std::vector<uint8_t>& bytes) {
    write_bytes(path, bytes);
    try {
      auto f = GGUFFile::open(path);
      for (const auto& t : f->tensors()) {  // touch the last byte: under ASan an overrun shows
        volatile uint8_t sink = t.nbytes ? t.data[t.nbytes - 1] : 0;
        (void)sink;
      }
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
  };
  for (size_t cut = 0; cut < b.bytes.size(); ++cut)
    attempt(std::vector<uint8_t>(b.bytes.begin(), b.bytes.begin() + static_cast<ptrdiff_t>(cut)));
  for (int k = 0; k < 300; ++k) {
    auto bytes = b.bytes;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int j = 0; j < flips; ++j) bytes[rng() % b.data_start] = static_cast<uint8_t>(rng());
    attempt(bytes);
  }
  EXPECT_GE(rejected, static_cast<int>(b.bytes.size()));  // at least every truncation is rejected
  EXPECT_GT(parsed, 0);  // some flips land in harmless places (string contents, data)
  std::remove(path.c_str());
}

TEST(GGUFWriter, RoundTripsEveryValueType) {
  GGUFWriter w;
  auto scalar = [](GGUFType t, int64_t i) {
    GGUFValue v;
    v.type = t;
    v.i = i;
    return v;
  };
  w.set_value("u8", scalar(GGUFType::UINT8, 250));
  w.set_value("i8", scalar(GGUFType::INT8, -100));
  w.set_value("u16", scalar(GGUFType::UINT16, 65000));
  w.set_value("i16", scalar(GGUFType::INT16, -32000));
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set_u64("u64", 1ull << 40);
  w.set_value("i64", scalar(GGUFType::INT64, -(1ll << 50)));
  w.set_f32("f32", 0.1f);
  GGUFValue f64;
  f64.type = GGUFType::FLOAT64;
  f64.f = 1.0 / 3.0;
  w.set_value("f64", f64);
  w.set_bool("yes", true);
  w.set_bool("no", false);
  w.set_string("s", "héllo\nworld");
  w.set_string("empty", "");
  w.set_string_array("strs", {"x", "", "long string"});
  w.set_f32_array("f32s", {1.5f, -2.25f});
  w.set_i32_array("i32s", {-1, 2, 3});
  GGUFValue u8s;
  u8s.type = GGUFType::ARRAY;
  u8s.elem_type = GGUFType::UINT8;
  for (int k = 0; k < 5; ++k) u8s.items.push_back(scalar(GGUFType::UINT8, 200 + k));
  w.set_value("u8s", u8s);
  GGUFValue nested;  // [[1, 2], [3]] of INT64, plus an empty array
  nested.type = GGUFType::ARRAY;
  nested.elem_type = GGUFType::ARRAY;
  for (std::vector<int64_t> row : {std::vector<int64_t>{1, 2}, std::vector<int64_t>{3}, std::vector<int64_t>{}}) {
    GGUFValue inner;
    inner.type = GGUFType::ARRAY;
    inner.elem_type = GGUFType::INT64;
    for (int64_t x : row) inner.items.push_back(scalar(GGUFType::INT64, x));
    nested.items.push_back(inner);
  }
  w.set_value("nested", nested);
  w.set_u32("u32", 5);  // replacing a key keeps one entry
  const std::string path = scratch_file("values");
  w.write(path);

  auto f = GGUFFile::open(path);
  EXPECT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(f->find("u8")->type, GGUFType::UINT8);
  EXPECT_EQ(f->get_int("u8"), 250);
  EXPECT_EQ(f->get_int("i8"), -100);
  EXPECT_EQ(f->get_int("u16"), 65000);
  EXPECT_EQ(f->get_int("i16"), -32000);
  EXPECT_EQ(f->get_int("u32"), 5);
  EXPECT_EQ(f->get_int("i32"), -2000000000);
  EXPECT_EQ(f->get_int("u64"), 1ll << 40);
  EXPECT_EQ(f->get_int("i64"), -(1ll << 50));
  EXPECT_EQ(f->get_float("f32"), static_cast<double>(0.1f));
  EXPECT_EQ(f->get_float("f64"), 1.0 / 3.0);
  EXPECT_TRUE(f->get_bool("yes", false));
  EXPECT_FALSE(f->get_bool("no", true));
  EXPECT_EQ(f->get_string("s"), "héllo\nworld");
  EXPECT_EQ(f->get_string("empty"), "");
  EXPECT_EQ(f->get_string_array("strs"), (std::vector<std::string>{"x", "", "long string"}));
  EXPECT_EQ(f->get_float_array("f32s"), (std::vector<double>{1.5, -2.25}));
  EXPECT_EQ(f->get_int_array("i32s"), (std::vector<int64_t>{-1, 2, 3}));
  EXPECT_EQ(f->get_int_array("u8s"), (std::vector<int64_t>{200, 201, 202, 203, 204}));
  const GGUFValue* n = f->find("nested");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->elem_type, GGUFType::ARRAY);
  ASSERT_EQ(n->array_size(), 3u);
  EXPECT_EQ(n->items[0].array_size(), 2u);
  EXPECT_EQ(n->items[0].items[1].i, 2);
  EXPECT_EQ(n->items[1].items[0].i, 3);
  EXPECT_EQ(n->items[2].array_size(), 0u);
  EXPECT_EQ(n->items[2].elem_type, GGUFType::INT64);
  // The file is written once, atomically: no temporary is left beside it.
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_EQ(e.path().string().find(path + ".tmp-"), std::string::npos) << e.path();
  std::remove(path.c_str());
}

TEST(GGUFWriter, RoundTripsEveryTensorTypeByteExact) {
  const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,  DType::Q4_1,
                         DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q5_0, DType::Q5_1,  DType::Q2_K,
                         DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS};
  std::mt19937 rng(7);
  GGUFWriter w;
  w.set_alignment(64);
  std::vector<std::vector<uint8_t>> payloads;
  int k = 0;
  for (DType t : types) {
    const int64_t bs = dtype_info(t).block_size;
    const int64_t ne0 = bs == 1 ? 17 : bs * 3;  // awkward: 17 floats, or 3 blocks
    const int64_t rows = 3;
    std::vector<uint8_t> bytes(dtype_row_bytes(t, ne0) * rows);
    for (auto& x : bytes) x = static_cast<uint8_t>(rng());
    w.add_tensor(fmt::format("t{}.{}", k++, dtype_name(t)), t, {ne0, rows}, bytes);
    payloads.push_back(bytes);
  }
  std::vector<float> vals(256 * 2);
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = std::sin(static_cast<float>(i));
  w.add_tensor_f32("quantized", DType::Q8_0, {256, 2}, vals);
  w.add_tensor_f32("plain", DType::F32, {4, 1, 2, 64}, vals);
  const std::string path = scratch_file("tensors");
  w.write(path);

  auto f = GGUFFile::open(path);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->get_int("general.alignment"), 64);
  ASSERT_EQ(f->tensors().size(), std::size(types) + 2);
  for (size_t i = 0; i < std::size(types); ++i) {
    const auto& t = f->tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.type, types[i]);
    EXPECT_EQ(t.offset % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);  // the mapping is page aligned
    ASSERT_EQ(t.nbytes, payloads[i].size());
    EXPECT_EQ(std::memcmp(t.data, payloads[i].data(), t.nbytes), 0);
  }
  const auto& q = f->tensor("quantized");
  std::vector<uint8_t> expect(dtype_row_bytes(DType::Q8_0, 256));
  kernels::cpu::quantize_row(DType::Q8_0, vals.data() + 256, expect.data(), 256);
  EXPECT_EQ(std::memcmp(q.data + expect.size(), expect.data(), expect.size()), 0);
  const auto& p = f->tensor("plain");
  EXPECT_EQ(p.ne, (std::vector<int64_t>{4, 1, 2, 64}));
  EXPECT_EQ(p.rows(), 128);
  EXPECT_EQ(std::memcmp(p.data, vals.data(), vals.size() * 4), 0);

  // The in-memory image is the file, byte for byte, and opens the same.
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> file_bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<uint8_t> image = w.bytes();
  EXPECT_EQ(image, file_bytes);
  auto m = GGUFFile::open_memory(image, "image.gguf");
  EXPECT_EQ(m->tensors().size(), f->tensors().size());
  EXPECT_EQ(m->tensor("plain").rows(), 128);
  std::remove(path.c_str());
}

// Found by fuzz_model (tests/regression/model/alignment-below-8-misaligned-f16.gguf): an
// alignment of 1, 2 or 4 was accepted, so F16 data could sit at an odd address and the F16
// dequantizer loaded uint16_t from it (undefined behaviour). The GGUF specification requires a
// multiple of 8; the reader refuses less, naming the file, and the writer never writes less.
TEST(GGUFReader, RefusesAnAlignmentBelowEight) {
  for (int64_t a : {1, 2, 4, 8, 16}) {
    GGUFWriter w;
    GGUFValue v;
    v.type = GGUFType::UINT32;
    v.i = a;
    w.set_value("general.alignment", v);  // the key only: the writer still pads to 32
    const std::vector<float> vals = {1.0f, 2.0f};
    w.add_tensor_f32("t", DType::F16, {2}, vals);
    if (a < 8) {
      expect_error(w.bytes(), ErrorKind::Format, fmt::format("general.alignment {} is not a power of two in [8, 2^30]", a));
    } else {
      auto f = GGUFFile::open_memory(w.bytes(), "aligned.gguf");
      EXPECT_EQ(f->alignment(), static_cast<size_t>(a));
    }
  }
  GGUFWriter w;
  EXPECT_THROW(w.set_alignment(4), Error);
  EXPECT_NO_THROW(w.set_alignment(8));
}

TEST(GGUFWriter, RejectsBadTensorsAndUnwritablePath) {
  GGUFWriter w;
  std::vector<uint8_t> bytes(8);
  EXPECT_THROW(w.add_tensor("x", DType::F32, {3}, bytes), Error);   // 3 floats need 12 bytes
  EXPECT_THROW(w.add_tensor("x", DType::Q8_0, {2}, bytes), Error);  // not a whole block
  w.add_tensor("x", DType::F32, {2}, bytes);
  EXPECT_THROW(w.add_tensor("x", DType::F32, {2}, bytes), Error);  // duplicate
  EXPECT_THROW(w.set_alignment(3), Error);
  try {
    w.write("/nonexistent-dir/x.gguf");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.gguf"), std::string::npos);
  }
}

TEST(GGUFReader, Stories260K) {
  SPECMOE_REQUIRE_DATA("models/stories260K.gguf");
  auto f = GGUFFile::open(specmoe::testing::data_path("models/stories260K.gguf").string());
  EXPECT_EQ(f->tensors().size(), 48u);
  EXPECT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 512u);
  const auto& emb = f->tensor("token_embd.weight");
  EXPECT_EQ(emb.type, DType::F32);
  EXPECT_EQ(emb.ne, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb.nbytes, 64u * 512u * 4u);
  // Non-zero guard: the embedding holds real weights.
  float sum_abs = 0.0f;
  for (int64_t i = 0; i < 64 * 512; ++i) {
    float v;
    std::memcpy(&v, emb.data + 4 * i, 4);
    sum_abs += std::fabs(v);
  }
  EXPECT_GT(sum_abs, 1.0f);
}
