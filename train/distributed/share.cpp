#include "train/distributed/share.h"

#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace headlab {

// The header is one line per tensor, "name rank d0 d1 ...", then every value back to back.
void broadcast_state_dict(Comm& comm, int root, StateDict& dict) {
  std::string header;
  int64_t floats = 0;
  if (comm.rank() == root) {
    for (const NamedTensor& t : dict) {
      HEADLAB_ASSERT(t.name.find_first_of(" \n") == std::string::npos);
      header += fmt::format("{} {}", t.name, t.tensor.rank());
      for (int64_t d : t.tensor.shape()) header += fmt::format(" {}", d);
      header += '\n';
      floats += t.tensor.numel();
    }
  }
  header = broadcast_string(comm, root, std::move(header));
  comm.broadcast(root, std::as_writable_bytes(std::span(&floats, 1)));
  std::vector<float> values(static_cast<size_t>(floats));
  if (comm.rank() == root) {
    float* at = values.data();
    for (const NamedTensor& t : dict)
      at = std::copy(t.tensor.data(), t.tensor.data() + t.tensor.numel(), at);
  }
  comm.broadcast(root, bytes_of(std::span(values)));
  if (comm.rank() == root) return;
  dict.clear();
  std::istringstream lines(header);
  std::string name;
  int64_t rank = 0, at = 0;
  while (lines >> name >> rank) {
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    for (int64_t& d : dims) lines >> d;
    const Shape shape(dims.begin(), dims.end());
    const int64_t n = shape.numel();
    dict.push_back({name, Tensor::from(shape, std::span<const float>(values.data() + at, n))});
    at += n;
  }
}

}  // namespace headlab
