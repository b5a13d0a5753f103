// An Answer (text, sentences, citations, verification) as JSON text and back: the format the
// library's chats table keeps in ChatRecord::citations, read again by reports.
//
// Reentrant. answer_from_json throws sl::FormatError naming `what` when the text is not an
// answer object.
#pragma once

#include <string>

#include "core/answer/answer.h"

namespace sl::app {

std::string answer_to_json(const Answer& a);
Answer answer_from_json(const std::string& json, const std::string& what = "answer");

}  // namespace sl::app
