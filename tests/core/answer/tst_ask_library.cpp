// The ask flow end to end on a real library (app/common/ask.h): three pages of R-intro.pdf stored
// in a fresh Library, a question asked with SmolLM2 + MSA; the first ask prefills and saves the
// context, the second (another question) restores it and prefills nothing but its question turn
// (measured: AskResult::prefilled_tokens == 0, restored == true). Both chats are stored with their
// citations; the stored answer JSON reads back equal; reports in every format name the cited pages.
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/answer/answer_json.h"
#include "core/ask/ask.h"
#include "app/common/citation_thumbnails.h"
#include "app/common/report.h"
#include "app/common/report_pdf.h"
#include "core/kvcache/kv_file.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/util/mapped_file.h"
#include "core/util/assets.h"
#include "ingest/reader.h"
#include "tests/common/test_support.h"

class TstAskLibrary : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void askTwiceSecondRestores();
    void questionContextsShareAPrefix();
};

void TstAskLibrary::askTwiceSecondRestores() {
    REQUIRE_ASSET(model_path, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf_path, "samples/pdf/R-intro.pdf");
    const auto model = sl::load_model(model_path);
    QTemporaryDir dir;
    sl::Library lib = sl::Library::open(dir.path().toStdString());

    sl::ingest::IngestOptions io;
    io.ocr = false;
    io.thumbnail_px = 0;
    sl::ingest::IngestContext ictx(io);
    sl::doc::Document d = sl::ingest::read_document(pdf_path.string(), ictx);
    const std::vector<sl::doc::Unit> all = d.units;
    d.units = {all[27], all[39], all[54]};  // three pages of different chapters (PDF pages 28, 40, 55)
    sl::Library::FileInfo fi;
    fi.path = pdf_path.string();
    lib.store_document(d, fi);

    sl::AskOptions o;
    o.effort = sl::Effort::Low;
    o.question = "Which function reads a data frame from the file houses.data?";
    const auto r1 = sl::ask(lib, *model, o);
    qInfo("plan:\n%s", r1.plan.c_str());
    qInfo("1: %s\n%s\nkv: %s", r1.answer.with_markers().c_str(), r1.answer.sources_text().c_str(), r1.kv_note.c_str());
    QVERIFY(!r1.restored);
    QCOMPARE(r1.prefilled_tokens, r1.context_tokens);
    QVERIFY(r1.context_tokens > 1000);

    o.question = "What does the scan() function return?";
    const auto r2 = sl::ask(lib, *model, o);
    qInfo("2: %s\n%s\nkv: %s", r2.answer.with_markers().c_str(), r2.answer.sources_text().c_str(), r2.kv_note.c_str());
    QVERIFY2(r2.restored, r2.kv_note.c_str());
    QCOMPARE(r2.prefilled_tokens, int64_t{0});
    QCOMPARE(r2.context_tokens, r1.context_tokens);
    qInfo("prefill: first ask %.2f s (%lld tokens), second ask %.2f s (restored)", r1.prefill_seconds,
          static_cast<long long>(r1.prefilled_tokens), r2.prefill_seconds);

    // A byte of the saved context's last page flipped: the restore takes it (pages are checked
    // when first read), the question's prefill reads that page (its own block), and the ask
    // removes the file and answers again from the documents: the same answer, a note saying so.
    int damaged = 0;
    for (const auto& e : std::filesystem::directory_iterator(lib.kv_dir())) {
        if (e.path().extension() != ".slkv") continue;
        const std::string p = e.path().string();
        size_t at = 0;
        {
            const sl::MappedFile map(p);
            at = sl::parse_kv_file(map.bytes(), p, sl::KvVerify::Headers).page_offset.back() + 5;
        }
        std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(at));
        char c = 0;
        f.read(&c, 1);
        c = static_cast<char>(c ^ 0x20);
        f.seekp(static_cast<std::streamoff>(at));
        f.write(&c, 1);
        ++damaged;
    }
    QVERIFY(damaged > 0);
    std::vector<std::string> statuses;
    sl::AskCallbacks cb;
    cb.on_status = [&](const std::string& s) { statuses.push_back(s); };
    sl::AskResult r3;
    try {
        r3 = sl::ask(lib, *model, o, cb);
    } catch (const std::exception& e) {
        QFAIL(e.what());
    }
    qInfo("3 (damaged page): kv: %s", r3.kv_note.c_str());
    QVERIFY2(r3.kv_note.find("removed the damaged saved context") != std::string::npos, r3.kv_note.c_str());
    QVERIFY2(r3.kv_note.find("page checksum mismatch") != std::string::npos, r3.kv_note.c_str());
    QVERIFY(std::any_of(statuses.begin(), statuses.end(), [](const std::string& s) { return s.find("answering again") != std::string::npos; }));
    QVERIFY(!r3.restored);
    QCOMPARE(r3.answer.text, r2.answer.text);
    const auto r4 = sl::ask(lib, *model, o);  // saved again: restored
    QVERIFY2(r4.restored, r4.kv_note.c_str());

    // Chats stored with their answers and citations; the JSON reads back to the same answer.
    const auto chats = lib.list_chats();
    QCOMPARE(chats.size(), size_t{4});
    const sl::Answer back = sl::answer_from_json(chats[1].citations);
    QCOMPARE(back.with_markers(), r2.answer.with_markers());
    QCOMPARE(back.sources_text(), r2.answer.sources_text());
    QCOMPARE(chats[1].answer, r2.answer.with_markers());

    // Reports: every citation's locator is in each format.
    sl::app::Report rep;
    rep.chats.push_back({o.question, back, "SmolLM2", chats[1].settings, ""});
    sl::app::CitationThumbnails thumbs;
    const std::string md = sl::app::report_markdown(rep), html = sl::app::report_html(rep, thumbs.fn());
    for (const auto& c : back.citations) {
        QVERIFY(c.locator.rfind("R-intro.pdf p. ", 0) == 0);
        QVERIFY(md.find(c.locator) != std::string::npos);
        QVERIFY(html.find(c.locator) != std::string::npos);
    }
}

