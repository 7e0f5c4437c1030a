#include "train/analysis/induction.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "train/tasks/task.h"

namespace headlab {

using nlohmann::json;

LmHeadAccumulator::LmHeadAccumulator(int layers, int heads) {
  sums_.layers = layers;
  sums_.heads = heads;
  const auto n = static_cast<size_t>(layers) * heads;
  sums_.previous_token.assign(n, 0.0);
  sums_.duplicate_token.assign(n, 0.0);
  sums_.induction.assign(n, 0.0);
}

void LmHeadAccumulator::add(const std::vector<Tensor>& weights, std::span<const int32_t> tokens,
                            std::span<const int32_t> labels, int64_t B, int64_t T) {
  const int L = sums_.layers, H = sums_.heads;
  if (static_cast<int>(weights.size()) != L)
    fail("lm head scores: {} layers of weights but expected {}", weights.size(), L);
  for (const Tensor& w : weights)
    check_shape("lm head scores", "weights", w.shape(), Shape{B, H, T, T});
  if (static_cast<int64_t>(tokens.size()) != B * T || static_cast<int64_t>(labels.size()) != B * T)
    fail("lm head scores: {} tokens and {} labels for {} x {} positions", tokens.size(),
         labels.size(), B, T);
  std::vector<int64_t> earlier;  // positions j < t with token t's id
  for (int64_t b = 0; b < B; ++b) {
    const int32_t* tok = tokens.data() + b * T;
    for (int64_t t = 0; t < T; ++t) {
      if (labels[static_cast<size_t>(b * T + t)] == kIgnoreIndex) continue;
      earlier.clear();
      for (int64_t j = 0; j < t; ++j)
        if (tok[j] == tok[t]) earlier.push_back(j);
      if (t >= 1) ++sums_.previous_queries;
      if (!earlier.empty()) ++sums_.duplicate_queries;
      for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
          const float* row = weights[static_cast<size_t>(l)].data() + ((b * H + h) * T + t) * T;
          const size_t k = static_cast<size_t>(l) * H + h;
          if (t >= 1) sums_.previous_token[k] += row[t - 1];
          for (const int64_t j : earlier) {
            sums_.duplicate_token[k] += row[j];
            sums_.induction[k] += row[j + 1];
          }
        }
    }
  }
}

LmHeadScores LmHeadAccumulator::finish() const {
  LmHeadScores s = sums_;
  const auto divide = [](std::vector<double>& v, int64_t n) {
    for (double& x : v) x = n > 0 ? x / static_cast<double>(n) : 0.0;
  };
  divide(s.previous_token, s.previous_queries);
  divide(s.duplicate_token, s.duplicate_queries);
  divide(s.induction, s.duplicate_queries);
  return s;
}

PositionLossAccumulator::PositionLossAccumulator(int64_t length)
    : sum_(static_cast<size_t>(length), 0.0), count_(static_cast<size_t>(length), 0) {}

void PositionLossAccumulator::add(const Tensor& logits, std::span<const int32_t> labels) {
  const auto T = static_cast<int64_t>(sum_.size());
  if (logits.rank() != 3 || logits.size(1) != T ||
      logits.size(0) * T != static_cast<int64_t>(labels.size()))
    fail("loss by position: logits {} and {} labels for length {}", logits.shape().str(),
         labels.size(), T);
  const int64_t C = logits.size(2), rows = logits.size(0) * T;
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t label = labels[static_cast<size_t>(i)];
    if (label == kIgnoreIndex) continue;
    const float* x = logits.data() + i * C;
    const double top = *std::max_element(x, x + C);
    double z = 0;
    for (int64_t c = 0; c < C; ++c) z += std::exp(static_cast<double>(x[c]) - top);
    sum_[static_cast<size_t>(i % T)] += top + std::log(z) - x[label];
    ++count_[static_cast<size_t>(i % T)];
  }
}

std::vector<double> PositionLossAccumulator::mean() const {
  std::vector<double> out(sum_.size(), 0.0);
  for (size_t t = 0; t < out.size(); ++t)
    if (count_[t] > 0) out[t] = sum_[t] / static_cast<double>(count_[t]);
  return out;
}

