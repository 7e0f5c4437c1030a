#pragma once
// NumPy .npy files (format version 1.0) for float32 arrays, written and read without numpy:
// magic "\x93NUMPY", version 1.0, a little-endian uint16 header length, an ASCII dict
// "{'descr': '<f4', 'fortran_order': False, 'shape': (..), }" padded with spaces and a newline
// so the data starts on a 64-byte boundary, then the raw little-endian fp32 values, C order.
// numpy.load and bertviz-style tools read it directly.

#include <cstdint>
#include <string>
#include <vector>

namespace headlab {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // product(shape) values, C order
};

// Writes `array` to `path`, atomically (a temporary file renamed over it). Throws headlab::Error
// if data.size() differs from the product of the shape or the file cannot be written.
void write_npy(const std::string& path, const NpyArray& array);

// Reads a .npy v1.0/v2.0 file holding '<f4' data in C order. Throws headlab::Error naming the
// file for anything else (bad magic, other dtype, Fortran order, a malformed or overflowing
// shape, data shorter or longer than the shape).
NpyArray read_npy(const std::string& path);

// XXH3-64 (train/io/checksum.h) of an array's shape ("d0,d1,...;") and its values' bytes: what
// heads.json records of attention.npy (train/analysis/analysis.h).
std::string npy_digest(const NpyArray& array);

}  // namespace headlab
