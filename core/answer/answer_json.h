// An Answer (text, sentences, citations, verification, ranking signals) as JSON text and back:
// the format the library's chats table keeps in ChatRecord::citations, read again by reports and
// by the evaluation (tests/eval/). Free of Qt (core/util/json_writer.h, core/embed/json.h).
//
// Reentrant. answer_from_json throws sl::FormatError naming `what` when the text is not an
// answer object. Fields added after version 1 (stop_reason, cut, a citation's lexical / semantic
// / score) are optional when reading, so chats stored before them still load.
#pragma once

#include <string>

#include "core/answer/answer.h"

namespace sl {

std::string answer_to_json(const Answer& a);
Answer answer_from_json(const std::string& json, const std::string& what = "answer");

}  // namespace sl
