#pragma once
// Run-report sections drawn from the analysis over training and across heads, one file each,
// each a <section id=..> built from the run's documents only (timeline.jsonl, heads.json,
// attention.npy, attention_tokens.json); render_run_report (run_report.cpp) lists them.
// Internal to train/report.

#include <string>

#include "train/report/report.h"

namespace headlab::report_parts {

// "timeline": s_match and each head's mass on its final relation against steps, the step each
// relation is first claimed (its assigned head's mass > 0.5) and the order of the claims, from
// timeline.jsonl. A note when the run has no timeline.
std::string timeline_section(const RunFiles& files);

// "pruning": accuracy and component accuracy against heads pruned (heads.json "pruning"), each
// pruned head marked with the relation it carried, and whether the specialized heads were the
// last to go. A note when heads.json has no pruning curve.
std::string pruning_section(const RunFiles& files);

// "composition": for each head of layer >= 1 the lower head it composes with (heads.json
// "composition"), and the strongest two-step path drawn on the first example sentence. "" for a
// one-layer model.
std::string composition_section(const RunFiles& files);

}  // namespace headlab::report_parts