// Over budget (a context of 2,048 tokens for eight pages), each question reads its own ranked
// pages. A second question whose context starts like the first one's restores that shared start
// and prefills only the rest, and its context is saved as a delta over the first (not a full
// copy); asked again, it restores and prefills nothing.
void TstAskLibrary::questionContextsShareAPrefix() {
    REQUIRE_ASSET(model_path, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf_path, "samples/pdf/R-intro.pdf");
    const auto model = sl::load_model(model_path);
    QTemporaryDir dir;
    sl::Library lib = sl::Library::open(dir.path().toStdString());
    sl::ingest::IngestOptions io;
    io.ocr = false;
    io.thumbnail_px = 0;
    sl::ingest::IngestContext ictx(io);
    sl::doc::Document d = sl::ingest::read_document(pdf_path.string(), ictx);
    const std::vector<sl::doc::Unit> all = d.units;
    d.units = {all[10], all[16], all[27], all[39], all[41], all[54], all[60], all[66]};
    sl::Library::FileInfo fi;
    fi.path = pdf_path.string();
    lib.store_document(d, fi);

    sl::AskOptions o;
    o.effort = sl::Effort::Low;
    o.n_ctx = 2048;
    o.question = "Which function reads a data frame from the file houses.data?";
    const auto r1 = sl::ask(lib, *model, o);
    qInfo("1: read %s\nkv: %s", r1.read_summary.c_str(), r1.kv_note.c_str());
    QVERIFY(!r1.restored);
    QCOMPARE(r1.prefilled_tokens, r1.context_tokens);

    o.question = "What does table(blocks, varieties) give, and what is the linear predictor of a generalized linear model?";
    const auto r2 = sl::ask(lib, *model, o);
    qInfo("2: read %s\nkv: %s", r2.read_summary.c_str(), r2.kv_note.c_str());
    QVERIFY(!r2.restored);
    QVERIFY2(r2.kv_note.find("reused the first") != std::string::npos, r2.kv_note.c_str());
    QVERIFY(r2.prefilled_tokens < r2.context_tokens);
    std::string delta;
    for (const auto& e : std::filesystem::directory_iterator(lib.kv_dir()))
        if (e.path().filename().string().rfind("q-", 0) == 0) delta = e.path().string();
    QVERIFY2(!delta.empty(), r2.kv_note.c_str());
    QVERIFY(!sl::kv_file_base(delta).empty());
    qInfo("second context: %lld of %lld tokens prefilled; delta file %llu bytes",
          static_cast<long long>(r2.prefilled_tokens), static_cast<long long>(r2.context_tokens),
          static_cast<unsigned long long>(std::filesystem::file_size(delta)));

    const auto r3 = sl::ask(lib, *model, o);
    QVERIFY2(r3.restored && r3.prefilled_tokens == 0, r3.kv_note.c_str());
    QCOMPARE(r3.answer.text, r2.answer.text);
}

QTEST_MAIN(TstAskLibrary)
#include "tst_ask_library.moc"
