// SHA-256 against the FIPS 180-4 examples, and incremental updates against one-shot hashing.
#include <QCryptographicHash>
#include <QTest>

#include "core/util/sha256.h"
#include "tests/common/test_support.h"

class TstSha256 : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void knownVectors_data();
    void knownVectors();
    void millionA();
    void incrementalMatchesQt();
};

void TstSha256::knownVectors_data() {
    QTest::addColumn<QByteArray>("input");
    QTest::addColumn<QByteArray>("hex");
    QTest::newRow("empty") << QByteArray() << QByteArray("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    QTest::newRow("abc") << QByteArray("abc") << QByteArray("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    QTest::newRow("448 bits") << QByteArray("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                              << QByteArray("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

void TstSha256::knownVectors() {
    QFETCH(QByteArray, input);
    QFETCH(QByteArray, hex);
    QCOMPARE(QByteArray::fromStdString(sl::sha256_hex(input.toStdString())), hex);
}

void TstSha256::millionA() {
    sl::Sha256 h;
    const std::string chunk(1000, 'a');
    for (int i = 0; i < 1000; ++i) h.update(chunk);
    QCOMPARE(QByteArray::fromStdString(sl::to_hex(h.digest())),
             QByteArray("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
}

void TstSha256::incrementalMatchesQt() {
    // Qt's implementation is independent of ours; random data in random-sized pieces.
    auto& g = sl::test::rng();
    for (int round = 0; round < 50; ++round) {
        std::uniform_int_distribution<int> len(0, 5000), byte(0, 255);
        QByteArray data(len(g), Qt::Uninitialized);
        for (auto& c : data) c = static_cast<char>(byte(g));
        sl::Sha256 h;
        qsizetype pos = 0;
        while (pos < data.size()) {
            const qsizetype take = std::min<qsizetype>(data.size() - pos, std::uniform_int_distribution<int>(1, 130)(g));
            h.update(data.constData() + pos, static_cast<size_t>(take));
            pos += take;
        }
        QCOMPARE(QByteArray::fromStdString(sl::to_hex(h.digest())),
                 QCryptographicHash::hash(data, QCryptographicHash::Sha256).toHex());
    }
}

QTEST_APPLESS_MAIN(TstSha256)
#include "tst_sha256.moc"
