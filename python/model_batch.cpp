// headlab.Model's batches: NumPy <-> headlab::Batch, and encode (python/model.h), which reads a
// task's sentences through the inverse of the task's own token_string, so that a sentence is
// written as attention_tokens.json and the report write it ("BOS SUBJ:2 VERB:0 ...").

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "python/model.h"

namespace py = pybind11;

namespace headlab::python {
namespace {

using IdArray = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

// Every combination of feature ids is enumerated when there are at most this many (the
// built-in tasks: 68 for the dependency task, forms x tags for conllu's); beyond it only the
// tokens of the evaluation sentences are known.
constexpr int64_t kMaxEnumerated = int64_t{1} << 20;

IdArray rows_of(const std::vector<int32_t>& flat, int64_t B, int64_t T) {
  IdArray a({B, T});
  std::copy(flat.begin(), flat.end(), a.mutable_data());
  return a;
}

// An integer array, checked: [B, T] with T the task's, every id in [0, vocab).
IdArray checked_ids(const py::handle& value, const std::string& what, const Task& task,
                    int64_t vocab) {
  const py::array any = py::array::ensure(value);
  if (!any || (any.dtype().kind() != 'i' && any.dtype().kind() != 'u'))
    fail("{}: expected an integer array of ids, got {}", what,
         std::string(py::str(py::type::of(value))));
  IdArray ids = IdArray::ensure(any);
  if (ids.ndim() != 2 || ids.shape(1) != task.seq_len() || ids.shape(0) < 1)
    fail(
        "{}: expected ids of shape [B, {}] (B >= 1; task '{}' has sequences of {} tokens), got "
        "{} dimensions{}",
        what, task.seq_len(), task.name(), task.seq_len(), ids.ndim(),
        ids.ndim() == 2 ? fmt::format(" [{}, {}]", ids.shape(0), ids.shape(1)) : "");
  const int32_t* p = ids.data();
  for (py::ssize_t i = 0; i < ids.size(); ++i)
    if (p[i] < 0 || p[i] >= vocab)
      fail("{}: id {} at [{}, {}] is outside [0, {})", what, p[i], i / ids.shape(1),
           i % ids.shape(1), vocab);
  return ids;
}

void fill_features(const Task& task, const std::vector<IdArray>& ids, Batch& out) {
  const int64_t B = ids[0].shape(0), T = task.seq_len();
  out.resize(B, T, task.features().size(), task.relations().size());
  for (size_t f = 0; f < ids.size(); ++f) {
    if (ids[f].shape(0) != B)
      fail("batch: feature '{}' has {} sentences, feature '{}' {}", task.features()[f].name,
           ids[f].shape(0), task.features()[0].name, B);
    std::copy(ids[f].data(), ids[f].data() + B * T, out.features[f].begin());
  }
  std::fill(out.labels.begin(), out.labels.end(), kIgnoreIndex);
  for (auto& p : out.partners) std::fill(p.begin(), p.end(), kNoPartner);
}

// The inverse of task.token_string: first the tokens of the evaluation sentences (the task's own
// BOS and padding, where several id combinations read alike), then every other combination.
void build_token_ids(LoadedModel& model) {
  const Task& task = model.run->task();
  const TrainConfig& t = model.run->config().train;
  const size_t F = task.features().size();
  Batch b;
  eval_stream(task, 1, std::min<int64_t>(t.eval_batch_size, 64), static_cast<uint64_t>(t.eval_seed))
      .batch(task, 0, b);
  for (int64_t i = 0; i < b.tokens(); ++i) {
    std::vector<int32_t> ids(F);
    for (size_t f = 0; f < F; ++f) ids[f] = b.features[f][static_cast<size_t>(i)];
    model.token_ids.emplace(task.token_string(b.features, i), std::move(ids));
  }
  int64_t combinations = 1;
  for (const FeatureSpec& f : task.features()) {
    combinations *= std::max<int64_t>(f.vocab, 1);
    if (combinations > kMaxEnumerated) break;
  }
  if (combinations <= kMaxEnumerated) {
    std::vector<std::vector<int32_t>> all(F,
                                          std::vector<int32_t>(static_cast<size_t>(combinations)));
    for (int64_t i = 0; i < combinations; ++i) {
      int64_t rest = i;
      for (size_t f = F; f-- > 0;) {  // the last feature fastest
        const int64_t v = task.features()[f].vocab;
        all[f][static_cast<size_t>(i)] = static_cast<int32_t>(rest % v);
        rest /= v;
      }
    }
    for (int64_t i = 0; i < combinations; ++i) {
      const std::string s = task.token_string(all, i);
      if (model.token_ids.count(s)) continue;
      std::vector<int32_t> ids(F);
      for (size_t f = 0; f < F; ++f) ids[f] = all[f][static_cast<size_t>(i)];
      model.token_ids.emplace(s, std::move(ids));
    }
  }
  model.token_ids_built = true;
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> sentence_tokens(const py::handle& s, size_t k) {
  if (py::isinstance<py::str>(s)) return split_words(s.cast<std::string>());
  if (py::isinstance<py::list>(s) || py::isinstance<py::tuple>(s)) {
    std::vector<std::string> out;
    for (const py::handle& w : s) {
      if (!py::isinstance<py::str>(w))
        fail("encode: sentence {} holds a {}, not a token string", k,
             std::string(py::str(py::type::of(w))));
      out.push_back(w.cast<std::string>());
    }
    return out;
  }
  fail("encode: sentence {} is a {}: expected a str or a list of token strings", k,
       std::string(py::str(py::type::of(s))));
}

Batch encode_sentences(LoadedModel& model, const std::vector<py::handle>& sentences) {
  if (!model.token_ids_built) build_token_ids(model);
  const Task& task = model.run->task();
  const int64_t B = static_cast<int64_t>(sentences.size()), T = task.seq_len();
  Batch first;  // how the task writes position 0 of its sentences
  eval_stream(task, 1, 1, 0).batch(task, 0, first);
  const std::string bos = task.token_string(first.features, 0);
  Batch out;
  out.resize(B, T, task.features().size(), task.relations().size());
  std::fill(out.labels.begin(), out.labels.end(), kIgnoreIndex);
  for (auto& p : out.partners) std::fill(p.begin(), p.end(), kNoPartner);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<std::string> words = sentence_tokens(sentences[static_cast<size_t>(b)], b);
    if (words.empty() || words[0] != bos) words.insert(words.begin(), bos);
    if (static_cast<int64_t>(words.size()) != T)
      fail(
          "encode: sentence {} has {} tokens with {} but task '{}' reads sequences of {} (a "
          "task that pads writes its padding as a token too)",
          b, words.size(), bos, task.name(), T);
    for (int64_t t = 0; t < T; ++t) {
      const auto it = model.token_ids.find(words[static_cast<size_t>(t)]);
      if (it == model.token_ids.end()) {
        std::string known;
        int n = 0;
        for (const auto& entry : model.token_ids)
          if (n++ < 5) known += (known.empty() ? "'" : ", '") + entry.first + "'";
        fail(
            "encode: sentence {} token {} '{}' is not a token of task '{}' (tokens read as {}, "
            "...)",
            b, t, words[static_cast<size_t>(t)], task.name(), known);
      }
      for (size_t f = 0; f < it->second.size(); ++f)
        out.features[f][static_cast<size_t>(b * T + t)] = it->second[f];
    }
  }
  return out;
}

Batch encode_ids(const Task& task, const py::object& input) {
  const std::vector<FeatureSpec>& features = task.features();
  std::vector<IdArray> ids;
  if (py::isinstance<py::dict>(input)) {
    const py::dict d = input.cast<py::dict>();
    for (const auto& [key, value] : d) {
      const std::string name = py::str(key);
      if (std::none_of(features.begin(), features.end(),
                       [&](const FeatureSpec& f) { return f.name == name; }))
        fail("encode: task '{}' has no feature '{}'", task.name(), name);
    }
    for (const FeatureSpec& f : features) {
      if (!d.contains(f.name))
        fail("encode: feature '{}' of task '{}' is missing", f.name, task.name());
      ids.push_back(checked_ids(d[f.name.c_str()], "feature '" + f.name + "'", task, f.vocab));
    }
  } else {
    const py::array a = py::array::ensure(input);
    if (a && a.ndim() == 3) {
      if (a.shape(0) != static_cast<py::ssize_t>(features.size()))
        fail("encode: ids of shape [F, B, T] need F = {} (task '{}'), got {}", features.size(),
             task.name(), a.shape(0));
      for (size_t f = 0; f < features.size(); ++f)
        ids.push_back(checked_ids(a[py::int_(f)], "ids of feature '" + features[f].name + "'", task,
                                  features[f].vocab));
    } else {
      if (features.size() != 1)
        fail("encode: task '{}' has {} features: give ids as [F, B, T] or {{feature: [B, T]}}",
             task.name(), features.size());
      ids.push_back(checked_ids(input, "ids", task, features[0].vocab));
    }
  }
  Batch out;
  fill_features(task, ids, out);
  return out;
}

bool is_sentences(const py::object& input) {
  if (py::isinstance<py::str>(input)) return true;
  if (!py::isinstance<py::list>(input) && !py::isinstance<py::tuple>(input)) return false;
  if (py::len(input) == 0) fail("encode: no sentences");
  const py::handle first = input[py::int_(0)];
  if (py::isinstance<py::str>(first)) return true;
  if ((py::isinstance<py::list>(first) || py::isinstance<py::tuple>(first)) && py::len(first) > 0)
    return py::isinstance<py::str>(first[py::int_(0)]);
  return false;
}

}  // namespace

py::dict batch_to_dict(const Task& task, const Batch& batch) {
  const int64_t B = batch.batch_size, T = batch.seq_len;
  py::dict features, partners;
  for (size_t f = 0; f < batch.features.size(); ++f)
    features[task.features()[f].name.c_str()] = rows_of(batch.features[f], B, T);
  for (size_t r = 0; r < batch.partners.size(); ++r)
    partners[task.relations()[r].c_str()] = rows_of(batch.partners[r], B, T);
  py::list tokens;
  for (int64_t b = 0; b < B; ++b) {
    py::list row;
    for (int64_t t = 0; t < T; ++t) row.append(task.token_string(batch.features, b * T + t));
    tokens.append(row);
  }
  py::dict out;
  out["features"] = features;
  out["labels"] = rows_of(batch.labels, B, T);
  out["partners"] = partners;
  out["tokens"] = tokens;
  return out;
}

Batch dict_to_batch(const Task& task, const py::dict& batch) {
  if (!batch.contains("features"))
    fail("batch: a dict without \"features\" (model.encode(...) or model.eval_batch(i) make one)");
  Batch out = encode_ids(task, batch["features"]);
  const int64_t B = out.batch_size, T = out.seq_len;
  const auto take = [&](const py::handle& value, const std::string& what,
                        std::vector<int32_t>& into) {
    const IdArray a = IdArray::ensure(value);
    if (!a || a.ndim() != 2 || a.shape(0) != B || a.shape(1) != T)
      fail("batch: {} must be an int array [{}, {}] like the features", what, B, T);
    std::copy(a.data(), a.data() + B * T, into.begin());
  };
  if (batch.contains("labels") && !batch["labels"].is_none())
    take(batch["labels"], "\"labels\"", out.labels);
  if (batch.contains("partners") && !batch["partners"].is_none()) {
    const py::dict partners = batch["partners"].cast<py::dict>();
    for (size_t r = 0; r < task.relations().size(); ++r)
      if (partners.contains(task.relations()[r]))
        take(partners[task.relations()[r].c_str()], "partners '" + task.relations()[r] + "'",
             out.partners[r]);
  }
  return out;
}

py::dict encode(LoadedModel& model, const py::object& input) {
  const Task& task = model.run->task();
  if (!is_sentences(input)) return batch_to_dict(task, encode_ids(task, input));
  std::vector<py::handle> sentences;
  if (py::isinstance<py::str>(input))
    sentences.push_back(input);
  else  // a list of sentences, each a str or a list of token strings
    for (const py::handle& s : input) sentences.push_back(s);
  py::dict out = batch_to_dict(task, encode_sentences(model, sentences));
  out.attr("pop")("labels");  // unknown for a sentence of one's own
  out.attr("pop")("partners");
  return out;
}

Batch to_batch(LoadedModel& model, const py::object& input) {
  if (py::isinstance<py::dict>(input) && input.cast<py::dict>().contains("features"))
    return dict_to_batch(model.run->task(), input.cast<py::dict>());
  return dict_to_batch(model.run->task(), encode(model, input));
}

}  // namespace headlab::python
