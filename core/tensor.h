#pragma once
// Tensor: fp32, contiguous row-major, up to 6 dims, storage shared between views (64-byte
// aligned from the pool; a wrap()ped buffer as its owner aligned it). Copying a Tensor copies
// the handle, not the data (use clone() for a deep copy).

#include <cstdint>
#include <span>
#include <vector>

#include "core/shape.h"
#include "core/storage.h"

namespace headlab {

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  // Uninitialised contents.
  static Tensor empty(const Shape& shape);
  static Tensor zeros(const Shape& shape);
  static Tensor full(const Shape& shape, float value);
  // Throws if values.size() != shape.numel().
  static Tensor from(const Shape& shape, std::span<const float> values);
  static Tensor from(const Shape& shape, std::initializer_list<float> values) {
    return from(shape, std::span<const float>(values.begin(), values.size()));
  }
  // A tensor over shape.numel() floats at `data` that it does not own (contiguous row-major):
  // release(context) runs once when the last Tensor viewing it goes (core/storage.h).
  static Tensor wrap(const Shape& shape, float* data, void (*release)(void* context),
                     void* context);

  bool defined() const { return static_cast<bool>(storage_); }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t numel() const { return shape_.numel(); }
  int64_t size(int d) const { return shape_[d]; }

  float* data() { return storage_.get()->data + offset_; }
  const float* data() const { return storage_.get()->data + offset_; }
  std::span<float> span() { return {data(), static_cast<size_t>(numel())}; }
  std::span<const float> span() const { return {data(), static_cast<size_t>(numel())}; }
  float& operator[](int64_t i) { return data()[i]; }
  float operator[](int64_t i) const { return data()[i]; }

  // A view with another shape of the same numel. Throws naming `op` on mismatch.
  Tensor view(const Shape& shape, const char* op = "view") const;
  // A view of rows [begin, end) along dim 0.
  Tensor slice(int64_t begin, int64_t end) const;
  Tensor clone() const;

  void fill_(float value);
  void zero_() { fill_(0.0f); }
  // Copies src's values; shapes must have the same numel.
  void copy_(const Tensor& src);
  // The single value of a one-element tensor.
  float item() const;
  std::vector<float> to_vector() const;
  bool shares_storage(const Tensor& other) const { return storage_.get() == other.storage_.get(); }

 private:
  StorageRef storage_;
  int64_t offset_ = 0;
  Shape shape_;
};

// Throws "op: <what> shape is [..] but expected [..]" when shapes differ.
void check_shape(const char* op, const char* what, const Shape& actual, const Shape& expected);

}  // namespace headlab
