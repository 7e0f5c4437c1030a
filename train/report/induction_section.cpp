// The phase change of a next-token run (timeline.jsonl's "induction" rows,
// train/analysis/induction.h), drawn in the run report's timeline section: the loss, the
// in-context score and the induction head's score against steps, the step where the head forms
// and the step of the in-context jump, each at the midpoint of its change (midpoint_step,
// sections.h), the head only where its final score exceeds 0.5.

#include <fmt/format.h>

#include "core/error.h"
#include "train/report/parts.h"
#include "train/report/sections.h"

namespace headlab::report_parts {

double midpoint_step(std::span<const double> steps, std::span<const double> values) {
  if (steps.size() != values.size())
    fail("midpoint step: {} steps but {} values", steps.size(), values.size());
  if (values.empty() || values.front() == values.back()) return -1;
  const double mid = (values.front() + values.back()) / 2;
  const bool rising = values.back() > values.front();
  for (size_t i = 0; i < values.size(); ++i)
    if (rising ? values[i] >= mid : values[i] <= mid) return steps[i];
  return -1;  // unreachable: the last value is past the midpoint
}

std::string induction_phase_change(const std::vector<nlohmann::json>& timeline) {
  std::vector<double> step, loss, in_context, induction, previous;
  bool has_head = false;
  for (const nlohmann::json& row : timeline) {
    if (!row.is_object() || !row.contains("induction") || !row["induction"].is_object()) continue;
    const nlohmann::json& i = row["induction"];
    step.push_back(num(row, "step", 0.0));
    loss.push_back(num(row, "loss", 0.0));
    in_context.push_back(num(i, "in_context_score", 0.0));
    induction.push_back(num(i, "induction_score", 0.0));
    previous.push_back(num(i, "previous_token_score", 0.0));
    has_head = i.contains("induction_head") && !i["induction_head"].is_null();
  }
  if (step.empty()) return "";
  const double forms = has_head && induction.back() > 0.5 ? midpoint_step(step, induction) : -1;
  const double jump = midpoint_step(step, in_context);
  std::vector<svg::Series> left = {series("eval loss", "#1f2430", step, loss, false, true),
                                   series("in-context score", "#b4511f", step, in_context, true)};
  std::vector<svg::Series> right = {
      series("induction head's score", "#2f5d9e", step, induction, false, true),
      series("layer-0 previous-token head's score", "#6b7280", step, previous, true)};
  svg::LineChartOptions lo = chart("Loss and in-context score", "step", "nats");
  svg::LineChartOptions ro = chart("The heads' attention scores", "step", "score");
  ro.y_min = 0.0;
  ro.y_max = 1.0;
  ro.reference_y = 0.5;
  const std::string formed =
      forms < 0 ? "No head above layer 0 ends with an induction score above 0.5: no induction "
                  "head formed in this run."
                : fmt::format(
                      "The induction head forms at step {} (the first evaluation where the best "
                      "induction score above layer 0 is half of the way from its first value to "
                      "its last).",
                      forms);
  const std::string jumped =
      jump < 0
          ? ""
          : fmt::format(" The in-context score jumps at step {} (likewise its midpoint).", jump);
  return "<h3>Phase change</h3><p>" + formed + jumped +
         " In-context score: the mean loss over the last quarter of the positions minus that "
         "over the first quarter (after Olsson et al. 2022); negative when the model uses its "
         "context.</p><div class=\"row\">" +
         figure(svg::line_chart(left, lo), "Eval loss and in-context score at every evaluation.") +
         figure(svg::line_chart(right, ro),
                "Induction score: attention on the token after the previous occurrence of the "
                "current token; dotted line: the formation threshold 0.5.") +
         "</div>";
}

}  // namespace headlab::report_parts
