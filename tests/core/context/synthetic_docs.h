// Test fixtures shared by the context and answer suites: a byte-level tokenizer (one token per
// byte, so token counts are byte counts and decoding is exact) with ChatML control tokens, and
// small hand-made documents of each kind (PDF pages with boxed blocks, a deck, a video).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/document/document.h"
#include "core/tokenizer/bpe_gpt2.h"
#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/tokenizer.h"

namespace sl::test {

inline std::unique_ptr<Tokenizer> byte_tokenizer() {
    TokenizerData d;
    d.name = "bytes";
    d.model = "gpt2";
    d.pre = "gpt2";
    for (int b = 0; b < 256; ++b) d.tokens.push_back(bpe::bytes_to_vocab_text(std::string(1, char(b))));
    d.token_types.assign(256, int32_t(TokenType::Normal));
    for (const char* s : {"<|im_start|>", "<|im_end|>"}) {
        d.tokens.push_back(s);
        d.token_types.push_back(int32_t(TokenType::Control));
    }
    d.eos_id = 257;
    d.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}...{% endfor %}";
    return Tokenizer::create(std::move(d));
}

inline ChatTemplate chatml() { return ChatTemplate("<|im_start|>"); }

inline doc::Block text_block(std::string text, float y0) {
    doc::Block b;
    b.text = std::move(text);
    b.bbox = doc::BBox{0.1f, y0, 0.9f, y0 + 0.05f};
    return b;
}

// Report.pdf: 3 pages; page i (label "i+1") holds two blocks about a different topic each.
inline doc::Document report_pdf() {
    doc::Document d;
    d.id = "sha-report";
    d.path = "/data/Report.pdf";
    d.kind = doc::DocumentKind::Pdf;
    const char* topics[3][2] = {
        {"Linear models are fitted with the function lm.", "The summary function prints the coefficients."},
        {"Graphics are drawn with plot, lines and points.", "A legend explains the symbols of a plot."},
        {"Packages are installed with install.packages.", "The library function loads an installed package."}};
    for (int p = 0; p < 3; ++p) {
        doc::Unit u;
        u.kind = doc::UnitKind::Page;
        u.index = p;
        u.label = std::to_string(p + 1);
        u.blocks.push_back(text_block(topics[p][0], 0.1f));
        u.blocks.push_back(text_block(topics[p][1], 0.5f));
        d.units.push_back(std::move(u));
    }
    return d;
}

// Deck.pptx: 2 slides with a title and a body.
inline doc::Document deck_pptx() {
    doc::Document d;
    d.id = "sha-deck";
    d.path = "/data/Deck.pptx";
    d.kind = doc::DocumentKind::Slides;
    for (int s = 0; s < 2; ++s) {
        doc::Unit u;
        u.kind = doc::UnitKind::Slide;
        u.index = s;
        auto t = text_block(s == 0 ? "Quarterly results" : "Next steps", 0.05f);
        t.role = doc::BlockRole::Title;
        u.blocks.push_back(t);
        u.blocks.push_back(text_block(s == 0 ? "Revenue grew by twelve percent." : "Hire two engineers.", 0.3f));
        d.units.push_back(std::move(u));
    }
    return d;
}

// Lecture.mp4: two 30 s segments starting at 00:41:00 with a transcript block and `frames` frames
// each (evenly spaced, with tiny encoded thumbnails).
inline doc::Document lecture_mp4(int frames = 4) {
    doc::Document d;
    d.id = "sha-lecture";
    d.path = "/data/Lecture.mp4";
    d.kind = doc::DocumentKind::Video;
    d.duration = 2520;
    for (int s = 0; s < 2; ++s) {
        doc::Unit u;
        u.kind = doc::UnitKind::Segment;
        u.index = s;
        const double t0 = 2460 + 30.0 * s;
        u.time = doc::TimeRange{t0, t0 + 30};
        doc::Block b;
        b.role = doc::BlockRole::Transcript;
        b.text = s == 0 ? "Today we talk about entropy and heat." : "The second law says entropy never decreases.";
        b.time = doc::TimeRange{t0 + 2, t0 + 9};
        u.blocks.push_back(b);
        for (int f = 0; f < frames; ++f) {
            doc::Visual v;
            v.kind = doc::VisualKind::Frame;
            v.timestamp = t0 + 30.0 * f / frames;
            v.locator = "frame:t=" + std::to_string(*v.timestamp);
            u.visuals.push_back(v);
        }
        d.units.push_back(std::move(u));
    }
    return d;
}

}  // namespace sl::test
