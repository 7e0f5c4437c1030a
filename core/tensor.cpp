#include "core/tensor.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace headlab {

Tensor Tensor::empty(const Shape& shape) {
  Tensor t;
  t.storage_ = StorageRef(storage_acquire(static_cast<size_t>(shape.numel())));
  t.shape_ = shape;
  return t;
}

Tensor Tensor::zeros(const Shape& shape) {
  return full(shape, 0.0f);
}

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  t.fill_(value);
  return t;
}

Tensor Tensor::from(const Shape& shape, std::span<const float> values) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    fail("tensor: {} values given for shape {} (numel {})", values.size(), shape.str(),
         shape.numel());
  Tensor t = empty(shape);
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

Tensor Tensor::wrap(const Shape& shape, float* data, void (*release)(void* context),
                    void* context) {
  Tensor t;
  t.storage_ = StorageRef(storage_wrap(data, static_cast<size_t>(shape.numel()), release, context));
  t.shape_ = shape;
  return t;
}

Tensor Tensor::view(const Shape& shape, const char* op) const {
  if (shape.numel() != numel())
    fail("{}: cannot view {} as {} (numel {} vs {})", op, shape_.str(), shape.str(), numel(),
         shape.numel());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  if (rank() == 0 || begin < 0 || end < begin || end > shape_[0])
    fail("slice: rows [{}, {}) out of range for {}", begin, end, shape_.str());
  Tensor t = *this;
  const int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  t.offset_ += begin * row;
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_);
  if (numel() > 0) std::memcpy(t.data(), data(), sizeof(float) * numel());
  return t;
}

void Tensor::fill_(float value) {
  std::fill_n(data(), numel(), value);
}

void Tensor::copy_(const Tensor& src) {
  if (src.numel() != numel())
    fail("copy: source {} and destination {} differ in numel", src.shape().str(), shape_.str());
  if (numel() > 0) std::memmove(data(), src.data(), sizeof(float) * numel());
}

float Tensor::item() const {
  if (numel() != 1)
    fail("item: tensor of shape {} has {} elements, expected 1", shape_.str(), numel());
  return data()[0];
}

std::vector<float> Tensor::to_vector() const {
  return {data(), data() + numel()};
}

void check_shape(const char* op, const char* what, const Shape& actual, const Shape& expected) {
  if (actual != expected)
    fail("{}: {} shape is {} but expected {}", op, what, actual.str(), expected.str());
}

}  // namespace headlab
