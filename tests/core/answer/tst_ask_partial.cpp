// Answering before the library's prefill finishes (app/common/library_prefill.h + ask): a
// library of five R-intro.pdf pages, the houses.data page (p. 34, PDF page 40) last. The library prefill
// is stopped after its first saved chunks; a question about houses.data then reads the saved
// prefix plus a preselection of the pages not reached, which must hold page 34, and says so in
// read_summary; its own part is saved as a delta file over the library prefill (not a full copy),
// and the same question again restores it, prefilling nothing. The prefill then resumes to complete; the next question restores all of it and
// prefills nothing but its question turn. A cancelled ask throws Cancelled.
#include <QTemporaryDir>
#include <QTest>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/ask/ask.h"
#include "core/ask/library_context.h"
#include "core/kvcache/kv_file.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/util/assets.h"
#include "ingest/reader.h"
#include "tests/common/library_prefill_support.h"
#include "tests/common/test_support.h"

class TstAskPartial : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void partialThenComplete();
};

void TstAskPartial::partialThenComplete() {
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
    d.units = {all[10], all[27], all[54], all[66], all[39]};  // labels p. 5, 22, 49, 61, then p. 34
    sl::Library::FileInfo fi;
    fi.path = pdf_path.string();
    lib.store_document(d, fi);

    // The library prefill, stopped once its first 1,024 tokens are saved.
    const sl::test::StoppedPrefill stopped = sl::test::stop_library_prefill_after(lib, *model, 1024);
    const int64_t total = stopped.total, saved = stopped.saved;
    QVERIFY2(total > 2500, qPrintable(QString::number(total)));
    QVERIFY(stopped.error.empty());
    QVERIFY2(saved >= 1024 && saved < total, qPrintable(QStringLiteral("%1 of %2").arg(saved).arg(total)));
    const auto recs = lib.list_kv_caches();
    QCOMPARE(recs.size(), size_t{1});
    QVERIFY(recs[0].state == sl::KvCacheState::Partial);
    QCOMPARE(recs[0].n_tokens, saved);

    sl::AskOptions o;
    o.effort = sl::Effort::Low;
    o.question = "Which function reads a data frame from the file houses.data?";
    o.preselect_tokens = 1536;

    // Cancelled before it starts reading: nothing answered, nothing stored.
    std::atomic<bool> stop{true};
    o.cancel = &stop;
    QVERIFY_THROWS_EXCEPTION(sl::Cancelled, sl::ask(lib, *model, o));
    QCOMPARE(lib.list_chats().size(), size_t{0});
    o.cancel = nullptr;

    const auto r1 = sl::ask(lib, *model, o);
    qInfo("read: %s\nkv: %s\n%s\n%s", r1.read_summary.c_str(), r1.kv_note.c_str(), r1.answer.with_markers().c_str(),
          r1.answer.sources_text().c_str());
    QVERIFY2(r1.from_library_prefill, r1.kv_note.c_str());
    QCOMPARE(r1.library_tokens, total);
    QCOMPARE(r1.library_saved, saved);
    QVERIFY(r1.prefilled_tokens > 0 && r1.prefilled_tokens <= 1536 + 256);  // preselection + closing
    QVERIFY2(r1.read_summary.find("R-intro.pdf p. 34") != std::string::npos, r1.read_summary.c_str());
    QVERIFY2(r1.read_summary.find("preselected") != std::string::npos, r1.read_summary.c_str());
    // The question's part was saved as a delta over the library prefill, not a full copy: the same
    // question again restores it and prefills nothing.
    std::string delta;
    for (const auto& e : std::filesystem::directory_iterator(lib.kv_dir()))
        if (e.path().filename().string().rfind("q-", 0) == 0) delta = e.path().string();
    QVERIFY2(!delta.empty(), r1.kv_note.c_str());
    QCOMPARE(sl::kv_file_base(delta).name, std::filesystem::path(recs[0].path).filename().string());
    {
        // It holds the question's tokens and their pages only.
        std::ifstream f(delta, std::ios::binary);
        const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
        const sl::KvFileContents c = sl::parse_kv_file(bytes, delta, sl::KvVerify::Full);
        QCOMPARE(static_cast<int64_t>(c.tokens.size()), r1.prefilled_tokens);
        QCOMPARE(static_cast<int64_t>(c.base.tokens), saved);
        QCOMPARE(c.page_offset[0], uint64_t{0});  // block 0 is the library prefill's
    }
    qInfo("question delta %llu bytes, library prefill %llu bytes",
          static_cast<unsigned long long>(std::filesystem::file_size(delta)),
          static_cast<unsigned long long>(std::filesystem::file_size(recs[0].path)));
    const auto r1b = sl::ask(lib, *model, o);
    QVERIFY2(r1b.restored && r1b.prefilled_tokens == 0, r1b.kv_note.c_str());
    QCOMPARE(r1b.answer.text, r1.answer.text);

    // Resume the prefill to the end; the next question reads all of it, prefilling no context.
    {
        sl::LibraryPrefill p(lib, *model);
        p.run();
        p.record();
        QCOMPARE(p.status().resumed_from, saved);
        QVERIFY(p.status().finished);
    }
    o.question = "What does the scan() function return?";
    const auto r2 = sl::ask(lib, *model, o);
    qInfo("read: %s\n%s", r2.read_summary.c_str(), r2.answer.with_markers().c_str());
    QVERIFY(r2.from_library_prefill);
    QCOMPARE(r2.library_saved, total);
    QCOMPARE(r2.prefilled_tokens, int64_t{0});
    QCOMPARE(r2.context_tokens, total);
    QVERIFY(r2.read_summary.rfind("all ", 0) == 0);
    QCOMPARE(lib.list_chats().size(), size_t{3});
    qInfo("time to the answer's context: partial %.2f s (restore + %lld preselected tokens), complete %.2f s",
          r1.prefill_seconds, static_cast<long long>(r1.prefilled_tokens), r2.prefill_seconds);
}

QTEST_MAIN(TstAskPartial)
#include "tst_ask_partial.moc"
