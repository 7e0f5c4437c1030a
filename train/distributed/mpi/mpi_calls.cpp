#include "train/distributed/mpi/mpi_calls.h"

#include <time.h>

#include <fmt/format.h>

namespace headlab::mpi {

std::timed_mutex& lock() {
  static std::timed_mutex the_lock;
  return the_lock;
}

void nap() {
  const timespec pause{0, 1'000'000};  // 1 ms
  nanosleep(&pause, nullptr);
}

std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("error {}", code);
  return std::string(text, static_cast<size_t>(length));
}

}  // namespace headlab::mpi
