#pragma once
// InplaceFunction: a move-only callable stored inline in a fixed buffer. Tape entries
// hold their backward closures in one, so recording an op never touches the heap. A closure
// that does not fit is a compile error (capture less: backward needs little).

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace headlab {

template <class Signature, size_t Capacity>
class InplaceFunction;

template <class R, class... Args, size_t Capacity>
class InplaceFunction<R(Args...), Capacity> {
 public:
  InplaceFunction() = default;

  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, InplaceFunction>>>
  InplaceFunction(F&& f) {  // NOLINT: implicit like std::function
    using Fn = std::decay_t<F>;
    static_assert(sizeof(Fn) <= Capacity, "backward closure too large: capture less");
    static_assert(alignof(Fn) <= alignof(std::max_align_t));
    new (buffer_) Fn(std::forward<F>(f));
    ops_ = &kOps<Fn>;
  }

  InplaceFunction(InplaceFunction&& other) noexcept { take(std::move(other)); }
  InplaceFunction& operator=(InplaceFunction&& other) noexcept {
    if (this != &other) {
      reset();
      take(std::move(other));
    }
    return *this;
  }
  InplaceFunction(const InplaceFunction&) = delete;
  InplaceFunction& operator=(const InplaceFunction&) = delete;
  ~InplaceFunction() { reset(); }

  R operator()(Args... args) { return ops_->call(buffer_, std::forward<Args>(args)...); }
  explicit operator bool() const { return ops_ != nullptr; }

  void reset() {
    if (ops_) ops_->destroy(buffer_);
    ops_ = nullptr;
  }

 private:
  struct Ops {
    R (*call)(void*, Args...);
    void (*destroy)(void*);
    void (*move)(void* dst, void* src);
  };
  template <class Fn>
  static constexpr Ops kOps = {
      [](void* p, Args... args) -> R {
        return (*static_cast<Fn*>(p))(std::forward<Args>(args)...);
      },
      [](void* p) { static_cast<Fn*>(p)->~Fn(); },
      [](void* dst, void* src) { new (dst) Fn(std::move(*static_cast<Fn*>(src))); },
  };

  void take(InplaceFunction&& other) {
    if (other.ops_) {
      other.ops_->move(buffer_, other.buffer_);
      ops_ = other.ops_;
      other.reset();
    }
  }

  alignas(std::max_align_t) unsigned char buffer_[Capacity];
  const Ops* ops_ = nullptr;
};

}  // namespace headlab