InContextScore in_context_score(std::span<const double> loss, int64_t length) {
  if (length < 3) fail("in-context score: length is {} but expected >= 3", length);
  if (static_cast<int64_t>(loss.size()) != length)
    fail("in-context score: {} losses for length {}", loss.size(), length);
  const int64_t n = length - 1;  // positions with a next token
  const int64_t q = std::max<int64_t>(1, n / 4);
  const auto mean = [&](int64_t begin, int64_t end) {
    double sum = 0;
    for (int64_t t = begin; t < end; ++t) sum += loss[static_cast<size_t>(t)];
    return sum / static_cast<double>(end - begin);
  };
  InContextScore s;
  s.early_begin = 0;
  s.early_end = q;
  s.late_begin = n - q;
  s.late_end = n;
  s.early_loss = mean(s.early_begin, s.early_end);
  s.late_loss = mean(s.late_begin, s.late_end);
  s.score = s.late_loss - s.early_loss;
  return s;
}

namespace {

using Matrix = std::vector<double>;  // row-major D x D

// rows [r0, r0 + d) of `w` [*, D] as a d x D block: w[r0 + a][j].
double block(const Tensor& w, int64_t r0, int64_t a, int64_t j) {
  return w[(r0 + a) * w.size(1) + j];
}

double frobenius(const Matrix& m) {
  double s = 0;
  for (double x : m) s += x * x;
  return std::sqrt(s);
}

// W_QK^{h} = (W_Q^h)^T W_K^h: [i][j] = sum_a Q[a][i] K[a][j].
Matrix w_qk(const MultiHeadAttention& m, int h) {
  const Tensor& w = m.in_proj_weight.value();
  const int64_t D = w.size(1), d = m.head_dim(), inner = m.heads() * d;
  Matrix out(static_cast<size_t>(D * D), 0.0);
  for (int64_t a = 0; a < d; ++a)
    for (int64_t i = 0; i < D; ++i) {
      const double q = block(w, h * d, a, i);
      for (int64_t j = 0; j < D; ++j) out[i * D + j] += q * block(w, inner + h * d, a, j);
    }
  return out;
}

// W_OV^{h} = W_O^h W_V^h: [i][j] = sum_a O[i][h d + a] V[a][j].
Matrix w_ov(const MultiHeadAttention& m, int h) {
  const Tensor& w = m.in_proj_weight.value();
  const Tensor& o = m.w_o->weight.value();  // [D, H d]
  const int64_t D = w.size(1), d = m.head_dim(), inner = m.heads() * d;
  Matrix out(static_cast<size_t>(D * D), 0.0);
  for (int64_t i = 0; i < D; ++i)
    for (int64_t a = 0; a < d; ++a) {
      const double x = o[i * inner + h * d + a];
      for (int64_t j = 0; j < D; ++j) out[i * D + j] += x * block(w, 2 * inner + h * d, a, j);
    }
  return out;
}

}  // namespace

std::vector<std::vector<double>> k_composition(const MultiHeadAttention& lower,
                                               const MultiHeadAttention& upper) {
  const int64_t D = lower.in_proj_weight.value().size(1);
  if (upper.in_proj_weight.value().size(1) != D)
    fail("k_composition: the layers' widths differ ({} and {})", D,
         upper.in_proj_weight.value().size(1));
  std::vector<Matrix> ov;
  for (int h = 0; h < lower.heads(); ++h) ov.push_back(w_ov(lower, h));
  std::vector<std::vector<double>> out;
  for (int u = 0; u < upper.heads(); ++u) {
    const Matrix qk = w_qk(upper, u);
    const double qk_norm = frobenius(qk);
    std::vector<double> row;
    for (const Matrix& m : ov) {
      Matrix p(static_cast<size_t>(D * D), 0.0);
      for (int64_t i = 0; i < D; ++i)
        for (int64_t k = 0; k < D; ++k) {
          const double x = qk[i * D + k];
          for (int64_t j = 0; j < D; ++j) p[i * D + j] += x * m[k * D + j];
        }
      const double denominator = qk_norm * frobenius(m);
      row.push_back(denominator > 0 ? frobenius(p) / denominator : 0.0);
    }
    out.push_back(std::move(row));
  }
  return out;
}

