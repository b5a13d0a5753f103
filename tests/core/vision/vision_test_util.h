// Helpers of the vision suites: the tiny mmproj generator and the numpy reference.
#pragma once

#include <QByteArray>
#include <QFile>
#include <QString>
#include <QStringList>

#include <cstring>
#include <vector>

#include "tests/common/test_support.h"

namespace sl::test {

// Writes a tiny random-weight mmproj with make_tiny_mmproj.py; false (test failed) on error.
inline bool make_mmproj(const QString& out, const QStringList& args) {
    const QString py = require_venv_python();
    if (py.isEmpty()) return false;
    return run_process(py, QStringList{reference_script(QStringLiteral("vision/make_tiny_mmproj.py")), out} + args, nullptr);
}

inline bool write_floats(const QString& path, const void* data, size_t bytes) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return false;
    return f.write(static_cast<const char*>(data), static_cast<qint64>(bytes)) == static_cast<qint64>(bytes);
}

inline std::vector<float> read_floats(const QString& path) {
    QFile f(path);
    std::vector<float> v;
    if (!f.open(QIODevice::ReadOnly)) return v;
    const QByteArray raw = f.readAll();
    v.resize(static_cast<size_t>(raw.size()) / sizeof(float));
    std::memcpy(v.data(), raw.constData(), v.size() * sizeof(float));
    return v;
}

}  // namespace sl::test
