#include "autograd/profile.h"

namespace headlab {

namespace detail {
std::atomic<OpObserver*> g_op_observer{nullptr};
}  // namespace detail

void set_op_observer(OpObserver* observer) {
  detail::g_op_observer.store(observer, std::memory_order_relaxed);
}

}  // namespace headlab