InductionMeasure measure_induction(Encoder& model, const Task& task, const EvalStream& stream,
                                   int64_t batches) {
  if (!task.next_token()) fail("induction scores: task '{}' is not a next-token task", task.name());
  struct ModeRestorer {
    Encoder& model;
    bool training;
    ~ModeRestorer() { model.train(training); }
  } restore{model, model.is_training()};
  NoGradGuard no_grad;
  model.eval();
  const int L = static_cast<int>(model.num_layers()), H = static_cast<int>(model.options().heads);
  LmHeadAccumulator heads(L, H);
  PositionLossAccumulator loss(task.seq_len());
  Batch batch;
  std::vector<std::span<const int32_t>> features;
  std::vector<Tensor> weights;
  const int64_t n = batches > 0 ? std::min(batches, stream.batches) : stream.batches;
  for (int64_t i = 0; i < n; ++i) {
    stream.batch(task, i, batch);
    batch.feature_spans(features);
    const EncoderOutput out =
        model.forward(features, batch.batch_size, batch.seq_len, nullptr, true);
    weights.clear();
    for (const Var& w : out.weights) weights.push_back(w.value());
    heads.add(weights, batch.features[0], batch.labels, batch.batch_size, batch.seq_len);
    loss.add(out.logits.value(), batch.labels);
  }
  InductionMeasure m;
  m.heads = heads.finish();
  m.loss_by_position = loss.mean();
  m.in_context = in_context_score(m.loss_by_position, task.seq_len());
  if (L >= 2) m.k_composition = k_composition(model.attention(0), model.attention(1));
  for (int h = 0; h < H; ++h) {
    const double p = m.heads.at(m.heads.previous_token, 0, h);
    if (m.previous_head < 0 || p > m.previous_score)
      m.previous_layer = 0, m.previous_head = h, m.previous_score = p;
  }
  for (int l = 1; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const double s = m.heads.at(m.heads.induction, l, h);
      if (m.induction_head < 0 || s > m.induction_score)
        m.induction_layer = l, m.induction_head = h, m.induction_score = s;
    }
  return m;
}

namespace {

json per_layer(const LmHeadScores& s, const std::vector<double>& v) {
  json layers = json::array();
  for (int l = 0; l < s.layers; ++l) {
    json row = json::array();
    for (int h = 0; h < s.heads; ++h) row.push_back(s.at(v, l, h));
    layers.push_back(std::move(row));
  }
  return layers;
}

json head_ref(int l, int h) {
  return h < 0 ? json(nullptr) : json::array({l, h});
}

}  // namespace

json induction_timeline_json(const InductionMeasure& m) {
  const InContextScore& c = m.in_context;
  return {{"previous_token", per_layer(m.heads, m.heads.previous_token)},
          {"duplicate_token", per_layer(m.heads, m.heads.duplicate_token)},
          {"induction", per_layer(m.heads, m.heads.induction)},
          {"previous_token_head", head_ref(m.previous_layer, m.previous_head)},
          {"previous_token_score", m.previous_score},
          {"induction_head", head_ref(m.induction_layer, m.induction_head)},
          {"induction_score", m.induction_score},
          {"in_context_score", c.score},
          {"in_context",
           {{"early_positions", {c.early_begin, c.early_end - 1}},
            {"late_positions", {c.late_begin, c.late_end - 1}},
            {"early_loss", c.early_loss},
            {"late_loss", c.late_loss}}},
          {"k_composition", m.k_composition}};
}

json induction_json(const InductionMeasure& m) {
  json j = induction_timeline_json(m);
  j["loss_by_position"] = m.loss_by_position;
  j["queries"] = {{"previous_token", m.heads.previous_queries},
                  {"duplicate_token", m.heads.duplicate_queries}};
  return j;
}

}  // namespace headlab
