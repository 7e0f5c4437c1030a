#include "autograd/var.h"

#include <atomic>
#include <mutex>
#include <vector>

#include "autograd/node.h"
#include "autograd/tape.h"
#include "core/error.h"

namespace headlab {
namespace detail {

namespace {

// Nodes are recycled like storage buffers, so recording an op never reaches the heap once warm.
struct NodePool {
  std::mutex mutex;
  std::vector<Node*> free;
};

NodePool& node_pool() {
  static NodePool* pool = new NodePool();
  return *pool;
}

}  // namespace

Node* node_acquire() {
  NodePool& pool = node_pool();
  Node* n = nullptr;
  {
    std::lock_guard lock(pool.mutex);
    if (!pool.free.empty()) {
      n = pool.free.back();
      pool.free.pop_back();
    }
  }
  if (n == nullptr) n = new Node;
  n->refs.store(1, std::memory_order_relaxed);
  return n;
}

void node_release(Node* n) {
  if (n->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  n->value = Tensor();
  n->grad = Tensor();
  n->requires_grad = false;
  n->tape = nullptr;
  n->generation = 0;
  NodePool& pool = node_pool();
  std::lock_guard lock(pool.mutex);
  pool.free.push_back(n);
}

}  // namespace detail

Var::Var(Tensor value, bool requires_grad) : node_(detail::node_acquire()) {
  node_->value = std::move(value);
  node_->requires_grad = requires_grad;
}

Var::Var(const Var& other) : node_(other.node_) {
  if (node_) node_->refs.fetch_add(1, std::memory_order_relaxed);
}
Var::Var(Var&& other) noexcept : node_(std::exchange(other.node_, nullptr)) {}
Var& Var::operator=(Var other) noexcept {
  std::swap(node_, other.node_);
  return *this;
}
Var::~Var() {
  if (node_) detail::node_release(node_);
}

Tensor& Var::value() const {
  HEADLAB_ASSERT(node_ != nullptr);
  return node_->value;
}
Tensor& Var::grad() const {
  HEADLAB_ASSERT(node_ != nullptr);
  return node_->grad;
}
bool Var::has_grad() const {
  return node_ && node_->grad.defined();
}
bool Var::requires_grad() const {
  return node_ && node_->requires_grad;
}
bool Var::is_leaf() const {
  return node_ && node_->tape == nullptr;
}
Tape* Var::tape() const {
  return node_ ? node_->tape : nullptr;
}
uint64_t Var::generation() const {
  return node_ ? node_->generation : 0;
}

void Var::set_requires_grad(bool requires_grad) const {
  if (!is_leaf()) fail("set_requires_grad: only leaves (data, parameters) can change it");
  node_->requires_grad = requires_grad;
}

void Var::zero_grad() const {
  if (has_grad()) node_->grad.zero_();
}
void Var::clear_grad() const {
  if (node_) node_->grad = Tensor();
}
Var Var::detach() const {
  return Var(value(), false);
}

void Var::backward() const {
  if (!node_) fail("backward: called on an undefined value");
  if (!node_->tape)
    fail(
        "backward: the value was not recorded on a tape (computed under NoGradGuard, or no input "
        "requires a gradient)");
  node_->tape->backward(*this, nullptr);
}

void Var::backward(const Tensor& seed) const {
  if (!node_) fail("backward: called on an undefined value");
  if (!node_->tape)
    fail(
        "backward: the value was not recorded on a tape (computed under NoGradGuard, or no input "
        "requires a gradient)");
  node_->tape->backward(*this, &seed);
}

}  // namespace headlab
