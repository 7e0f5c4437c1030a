#include "core/error.h"

namespace headlab {

void assertion_failed(const char* condition, const char* file, int line) {
  throw InternalError(fmt::format("internal error: {} failed at {}:{}", condition, file, line));
}

}  // namespace headlab
