// Progressive prefill: saved as it goes, resumed after a stop, equal to an uninterrupted prefill;
// a file holding another context or a corrupt one is not used (prefill starts over).
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/attention/msa_attention.h"
#include "core/model/model_loader.h"
#include "core/prefill/progressive_prefill.h"
#include "core/runtime/session.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/assets.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

namespace {

sl::SessionOptions options() {
    sl::SessionOptions o;
    o.n_ctx = 2048;
    o.n_batch = 64;
    o.n_threads = 2;
    return o;
}

std::vector<int32_t> context_tokens(const sl::LoadedModel& m, int n) {
    std::string text;
    for (int i = 0; static_cast<int>(text.size()) < n * 8; ++i)
        text += "Section " + std::to_string(i) + ". A linear model is fitted with lm(); the summary() of the fit "
                "shows coefficients, residuals and the R-squared of the regression. ";
    std::vector<int32_t> ids = m.tokenizer->encode(text, true, false);
    if (static_cast<int>(ids.size()) < n) throw sl::Error("test text too short");
    ids.resize(static_cast<size_t>(n));
    return ids;
}

bool same_logits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

class TstProgressivePrefill : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void resumesAfterCancel();
    void otherContextStartsOver();
    void corruptFileStartsOver();
    void savedTokensWithoutRestore();
    void seedSharingAPrefix();

private:
    std::unique_ptr<sl::LoadedModel> model_;
    std::vector<int32_t> tokens_;
    std::vector<float> reference_;  // logits after an uninterrupted prefill of tokens_
    QTemporaryDir dir_;
    std::string path(const char* name) const { return (std::filesystem::path(dir_.path().toStdString()) / name).string(); }
};

void TstProgressivePrefill::initTestCase() {
    REQUIRE_ASSET(model_path, sl::assets::kDefaultModel);
    model_ = sl::load_model(model_path);
    tokens_ = context_tokens(*model_, 640);
    sl::Session s(*model_, options());
    sl::ProgressivePrefill p(s, tokens_, path("reference.slkv"), {.save_every = 128});
    p.run();
    const sl::PrefillStatus st = p.status();
    QVERIFY2(st.error.empty(), st.error.c_str());
    QVERIFY(st.finished);
    QCOMPARE(st.done, 640);
    QCOMPARE(st.resumed_from, 0);
    reference_.assign(s.last_logits().begin(), s.last_logits().end());
}

void TstProgressivePrefill::resumesAfterCancel() {
    const std::string file = path("resume.slkv");
    int64_t saved = 0;
    {
        sl::Session s(*model_, options());
        sl::ProgressivePrefill p(s, tokens_, file, {.save_every = 128, .progress_interval = 0});
        p.on_progress = [&p](const sl::PrefillStatus& st) {
            if (st.done >= 256) p.cancel();
        };
        p.start();
        p.wait();
        const sl::PrefillStatus st = p.status();
        QVERIFY2(st.error.empty(), st.error.c_str());
        QVERIFY(st.cancelled);
        QVERIFY(!st.finished);
        QVERIFY(st.saved >= 256 && st.saved < 640);
        QCOMPARE(st.saved % 128, 0);
        saved = st.saved;
    }
    QCOMPARE(static_cast<int64_t>(sl::saved_context_tokens(file).size()), saved);

    // A new session (as after a restart) resumes from the file and ends where an uninterrupted run does.
    sl::Session s(*model_, options());
    sl::ProgressivePrefill p(s, tokens_, file, {.save_every = 128});
    p.run();
    const sl::PrefillStatus st = p.status();
    QVERIFY2(st.error.empty(), st.error.c_str());
    QVERIFY2(st.note.empty(), st.note.c_str());
    QCOMPARE(st.resumed_from, saved);
    QVERIFY(st.finished);
    QVERIFY(same_logits(s.last_logits(), reference_));

    // Resuming a finished file prefills nothing.
    sl::Session s2(*model_, options());
    sl::ProgressivePrefill p2(s2, tokens_, file, {.save_every = 128});
    p2.run();
    QCOMPARE(p2.status().resumed_from, 640);
    QVERIFY(p2.status().finished);
    QVERIFY(same_logits(s2.last_logits(), reference_));
}

void TstProgressivePrefill::otherContextStartsOver() {
    const std::string file = path("other.slkv");
    std::filesystem::copy_file(path("reference.slkv"), file);
    std::vector<int32_t> other = tokens_;
    other[300] = other[300] == 42 ? 43 : 42;  // diverges inside the saved context
    other.resize(512);
    sl::Session s(*model_, options());
    sl::ProgressivePrefill p(s, other, file, {.save_every = 128});
    p.run();
    const sl::PrefillStatus st = p.status();
    QVERIFY2(st.error.empty(), st.error.c_str());
    QCOMPARE(st.resumed_from, 0);
    QVERIFY(st.note.find("another context") != std::string::npos);
    QVERIFY(st.finished);
    QCOMPARE(sl::saved_context_tokens(file), other);
}

