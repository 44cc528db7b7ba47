// tests/core/test_npy.cpp — .npy files: the exact bytes NumPy writes (checked by hand against
// the format spec and against NumPy 1.24's output), copy vs memory-mapped loading, Fortran
// order as a non-contiguous view, and clear errors for broken files.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values_near;

namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "kiln_npy_" + name + ".npy";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A version 1.0 file: magic, version, little-endian header length, header, data.
std::string npy_bytes(const std::string& header_dict, const std::string& data) {
  std::string header = header_dict;
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

}  // namespace

TEST(Npy, SaveWritesTheBytesNumPyWrites) {
  const std::string path = temp_path("save");
  save_npy(path, tensor({1.0f, 2.0f}));
  const std::string bytes = read_file(path);
  // 10-byte preamble + 118-byte header (0x76) = 128, then 2 x 4 bytes of data.
  ASSERT_EQ(bytes.size(), 136u);
  EXPECT_EQ(bytes.substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  EXPECT_EQ(bytes.substr(10, 57), "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
  EXPECT_EQ(bytes[127], '\n');
  EXPECT_EQ(bytes.substr(128), std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8));  // 1.0f, 2.0f
  save_npy(path, arange(6).reshape({2, 3}));
  EXPECT_EQ(read_file(path).substr(10, 59), "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }");
  save_npy(path, tensor(3.5f));
  EXPECT_EQ(read_file(path).substr(10, 55), "{'descr': '<f4', 'fortran_order': False, 'shape': (), }");
  EXPECT_ERROR(save_npy(path, ones({2}, kBFloat16)), "save_npy: NumPy has no bfloat16 dtype");
  std::remove(path.c_str());
}

TEST(Npy, RoundTripEveryDtype) {
  const std::string path = temp_path("roundtrip");
  for (DType d : {kFloat32, kFloat64, kFloat16, kInt64, kInt32, kInt16, kInt8, kUInt8, kBool}) {
    Tensor t = arange(6).reshape({3, 2}).to(d);
    save_npy(path, t.t());  // non-contiguous input is written in C order
    Tensor back = load_npy(path);
    EXPECT_EQ(back.dtype(), d);
    EXPECT_EQ(back.sizes(), IntArrayRef({2, 3}));
    EXPECT_TRUE(kiln::testing::tensors_near(back, t.t(), 0));
  }
  std::remove(path.c_str());
}

TEST(Npy, CopyVersusMemoryMap) {
  const std::string path = temp_path("mmap");
  save_npy(path, tensor({1.0, 2.0, 3.0}, kFloat64));
  Tensor copy = load_npy(path);
  Tensor mapped = load_npy(path, {.mmap = true});
  EXPECT_EQ(copy.impl()->storage()->provenance().origin, MemoryOrigin::Copied);
  EXPECT_EQ(mapped.impl()->storage()->provenance().origin, MemoryOrigin::MemoryMapped);
  EXPECT_NE(mapped.describe().find("memory-mapped"), std::string::npos) << mapped.describe();
  // Private mapping: writing to the tensor changes neither the file nor the copy.
  mapped.fill_(9);
  EXPECT_TRUE(values_near(load_npy(path), {1, 2, 3}));
  // The mapping outlives the file's name and lives as long as a view does.
  Tensor view = mapped.narrow(0, 1, 2);
  mapped = Tensor();
  std::remove(path.c_str());
  EXPECT_TRUE(values_near(view, {9, 9}));
}

TEST(Npy, FortranOrderBecomesANonContiguousView) {
  // NumPy's np.asfortranarray(np.arange(6.).reshape(2, 3)): data in column order 0 3 1 4 2 5.
  std::string data;
  for (double v : {0.0, 3.0, 1.0, 4.0, 2.0, 5.0}) data.append(reinterpret_cast<const char*>(&v), 8);
  const std::string path = temp_path("fortran");
  write_file(path, npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", data));
  for (bool mmap : {false, true}) {
    Tensor t = load_npy(path, {.mmap = mmap});
    EXPECT_EQ(t.sizes(), IntArrayRef({2, 3}));
    EXPECT_EQ(t.strides(), IntArrayRef({1, 2}));
    EXPECT_FALSE(t.is_contiguous());  // the contiguity lesson
    EXPECT_TRUE(values_near(t, {0, 1, 2, 3, 4, 5}));
    EXPECT_TRUE(t.contiguous().is_contiguous());
  }
  std::remove(path.c_str());
}

TEST(Npy, BrokenFilesGiveClearErrors) {
  const std::string path = temp_path("broken");
  const std::string good = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                                     std::string(8, '\0'));
  write_file(path, good.substr(0, 5));
  EXPECT_ERROR(load_npy(path), "is too short to be a .npy file");
  write_file(path, "GARBAGE!" + good.substr(8));
  EXPECT_ERROR(load_npy(path), "bad magic: not a .npy file");
  write_file(path, good.substr(0, 60));
  EXPECT_ERROR(load_npy(path), "file is truncated inside the header");
  write_file(path, good.substr(0, good.size() - 1));
  EXPECT_ERROR(load_npy(path), "needs 8 bytes of data but the file holds 7");
  write_file(path, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000,), }", std::string(8, '\0')));
  EXPECT_ERROR(load_npy(path), "needs 4000000 bytes of data but the file holds 8");
  write_file(path, npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')));
  EXPECT_ERROR(load_npy(path), "unsupported dtype '<c8'");
  write_file(path, npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')));
  EXPECT_ERROR(load_npy(path), "big-endian data ('>f4') is not supported");
  write_file(path, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""));
  EXPECT_ERROR(load_npy(path), "shape value too large");
  std::string huge = good;
  huge[8] = '\xff';
  huge[9] = '\xff';
  write_file(path, huge);
  EXPECT_ERROR(load_npy(path), "file is truncated inside the header");
  EXPECT_ERROR(load_npy("/nonexistent/x.npy"), "load_npy: cannot open '/nonexistent/x.npy'");
  std::remove(path.c_str());
}

TEST(Npy, EmptyArraysWithHugeDimsAreRejectedNotOverflowed) {
  // Found by fuzz_npy: zero elements pass the size check, but the other dims' strides overflow.
  const std::string path = temp_path("huge_empty");
  write_file(path, npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 888888888864, 555555554), }", ""));
  EXPECT_ERROR(load_npy(path), "shape is too large");
  std::remove(path.c_str());
  EXPECT_ERROR(empty({0, std::int64_t{1} << 40, std::int64_t{1} << 40}), "Storage size calculation overflowed");
}

TEST(Npy, BoolBytesOtherThanZeroAndOneAreRejected) {
  // Found by fuzz_npy: byte 64 in a bool array became an invalid C++ bool.
  const std::string path = temp_path("bad_bool");
  write_file(path, npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\x40", 2)));
  EXPECT_ERROR(load_npy(path), "bool data holds byte 64 at element 1");
  EXPECT_ERROR(load_npy(path, {.mmap = true}), "bool data holds byte 64 at element 1");
  std::remove(path.c_str());
}
