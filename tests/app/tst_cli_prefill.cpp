// `sightline-cli prefill`: the whole library as one context, saved as it goes; stopped with Ctrl-C
// it keeps what it saved, and the next run resumes from there and completes; a run on a complete
// file prefills nothing.
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <vector>

#include "core/util/assets.h"
#include "tests/common/test_support.h"

namespace {

struct Run {
    int exit_code = -1;
    QByteArray out;
};

// Runs the CLI; with `interrupt`, sends Ctrl-C as soon as the prefill has printed its first progress
// line (the handler is set before it): the stop comes mid-prefill however fast the machine is (a
// fixed 8 s let this 1,648-token prefill, ~4 s here now, finish first, and a model that loads slowly
// on a loaded machine must not be killed before it can save). A run that ended by itself is returned
// as it ended.
Run cli(const QStringList& args, bool interrupt = false) {
    QProcess p;
    p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
    if (!p.waitForStarted()) return {};
    QByteArray err;
    if (interrupt) {
        QElapsedTimer t;
        t.start();
        while (!err.contains("prefill ") && p.state() != QProcess::NotRunning && t.elapsed() < 300000) {
            p.waitForReadyRead(200);
            err += p.readAllStandardError();
        }
        if (p.state() != QProcess::NotRunning) ::kill(static_cast<pid_t>(p.processId()), SIGINT);
    }
    // waitForFinished() is false for a process that has already finished: only wait for a running one.
    if (p.state() != QProcess::NotRunning && !p.waitForFinished(600000)) return {};
    return {p.exitCode(), p.readAllStandardOutput() + err + p.readAllStandardError()};
}

long long number_after(const QByteArray& out, const QString& pattern) {
    const auto m = QRegularExpression(pattern).match(QString::fromUtf8(out));
    return m.hasMatch() ? m.captured(1).toLongLong() : -1;
}

}  // namespace

class TstCliPrefill : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void resumesAndCompletes();
};

