// Two-operand einsum as composed ops: the letters of one operand only that the output drops are
// summed first; then a is permuted to [batch.., kept_a.., contracted..] and b to [batch..,
// contracted.., kept_b..], each flattened to 3-D, multiplied by batched_matmul, unflattened and
// permuted to the output's order. The gradient comes from those ops' backwards.

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "core/error.h"

namespace headlab {
namespace {

constexpr const char* kOp = "einsum";

bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool has(std::string_view s, char c) {
  return s.find(c) != std::string_view::npos;
}

struct Equation {
  std::string text;  // as given, for the messages
  std::string in[2];
  std::string out;

  template <class... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> what, Args&&... args) const {
    fail("{}: equation '{}': {}", kOp, text, fmt::format(what, std::forward<Args>(args)...));
  }
};

// A term's letters: a-z and A-Z, each once.
void check_term(const Equation& e, const std::string& term, const char* where) {
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == '.') e.bad("{} has an ellipsis ('...'), which is not supported", where);
    if (!is_letter(c)) e.bad("{} has '{}' (expected letters a-z, A-Z)", where, c);
    if (term.find(c, i + 1) != std::string::npos)
      e.bad(
          "letter '{}' repeats in {} '{}' (each letter once per term; diagonals are not "
          "supported)",
          c, where, term);
  }
}

Equation parse(std::string_view text) {
  Equation e{std::string(text), {}, {}};
  std::string compact;
  for (char c : text)
    if (c != ' ') compact += c;
  const size_t arrow = compact.find("->");
  const std::string lhs = compact.substr(0, arrow);
  if (arrow != std::string::npos && compact.find("->", arrow + 2) != std::string::npos)
    e.bad("'->' appears twice");
  const size_t comma = lhs.find(',');
  if (comma == std::string::npos || lhs.find(',', comma + 1) != std::string::npos)
    e.bad("expected two operands separated by one ',' (this einsum takes two)");
  e.in[0] = lhs.substr(0, comma);
  e.in[1] = lhs.substr(comma + 1);
  check_term(e, e.in[0], "operand 0");
  check_term(e, e.in[1], "operand 1");
  if (arrow != std::string::npos) {
    e.out = compact.substr(arrow + 2);
    check_term(e, e.out, "the output");
    for (char c : e.out)
      if (!has(e.in[0], c) && !has(e.in[1], c))
        e.bad("output letter '{}' is in neither operand", c);
  } else {  // NumPy's implicit output: the letters seen once, sorted
    for (char c = 'A'; c <= 'z'; ++c)
      if (is_letter(c) && has(e.in[0], c) != has(e.in[1], c)) e.out += c;
  }
  return e;
}

// The dims of `term`'s letters in `order` (each letter of order must be in term).
std::vector<int> dims_of(std::string_view term, std::string_view order) {
  std::vector<int> dims;
  for (char c : order) dims.push_back(static_cast<int>(term.find(c)));
  return dims;
}

Var permuted(const Var& x, std::string_view term, std::string_view order) {
  const std::vector<int> dims = dims_of(term, order);
  bool identity = true;
  for (size_t i = 0; i < dims.size(); ++i) identity = identity && dims[i] == static_cast<int>(i);
  return identity ? x : permute(x, dims);
}

// x with the dims of its letters that are neither in `other` nor in `out` summed away.
Var sum_private(Var x, std::string& term, std::string_view other, std::string_view out) {
  for (int d = static_cast<int>(term.size()) - 1; d >= 0; --d)
    if (!has(other, term[d]) && !has(out, term[d])) {
      x = sum(x, d);
      term.erase(static_cast<size_t>(d), 1);
    }
  return x;
}

}  // namespace

Var einsum(std::string_view equation, const Var& a, const Var& b) {
  detail::check_defined(kOp, a);
  detail::check_defined(kOp, b);
  Equation e = parse(equation);
  const Var* operand[2] = {&a, &b};
  std::array<int64_t, 128> size{};  // by letter
  size.fill(-1);
  for (int k = 0; k < 2; ++k) {
    const Shape& s = operand[k]->shape();
    if (static_cast<int>(e.in[k].size()) != s.rank())
      e.bad("operand {} '{}' has {} letters but its shape {} has {} dims", k, e.in[k],
            e.in[k].size(), s.str(), s.rank());
    for (int d = 0; d < s.rank(); ++d) {
      int64_t& n = size[static_cast<size_t>(e.in[k][static_cast<size_t>(d)])];
      if (n >= 0 && n != s[d])
        e.bad("letter '{}' is {} in operand 0 (shape {}) but {} in operand 1 (shape {})",
              e.in[k][static_cast<size_t>(d)], n, a.shape().str(), s[d], b.shape().str());
      n = s[d];
    }
  }
  std::string ta = e.in[0], tb = e.in[1];
  const Var xa = sum_private(a, ta, tb, e.out);
  const Var xb = sum_private(b, tb, ta, e.out);
  std::string batch, kept_a, kept_b, contracted;
  for (char c : e.out) (has(ta, c) && has(tb, c) ? batch : has(ta, c) ? kept_a : kept_b) += c;
  for (char c : ta)
    if (has(tb, c) && !has(e.out, c)) contracted += c;
  auto extent = [&](std::string_view letters) {
    int64_t n = 1;
    for (char c : letters) n *= size[static_cast<size_t>(c)];
    return n;
  };
  const int64_t nb = extent(batch), m = extent(kept_a), n = extent(kept_b), k = extent(contracted);
  const Var ma = reshape(permuted(xa, ta, batch + kept_a + contracted), Shape{nb, m, k});
  const Var mb = reshape(permuted(xb, tb, batch + contracted + kept_b), Shape{nb, k, n});
  const Var product = batched_matmul(ma, mb);  // [nb, m, n]
  const std::string order = batch + kept_a + kept_b;
  if (order.empty()) return reshape(product, Shape{1});
  std::array<int64_t, Shape::kMaxRank> dims{};
  for (size_t i = 0; i < order.size(); ++i) dims[i] = size[static_cast<size_t>(order[i])];
  const Var grouped = reshape(product, Shape(dims.begin(), dims.begin() + order.size()));
  return permuted(grouped, order, e.out);
}

}  // namespace headlab
