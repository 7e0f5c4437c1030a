#pragma once
// The mirror task ([task] name = "mirror"): a small second task with two relations of its own.
// A sentence is BOS then n digits uniform in [0, K) (T = n + 1). Word t (1..n) has two partners:
//   prev(t)   = t - 1, the first word's being the last (n): a cyclic left neighbour
//   mirror(t) = n + 1 - t, the word as far from the end as t is from the start
// and its label is digit(prev(t)) * K + digit(mirror(t)), one of K^2 classes; BOS has none.
// One input feature "token": the digit, or K for BOS. Both relations are positional, so one
// head per relation can solve it: with 2 heads, each specializes on one (heads.json, report).
// Options: task.length (n, 2..64, default 8) and task.digits (K, 2..16, default 4).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <headlab/train/tasks/registry.h>
#include <headlab/train/tasks/task.h>

namespace example {

class MirrorTask final : public headlab::Task {
 public:
  MirrorTask(int64_t length, int64_t digits);

  std::string name() const override { return "mirror"; }
  int64_t seq_len() const override { return length_ + 1; }
  int64_t num_classes() const override { return digits_ * digits_; }
  const std::vector<headlab::FeatureSpec>& features() const override { return features_; }
  const std::vector<std::string>& relations() const override { return relations_; }
  void generate(uint64_t seed, int64_t index, int64_t batch_size,
                headlab::Batch& out) const override;
  // prev is the label's high digit, mirror its low one.
  bool relation_correct(int32_t predicted, int32_t gold, int relation) const override;
  // "BOS" or the digit.
  std::string token_string(const std::vector<std::vector<int32_t>>& features,
                           int64_t index) const override;

 private:
  int64_t length_, digits_;
  std::vector<headlab::FeatureSpec> features_;
  std::vector<std::string> relations_ = {"prev", "mirror"};
};

std::unique_ptr<headlab::Task> make_mirror_task(headlab::TaskOptions& options);

}  // namespace example
