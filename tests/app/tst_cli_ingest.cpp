// `sightline-cli ingest FILE... [--json]` on the real samples: the JSON shape the issue specifies,
// per-format units, and a failed file that does not stop the others.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "tests/common/test_support.h"

class TstCliIngest : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void jsonShape_data();
    void jsonShape();
    void summaryAndFailure();
};

namespace {

QByteArray run_cli(const QStringList& args, int* status, QByteArray* err = nullptr) {
    QProcess p;
    p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
    if (!p.waitForFinished(600000)) return {};
    *status = p.exitCode();
    if (err) *err = p.readAllStandardError();
    return p.readAllStandardOutput();
}

}  // namespace

void TstCliIngest::jsonShape_data() {
    QTest::addColumn<QString>("asset");
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("unit_kind");
    QTest::addColumn<int>("units");
    QTest::newRow("pptx") << QStringLiteral("samples/pptx/pandoc-reference.pptx") << QStringLiteral("slides")
                          << QStringLiteral("slide") << 4;
    QTest::newRow("pdf") << QStringLiteral("samples/pdf/helloworld.pdf") << QStringLiteral("pdf") << QStringLiteral("page") << 1;
    QTest::newRow("video") << QStringLiteral("samples/video/vtest.avi") << QStringLiteral("video")
                           << QStringLiteral("segment") << 3;
}

void TstCliIngest::jsonShape() {
    QFETCH(QString, asset);
    QFETCH(QString, kind);
    QFETCH(QString, unit_kind);
    QFETCH(int, units);
    REQUIRE_ASSET(path, asset.toStdString());
    int status = -1;
    QByteArray err;
    const QByteArray out = run_cli({QStringLiteral("ingest"), QStringLiteral("--json"), QStringLiteral("--no-transcribe"),
                                    QString::fromStdString(path.string())},
                                   &status, &err);
    QVERIFY2(status == 0, err.constData());
    QJsonParseError pe{};
    const QJsonObject d = QJsonDocument::fromJson(out, &pe).object();
    QVERIFY2(pe.error == QJsonParseError::NoError, qPrintable(pe.errorString()));
    QCOMPARE(d.value(QStringLiteral("path")).toString(), QString::fromStdString(path.string()));
    QCOMPARE(d.value(QStringLiteral("kind")).toString(), kind);
    QVERIFY(d.contains(QStringLiteral("title")));
    QCOMPARE(d.value(QStringLiteral("id")).toString().size(), 64);
    const QJsonArray us = d.value(QStringLiteral("units")).toArray();
    QCOMPARE(us.size(), units);
    double last_t1 = 0;
    int blocks = 0;
    for (int i = 0; i < us.size(); ++i) {
        const QJsonObject u = us[i].toObject();
        QCOMPARE(u.value(QStringLiteral("kind")).toString(), unit_kind);
        QCOMPARE(u.value(QStringLiteral("index")).toInt(), i);
        QVERIFY(!u.value(QStringLiteral("label")).toString().isEmpty());
        if (unit_kind == QLatin1String("segment")) {
            const double t0 = u.value(QStringLiteral("t0")).toDouble(), t1 = u.value(QStringLiteral("t1")).toDouble();
            QVERIFY(t1 > t0);
            QCOMPARE(t0, last_t1);
            last_t1 = t1;
            for (const auto& v : u.value(QStringLiteral("visuals")).toArray()) {
                const double ts = v.toObject().value(QStringLiteral("timestamp")).toDouble(-1);
                QVERIFY(ts >= t0 && ts < t1);
            }
        }
        for (const auto& bv : u.value(QStringLiteral("blocks")).toArray()) {
            const QJsonObject b = bv.toObject();
            ++blocks;
            QVERIFY(!b.value(QStringLiteral("role")).toString().isEmpty());
            QVERIFY(b.contains(QStringLiteral("text")));
            if (b.contains(QStringLiteral("bbox"))) {
                const QJsonArray bb = b.value(QStringLiteral("bbox")).toArray();
                QCOMPARE(bb.size(), 4);
                QVERIFY(bb[0].toDouble() >= 0 && bb[2].toDouble() <= 1 && bb[0].toDouble() <= bb[2].toDouble());
            }
        }
    }
    if (kind != QLatin1String("video")) QVERIFY(blocks > 0);
}

void TstCliIngest::summaryAndFailure() {
    REQUIRE_ASSET(pdf, "samples/pdf/helloworld.pdf");
    QTemporaryDir dir;
    const QString bogus = dir.filePath(QStringLiteral("not-really.pdf"));
    QFile f(bogus);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("this is not a PDF at all");
    f.close();
    int status = -1;
    QByteArray err;
    const QByteArray out =
        run_cli({QStringLiteral("ingest"), bogus, QString::fromStdString(pdf.string())}, &status, &err);
    QCOMPARE(status, 1);
    QVERIFY2(err.contains(bogus.toUtf8()), err.constData());  // the error names the file
    QVERIFY2(out.contains("helloworld.pdf: pdf, 1 page, "), out.constData());  // the next file still ran
}

QTEST_GUILESS_MAIN(TstCliIngest)
#include "tst_cli_ingest.moc"
