// One question in the chat: the core's answer (sl::Answer: the text, its sentences with the
// citations that support each, the citations resolved to places in documents, why generation
// stopped) plus the few things the chat shows around it. Plain data, free of widgets; copyable.
// The chat pane, the answer formats and the report export read it; AskService (ask_service.h)
// makes it.
#pragma once

#include <cstdint>
#include <string>

#include "core/answer/answer.h"

namespace sl::desktop {

struct ChatAnswer {
    // answer.question is the question; answer.text grows while the answer streams (no markers,
    // no sentences yet) and is the final, possibly cut, text once finished.
    Answer answer;
    std::string model;           // the model's file name
    std::string method;          // how the context was built and the citations chosen
    std::string read_summary;    // AskResult::read_summary: what the answer read ("Read: ...")
    std::string plan;            // AskResult::plan: the context's plan per document (plan_dialog.h)
    int64_t context_tokens = 0;  // tokens of the context the answer was written from
    std::string device;          // where it ran and why (AskResult::device); empty: a remote engine
    std::string status;          // the latest progress line while it runs; cleared when finished
    bool finished = false;
    std::string error;  // non-empty when answering failed
};

// The index in a.citations of the citation with marker `number`, or -1.
inline int citation_index(const Answer& a, int number) {
    for (size_t i = 0; i < a.citations.size(); ++i)
        if (a.citations[i].number == number) return static_cast<int>(i);
    return -1;
}

}  // namespace sl::desktop
