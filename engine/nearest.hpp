// The "did you mean" of every front end (the easel program's flags and subcommands, the public
// API's setting names, the Python module): one rule, so that they all suggest the same word.
#pragma once

#include <string>
#include <vector>

namespace easel {

// The candidate nearest `word` by edit distance (insertions, deletions, substitutions and swaps
// of neighbours, ignoring case) when it is near enough to be a typo of it: at most 1 edit for
// words up to 4 characters, 2 up to 8, else 3; "" when none is (or `word` is one of them).
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace easel
