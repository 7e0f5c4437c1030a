#pragma once
// The synthetic dependency task's sentences written as CoNLL-U (`headlab export-conllu`), so
// that the conllu task can be checked against a treebank whose gold partners are known: read
// back with task.features = ["form"], task.label = "head_upos" and task.relations = ["PREV",
// "HEAD"], sentence k of the file has the dependency task's PREV and HEAD partners, and its
// labels are the dependency task's (relations = ["HEAD"]) colour of the head, but at the root
// (the VERB, whose head is BOS): ROOT there, colour 0 in the dependency task.
//
// Sentence k is sentence k of batch 0 of the dependency stream `seed` (K colours). Each word:
//   ID    its position (1..16)          FORM   "<CATEGORY>:<colour>" (the task's token string)
//   LEMMA the category                  UPOS   the colour as the colour-th UD tag (ADJ, ADP, ...)
//   HEAD  the HEAD partner (0: BOS)     DEPREL the category, lower case ("det_s")
// and XPOS, FEATS, DEPS, MISC "_".

#include <cstdint>
#include <string>

namespace headlab {

// Throws headlab::Error when colours is outside [2, 17] (UPOS has 17 tags) or sentences < 1.
std::string dependency_conllu(int64_t colours, uint64_t seed, int64_t sentences);

}  // namespace headlab
