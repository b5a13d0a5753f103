// What the chat pane shows and the report exports: a question, the streamed answer, and its
// citations resolved to places in documents. Plain data, free of widgets; copyable.
#pragma once

#include <string>
#include <vector>

#include "core/document/document.h"

namespace sl::desktop {

struct Citation {
    int number = 0;            // the [n] marker in Answer::text (1-based)
    doc::SourceRef ref;        // document id, unit, bbox (pages, slides) or time (video)
    std::string path;          // the document's file, for the viewer
    std::string locator;       // "R-intro.pdf p. 66", "vtest.avi 00:00:30"
    std::string excerpt;       // the cited text (first few hundred bytes)
    double score = 0;          // relevance (BM25 or attention mass); higher is better
    bool weak = false;         // verification found little support in the answer
    std::string weak_reason;   // why, when weak: "shares 1 of 14 content words with the answer"
};

struct Answer {
    std::string question;
    std::string text;                 // with inline [n] markers
    std::vector<Citation> citations;  // ordered by number
    std::string method;               // how the sources were chosen (shown under the answer)
    std::string model;                // model file name
    int context_tokens = 0;           // tokens prefilled for this answer
    // What the answer read when that is not the whole context (the library's prefill so far plus a
    // preselection of the rest): shown under the answer as "Read: ...". Empty otherwise.
    std::string read_summary;
    bool finished = false;
    std::string error;                // non-empty when answering failed
};

// The citation with marker `number`, or nullptr.
inline const Citation* find_citation(const Answer& a, int number) {
    for (const auto& c : a.citations)
        if (c.number == number) return &c;
    return nullptr;
}

}  // namespace sl::desktop