void TstProgressivePrefill::corruptFileStartsOver() {
    const std::string file = path("corrupt.slkv");
    std::filesystem::copy_file(path("reference.slkv"), file);
    {   // flip bytes in the middle of a KV page: the headers still parse, the payload hash does not
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        const auto size = static_cast<std::streamoff>(std::filesystem::file_size(file));
        f.seekp(size / 2);
        const char junk[16] = {0x13, 0x37, 0x13, 0x37, 0x13, 0x37, 0x13, 0x37, 0x13, 0x37, 0x13, 0x37, 0x13, 0x37, 0x13, 0x37};
        f.write(junk, sizeof junk);
    }
    // A longer context than the file holds: the restore takes the file (its pages are checked
    // when first read), the next chunk's prefill reads the damaged page, and the prefill starts
    // over from nothing (the file rewritten).
    const std::vector<int32_t> longer = context_tokens(*model_, 700);
    QVERIFY(std::equal(tokens_.begin(), tokens_.end(), longer.begin()));
    sl::Session s(*model_, options());
    sl::ProgressivePrefill p(s, longer, file, {.save_every = 256});
    p.run();
    const sl::PrefillStatus st = p.status();
    QVERIFY2(st.error.empty(), st.error.c_str());
    QCOMPARE(st.resumed_from, 0);
    QVERIFY2(st.note.find("corrupt.slkv") != std::string::npos, st.note.c_str());
    QVERIFY2(st.note.find("page checksum mismatch") != std::string::npos, st.note.c_str());
    qInfo("%s", st.note.c_str());
    QVERIFY(st.finished);
    QCOMPARE(sl::saved_context_tokens(file), longer);  // written anew
}

void TstProgressivePrefill::savedTokensWithoutRestore() {
    QVERIFY(sl::saved_context_tokens(path("missing.slkv")).empty());
    const std::string junk = path("junk.slkv");
    std::ofstream(junk) << "not a saved context";
    QVERIFY(sl::saved_context_tokens(junk).empty());
    QCOMPARE(sl::saved_context_tokens(path("reference.slkv")), tokens_);
}

void TstProgressivePrefill::seedSharingAPrefix() {
    // A new context (a document added: the same first 384 tokens, then others) with no file of its
    // own starts from the seed's shared prefix and ends where a prefill from scratch does; the
    // seed is left as it was. A seed made by another attention, or sharing too little, is not used.
    std::vector<int32_t> other(tokens_.begin(), tokens_.begin() + 384);
    std::string added;
    for (int i = 0; i < 12; ++i)
        added += " Appendix " + std::to_string(i) + ": data frames are read from files with read.table() and written with write.csv().";
    const std::vector<int32_t> tail = model_->tokenizer->encode(added, false, false);
    QVERIFY(tail.size() >= 200);
    other.insert(other.end(), tail.begin(), tail.begin() + 200);
    QVERIFY(other[384] != tokens_[384]);
    std::vector<float> fresh;
    {
        sl::Session s(*model_, options());
        s.prefill(other);
        fresh.assign(s.last_logits().begin(), s.last_logits().end());
    }
    const std::string seed = path("reference.slkv"), file = path("seeded.slkv");
    const auto seed_size = std::filesystem::file_size(seed);
    sl::Session s(*model_, options());
    sl::ProgressivePrefill p(s, other, file, {.save_every = 128, .seeds = {path("missing.slkv"), seed}});
    p.run();
    const sl::PrefillStatus st = p.status();
    QVERIFY2(st.error.empty(), st.error.c_str());
    QCOMPARE(st.resumed_from, 384);
    QCOMPARE(st.seed, seed);
    QVERIFY2(st.note.find("reused the first 384 tokens") != std::string::npos, st.note.c_str());
    QVERIFY(st.finished);
    QCOMPARE(sl::saved_context_tokens(file), other);
    QCOMPARE(sl::saved_context_tokens(seed), tokens_);
    QCOMPARE(std::filesystem::file_size(seed), seed_size);
    const double err = sl::test::normalized_error(s.last_logits().data(), fresh.data(), fresh.size());
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));

    // Too short a shared prefix: from scratch.
    const std::string file2 = path("seeded2.slkv");
    sl::Session s2(*model_, options());
    sl::ProgressivePrefill p2(s2, other, file2, {.save_every = 512, .seeds = {seed}, .min_seed_tokens = 385});
    p2.run();
    QCOMPARE(p2.status().resumed_from, 0);
    QVERIFY(p2.status().seed.empty());

    // A seed saved by another attention (MSA) is not used.
    const std::string msa_seed = path("msa-seed.slkv"), file3 = path("seeded3.slkv");
    {
        sl::Session sm(*model_, options(), std::make_unique<sl::MsaAttention>());
        sm.prefill(tokens_);
        sm.save(msa_seed);
    }
    sl::Session s3(*model_, options());
    sl::ProgressivePrefill p3(s3, other, file3, {.save_every = 512, .seeds = {msa_seed}});
    p3.run();
    QCOMPARE(p3.status().resumed_from, 0);
}

QTEST_GUILESS_MAIN(TstProgressivePrefill)
#include "tst_progressive_prefill.moc"
