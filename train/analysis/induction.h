#pragma once
// Language-model head scores, for a next-token task (Task::next_token; the induction task,
// train/tasks/induction.h): the attention-pattern detectors of TransformerLens, the in-context
// learning score of Olsson et al. (2022) and the K-composition score of Elhage et al. (2021).
//
// Detectors, per layer l and head h, from the attention weights A [B, H, T, T] and the token ids
// (feature 0) of the evaluation sequences; each is a mean over the queries that have a target,
// so 1 is a head that always attends there and 0 one that never does (TransformerLens averages
// over every query, which caps a score at the share of queries with a target):
//   previous_token  = mean over t >= 1 of A[t, t - 1]
//   duplicate_token = mean over t whose token occurred before of sum_{j < t, tok_j = tok_t} A[t, j]
//   induction       = mean over those t of sum_{j < t, tok_j = tok_t} A[t, j + 1]
// Only queries with a label count (the last position has none).
//
// In-context score: loss(t) is the mean cross-entropy of predicting token t + 1 at position t
// over the evaluation sequences, for t in [0, N), N = T - 1. Olsson et al. take the loss at the
// 500th token minus that at the 50th of 512; at 512 tokens one position is an average over many
// contexts, but at N = 31 one position is mostly noise and, with the copies at random places, a
// single late position is predictable by copying in only a few sequences. So the score averages
// windows, a quarter of the predictions each: q = max(1, floor(N / 4)),
// early = [0, q), late = [N - q, N), score = mean loss(late) - mean loss(early). Negative when
// the model predicts better late in the sequence, i.e. it uses its context (T = 32: positions
// 0-6 and 24-30).
//
// K-composition of head h of layer 0 into head h' of layer 1, from the weights alone:
//   W_OV^{0,h}  = W_O^h W_V^h                  [D, D]   (the residual written by head h)
//   W_QK^{1,h'} = (W_Q^{h'})^T W_K^{h'}         [D, D]   (the bilinear form of h')
//   K(h, h')    = ||W_QK^{1,h'} W_OV^{0,h}||_F / (||W_QK^{1,h'}||_F ||W_OV^{0,h}||_F)
// with W_Q^h, W_K^h, W_V^h [d, D] the head's row blocks of in_proj_weight and W_O^h [D, d] its
// column block of w_o.weight (layers/multi_head_attention.h). Biases and the LayerNorm between
// the layers are left out, as in Elhage et al.; K is in [0, 1], and large when what head h
// writes is what h' reads with its keys.

#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"

namespace headlab {

class Encoder;
class MultiHeadAttention;
class Task;
struct EvalStream;

struct LmHeadScores {
  int layers = 0, heads = 0;
  // [L * H], layer-major (index l * H + h).
  std::vector<double> previous_token, duplicate_token, induction;
  int64_t previous_queries = 0, duplicate_queries = 0;  // the means' denominators

  double at(const std::vector<double>& score, int l, int h) const {
    return score[static_cast<size_t>(l) * heads + h];
  }
};

// Sums the detectors' numerators and denominators over batches.
class LmHeadAccumulator {
 public:
  LmHeadAccumulator(int layers, int heads);
  // weights[l]: layer l's [B, H, T, T]; tokens and labels [B * T] (a query counts when its label
  // is not kIgnoreIndex). Throws headlab::Error when the shapes disagree.
  void add(const std::vector<Tensor>& weights, std::span<const int32_t> tokens,
           std::span<const int32_t> labels, int64_t batch, int64_t length);
  LmHeadScores finish() const;

 private:
  LmHeadScores sums_;
};

// loss(t) per position over batches.
class PositionLossAccumulator {
 public:
  explicit PositionLossAccumulator(int64_t length);
  // logits [B, T, C], labels [B * T]; positions labelled kIgnoreIndex are skipped.
  void add(const Tensor& logits, std::span<const int32_t> labels);
  // [T]: the mean loss at each position; 0 where no position was counted.
  std::vector<double> mean() const;

 private:
  std::vector<double> sum_;
  std::vector<int64_t> count_;
};

struct InContextScore {
  // The windows [early_begin, early_end) and [late_begin, late_end) of positions.
  int64_t early_begin = 0, early_end = 0, late_begin = 0, late_end = 0;
  double early_loss = 0, late_loss = 0;  // the windows' mean losses
  double score = 0;                      // late_loss - early_loss
};
// From loss(t) of a sequence of `length` positions (length - 1 predictions); throws when
// length < 3 or the losses are not [length].
InContextScore in_context_score(std::span<const double> loss_by_position, int64_t length);

// K(h, h') for every head h of `lower` and h' of `upper`: [H_upper][H_lower]. Throws when the
// layers' widths differ.
std::vector<std::vector<double>> k_composition(const MultiHeadAttention& lower,
                                               const MultiHeadAttention& upper);

struct InductionMeasure {
  LmHeadScores heads;
  std::vector<double> loss_by_position;  // [T]
  InContextScore in_context;
  std::vector<std::vector<double>> k_composition;  // layer 1 x layer 0; empty with one layer
  // The strongest heads: layer 0's previous-token head, the best induction head of the layers
  // above 0 ({-1, -1} with one layer: {0, h} would be an induction head with no head below it),
  // each with its score.
  int previous_layer = -1, previous_head = -1, induction_layer = -1, induction_head = -1;
  double previous_score = 0, induction_score = 0;
};

// The detectors and the loss by position over the first `batches` batches of `stream` (at
// most its number), through the model in eval mode without gradients (its mode is restored),
// and K-composition from its weights. Throws headlab::Error when the task is not next-token.
InductionMeasure measure_induction(Encoder& model, const Task& task, const EvalStream& stream,
                                   int64_t batches);

// heads.json's "induction" object: per layer and head the three scores, the strongest heads, the
// in-context score, the loss by position and the K-composition matrix.
nlohmann::json induction_json(const InductionMeasure& m);
// timeline.jsonl's "induction" object: the same less the loss by position.
nlohmann::json induction_timeline_json(const InductionMeasure& m);

}  // namespace headlab
