// Helpers for the media tests: run the ffmpeg CLI to build small derived media in a temp folder,
// read a file with the video reader, and small inspections of the resulting Document.
#pragma once

#include <QProcess>
#include <QStandardPaths>
#include <QString>
#include <QStringList>

#include <string>
#include <vector>

#include "core/document/document.h"

namespace sl::test {

// Runs `ffmpeg -hide_banner -loglevel error -y ARGS`; returns "" on success, else the error.
inline QString run_ffmpeg(const QStringList& args, int timeout_ms = 60000) {
    const QString exe = QStandardPaths::findExecutable(QStringLiteral("ffmpeg"));
    if (exe.isEmpty()) return QStringLiteral("ffmpeg is not installed (scripts/setup.sh)");
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(exe,
            QStringList{QStringLiteral("-hide_banner"), QStringLiteral("-loglevel"),
                        QStringLiteral("error"), QStringLiteral("-nostdin"), QStringLiteral("-y")} +
                args);
    if (!p.waitForFinished(timeout_ms)) return QStringLiteral("ffmpeg did not finish");
    if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0)
        return QStringLiteral("ffmpeg failed: ") + QString::fromUtf8(p.readAll());
    return {};
}

// Every frame visual of the document, in unit order.
inline std::vector<doc::Visual> all_frames(const doc::Document& d) {
    std::vector<doc::Visual> out;
    for (const auto& u : d.units)
        for (const auto& v : u.visuals)
            if (v.kind == doc::VisualKind::Frame) out.push_back(v);
    return out;
}

// Every block with `role`, in unit order.
inline std::vector<doc::Block> all_blocks(const doc::Document& d, doc::BlockRole role) {
    std::vector<doc::Block> out;
    for (const auto& u : d.units)
        for (const auto& b : u.blocks)
            if (b.role == role) out.push_back(b);
    return out;
}

}  // namespace sl::test
