#pragma once
// An error message on one line, as the CLI prints it after "headlab: error: " and headlab.Error
// (Python) carries it.

#include <string>

namespace headlab {

// Control characters become spaces or \xNN, and a message longer than 1000 characters keeps its
// head and its tail (the expected values) around a note of what was cut. Messages quote what
// the user gave, so a hostile input must not garble the terminal or flood it.
std::string one_line_message(const std::string& message);

}  // namespace headlab