void TstCliPrefill::resumesAndCompletes() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    REQUIRE_ASSET(deck, "samples/pptx/pandoc-reference.pptx");
    QTemporaryDir dir;
    const QString lib = dir.filePath(QStringLiteral("library"));
    const Run add = cli({QStringLiteral("add"), QStringLiteral("--library"), lib, QStringLiteral("--no-ocr"),
                         QString::fromStdString(pdf.string()), QString::fromStdString(deck.string())});
    QVERIFY2(add.exit_code == 0, add.out.constData());

    // A budget of 2,048 tokens keeps pages spread over the manual; saved every 256 tokens.
    const QStringList args{QStringLiteral("prefill"), QStringLiteral("--library"), lib, QStringLiteral("--max-tokens"),
                           QStringLiteral("2048"), QStringLiteral("--save-every"), QStringLiteral("256")};
    const Run first = cli(args, true);  // Ctrl-C once the prefill is under way
    const long long total = number_after(first.out, QStringLiteral("of (\\d+) tokens saved"));
    const long long saved = number_after(first.out, QStringLiteral(": (\\d+) of \\d+ tokens saved"));
    QVERIFY2(total > 1024 && saved >= 0, first.out.constData());
    if (first.out.contains("stopped:")) {
        QCOMPARE(first.exit_code, 130);
        QCOMPARE(saved % 256, 0LL);
    }

    const Run second = cli(args);
    QVERIFY2(second.exit_code == 0, second.out.constData());
    QVERIFY2(second.out.contains("complete: "), second.out.constData());
    QCOMPARE(number_after(second.out, QStringLiteral("resumed from (\\d+)")), saved);
    QCOMPARE(number_after(second.out, QStringLiteral(": (\\d+) of \\d+ tokens saved")), total);

    const Run third = cli(args);
    QVERIFY2(third.exit_code == 0, third.out.constData());
    QCOMPARE(number_after(third.out, QStringLiteral("resumed from (\\d+)")), total);
    // Where it ran, and why: the saved-as-it-goes prefill needs what only the CPU session has.
    QVERIFY2(third.out.contains("Device: CPU: "), third.out.constData());

    // --device: cpu is the CPU, said so; a bad name is a usage error; cuda without a usable device
    // fails naming that (on a GPU machine the prefill runs there when opted in, else the CPU says why).
    const Run cpu = cli(QStringList(args) << QStringLiteral("--device") << QStringLiteral("cpu"));
    QVERIFY2(cpu.exit_code == 0, cpu.out.constData());
    QVERIFY2(cpu.out.contains("Device: CPU (asked for with --device cpu)"), cpu.out.constData());
    const Run bad = cli(QStringList(args) << QStringLiteral("--device") << QStringLiteral("gpu"));
    QCOMPARE(bad.exit_code, 2);
    QVERIFY2(bad.out.contains("--device auto|cpu|cuda"), bad.out.constData());
    // --device-kv-budget: a size or a usage error naming it; the CPU keeps its context in RAM.
    const Run bad_budget = cli(QStringList(args) << QStringLiteral("--device-kv-budget") << QStringLiteral("lots"));
    QCOMPARE(bad_budget.exit_code, 2);
    QVERIFY2(bad_budget.out.contains("--device-kv-budget: "), bad_budget.out.constData());
    const Run budget = cli(QStringList(args) << QStringLiteral("--device") << QStringLiteral("cpu")
                                             << QStringLiteral("--device-kv-budget") << QStringLiteral("1G"));
    QVERIFY2(budget.exit_code == 0, budget.out.constData());
    // --kv-budget (host RAM for the K/V: on the CPU the pages past it spill; on a GPU it bounds
    // the pinned host tier): a size or a usage error naming it; a small one still prefills.
    const Run bad_host = cli(QStringList(args) << QStringLiteral("--kv-budget") << QStringLiteral("lots"));
    QCOMPARE(bad_host.exit_code, 2);
    QVERIFY2(bad_host.out.contains("--kv-budget: "), bad_host.out.constData());
    const Run host = cli(QStringList(args) << QStringLiteral("--device") << QStringLiteral("cpu")
                                           << QStringLiteral("--kv-budget") << QStringLiteral("2M"));
    QVERIFY2(host.exit_code == 0, host.out.constData());
    const Run cuda = cli(QStringList(args) << QStringLiteral("--device") << QStringLiteral("cuda"));
    if (cuda.exit_code == 0)  // a usable device: on it (SIGHTLINE_CUDA_MODEL=1), or the CPU saying why
        QVERIFY2(cuda.out.contains("Device: CPU: ") || cuda.out.contains("Device: CUDA: "), cuda.out.constData());
    else QVERIFY2(cuda.out.contains("--device cuda: no usable CUDA device"), cuda.out.constData());

    // --ids-out: the context's token ids (what tests/gpu/pack.sh hands the device's benchmark),
    // nothing prefilled: as many as the prefill's context, each in the vocabulary.
    const QString ids = dir.filePath(QStringLiteral("ids.bin"));
    const Run dump = cli(QStringList(args) << QStringLiteral("--ids-out") << ids);
    QVERIFY2(dump.exit_code == 0, dump.out.constData());
    QCOMPARE(number_after(dump.out, QStringLiteral("(\\d+) token ids written")), total);
    QVERIFY2(!dump.out.contains("tokens saved"), dump.out.constData());
    QFile f(ids);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray bytes = f.readAll();
    QCOMPARE(static_cast<long long>(bytes.size()), total * 4);
    std::vector<int32_t> t(static_cast<size_t>(total));
    std::memcpy(t.data(), bytes.constData(), static_cast<size_t>(bytes.size()));
    QVERIFY(std::all_of(t.begin(), t.end(), [](int32_t x) { return x >= 0 && x < 49152; }));  // SmolLM2's vocabulary
    const Run nowhere = cli(QStringList(args) << QStringLiteral("--ids-out") << dir.filePath(QStringLiteral("no/such/ids.bin")));
    QVERIFY(nowhere.exit_code != 0);
    QVERIFY2(nowhere.out.contains("no/such/ids.bin: cannot write the token ids"), nowhere.out.constData());
}

QTEST_GUILESS_MAIN(TstCliPrefill)
#include "tst_cli_prefill.moc"
