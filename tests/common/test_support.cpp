#include "tests/common/test_support.h"

#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QTest>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>

#include "core/util/assets.h"
#include "core/util/paths.h"
#include "sightline/build_config.h"

namespace sl::test {

std::filesystem::path require_asset(const std::string& relative_path) {
    const std::filesystem::path p = assets::path_of(relative_path);
    if (std::filesystem::is_regular_file(p)) return p;
    const std::string msg = p.string() + " is missing: run " + paths::setup_command() +
                            " (cache: " + paths::cache_dir().string() + ")";
    QTest::qFail(msg.c_str(), __FILE__, __LINE__);
    return {};
}

std::mt19937_64& rng() {
    static std::mt19937_64 gen = [] {
        uint64_t seed;
        if (const char* s = std::getenv("SIGHTLINE_TEST_SEED"); s && *s) {
            seed = std::strtoull(s, nullptr, 10);
        } else {
            seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        }
        std::fprintf(stderr, "test seed: SIGHTLINE_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
        return std::mt19937_64(seed);
    }();
    return gen;
}

std::vector<float> random_floats(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng());
    return v;
}

double normalized_error(const float* a, const float* b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(a[i]) - b[i];
        num += d * d;
        den += static_cast<double>(b[i]) * b[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

QString require_venv_python() {
    QString venv = qEnvironmentVariable("SIGHTLINE_VENV");
    if (venv.isEmpty()) venv = QString::fromStdString((paths::cache_dir() / "venv").string());
    const QString py = venv + QStringLiteral("/bin/python");
    if (QFileInfo(py).isExecutable()) return py;
    const std::string msg = py.toStdString() + " is missing: run " + paths::setup_command();
    QTest::qFail(msg.c_str(), __FILE__, __LINE__);
    return {};
}

QString reference_script(const QString& relative) {
    return QStringLiteral(SIGHTLINE_SOURCE_DIR "/tests/reference/") + relative;
}

bool run_process(const QString& program, const QStringList& args, QByteArray* out, int timeout_ms) {
    QProcess p;
    p.start(program, args);
    const QString cmd = program + QLatin1Char(' ') + args.join(QLatin1Char(' '));
    if (!p.waitForStarted(30000)) {
        QTest::qFail(qPrintable(QStringLiteral("cannot start: ") + cmd), __FILE__, __LINE__);
        return false;
    }
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        QTest::qFail(qPrintable(QStringLiteral("timed out: ") + cmd), __FILE__, __LINE__);
        return false;
    }
    if (out) *out = p.readAllStandardOutput();
    if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
        const QString msg = QStringLiteral("failed (exit %1): %2\n%3")
                                .arg(p.exitCode())
                                .arg(cmd, QString::fromUtf8(p.readAllStandardError().right(4000)));
        QTest::qFail(qPrintable(msg), __FILE__, __LINE__);
        return false;
    }
    return true;
}

}  // namespace sl::test
