#pragma once
// Shape: up to 6 dimensions, stored inline (no heap), row-major semantics.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace headlab {

class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  template <class It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }

  int rank() const { return rank_; }
  int64_t numel() const;
  // Dimension d; negative d counts from the back (-1 is the last). Throws on out of range.
  int64_t operator[](int d) const { return dims_[index(d)]; }
  int64_t& operator[](int d) { return dims_[index(d)]; }
  int64_t back() const { return (*this)[-1]; }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }

  void push_back(int64_t d);
  // The shape without its last dimension (rows of a [.., C] tensor viewed as a matrix).
  int64_t rows() const { return rank_ == 0 ? 1 : numel() / back(); }

  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string str() const;  // "[2, 3, 4]"

 private:
  int index(int d) const;
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

}  // namespace headlab
