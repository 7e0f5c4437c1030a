#include "core/shape.h"

#include "core/error.h"

namespace headlab {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) push_back(d);
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

void Shape::push_back(int64_t d) {
  if (rank_ == kMaxRank) fail("shape: more than {} dimensions", kMaxRank);
  if (d < 0) fail("shape: negative dimension {}", d);
  dims_[rank_++] = d;
}

int Shape::index(int d) const {
  int i = d < 0 ? d + rank_ : d;
  if (i < 0 || i >= rank_) fail("shape: dimension {} out of range for {}", d, str());
  return i;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != other.dims_[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(dims_[i]);
  }
  s += ']';
  return s;
}

}  // namespace headlab
