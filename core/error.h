#pragma once
// Errors. A user's mistake (bad shape, bad config, bad file) throws headlab::Error with a message
// that names the op or key and gives expected and actual. A broken internal invariant throws
// headlab::InternalError through HEADLAB_ASSERT. The library never prints and never exits.

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace headlab {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Throws headlab::Error with a fmt-formatted message.
template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

[[noreturn]] void assertion_failed(const char* condition, const char* file, int line);

}  // namespace headlab

#define HEADLAB_ASSERT(cond) \
  ((cond) ? (void)0 : ::headlab::assertion_failed(#cond, __FILE__, __LINE__))
