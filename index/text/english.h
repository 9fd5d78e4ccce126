// index/text/english.h -- the optional English word processing of the
// tokenizer: a light suffix stemmer and a short stop-word list.
//
// Both are part of the file format when enabled (tokenizer options "stem=1",
// "stop=1" are recorded in the file): change them only under a new name.
#pragma once

#include <string>
#include <string_view>

namespace agentmem::index {

// Stems an English word with exactly step 1 of M. F. Porter's 1980 algorithm
// (written here from the published description), and nothing else:
//
//   step 1a  sses -> ss, ies -> i, ss -> ss, s -> (removed)
//   step 1b  eed -> ee when the measure m of the stem is > 0;
//            otherwise ed / ing are removed when the stem contains a vowel,
//            and then: at -> ate, bl -> ble, iz -> ize; a double consonant
//            other than l, s, z loses one letter; a stem with m = 1 ending
//            consonant-vowel-consonant (last not w, x, y) gains an e
//   step 1c  y -> i when the stem contains a vowel
//
// (m counts the vowel-consonant sequences of the stem; y is a vowel when it
// follows a consonant.) So "cats" -> "cat", "ponies" -> "poni", "agreed" ->
// "agree", "hopping" -> "hop", "baking" -> "bake", "happy" -> "happi". Plural
// and tense forms meet on one stem; derivational suffixes (-ness, -ation,
// -ful) are left alone.
//
// Only words of 3 to 64 letters, all in [a-z], are stemmed; any other token
// (digits, non-ASCII letters, short or very long words) is returned unchanged.
std::string StemEnglish(std::string_view word);

// True when `word` (lower case) is in the built-in stop list: the 33 English
// function words a an and are as at be but by for if in into is it no not of
// on or such that the their then there these they this to was will with.
bool IsEnglishStopWord(std::string_view word);

// Stems an English word with the Snowball English stemmer (M. F. Porter's
// "Porter2", libstemmer of the Snowball project), which also removes
// derivational suffixes: "running" -> "run", "generously" -> "generous",
// "adoption" -> "adopt". Words of 1 to 64 bytes, all in [a-z], are stemmed;
// any other token is returned unchanged. Safe from many threads at once.
std::string StemSnowballEnglish(std::string_view word);

// True when `word` (lower case) is one of the English function words that a
// query drops (tokenizer option "qstop=1"): the pronouns, auxiliaries,
// determiners, prepositions, conjunctions and question words of the built-in
// query stop list (english.cc: 142 words, with the contraction endings
// s t d ll m re ve). A superset of IsEnglishStopWord()'s list.
bool IsEnglishQueryStopWord(std::string_view word);

}  // namespace agentmem::index
