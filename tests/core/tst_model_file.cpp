// The default model that scripts/setup.sh fetched: present, a GGUF file, and the pinned bytes.
#include <QTest>

#include <cstring>
#include <fstream>

#include "core/util/assets.h"
#include "core/util/sha256.h"
#include "tests/common/test_support.h"

class TstModelFile : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void defaultModelIsPinnedGguf();
    void everySampleMatchesItsPin();
};

void TstModelFile::defaultModelIsPinnedGguf() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    char magic[4] = {};
    std::ifstream f(model, std::ios::binary);
    QVERIFY(f.read(magic, 4));
    QVERIFY2(std::memcmp(magic, "GGUF", 4) == 0, "the default model does not start with the GGUF magic");
    uint32_t version = 0;
    QVERIFY(f.read(reinterpret_cast<char*>(&version), 4));
    QVERIFY2(version == 2 || version == 3, qPrintable(QStringLiteral("GGUF version %1").arg(version)));
    const std::string pin = sl::assets::pinned_sha256(sl::assets::kDefaultModel);
    QCOMPARE(pin.size(), size_t{64});
    QCOMPARE(QString::fromStdString(sl::sha256_file_hex(model)), QString::fromStdString(pin));
}

void TstModelFile::everySampleMatchesItsPin() {
    int samples = 0;
    for (const auto& a : sl::assets::all()) {
        if (a.relative_path.rfind("samples/", 0) != 0) continue;
        ++samples;
        REQUIRE_ASSET(path, a.relative_path);
        QVERIFY2(sl::sha256_file_hex(path) == a.sha256, qPrintable(QString::fromStdString(path.string() + ": hash differs from its pin")));
    }
    QVERIFY(samples >= 10);
}

QTEST_APPLESS_MAIN(TstModelFile)
#include "tst_model_file.moc"
