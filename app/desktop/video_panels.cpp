#include "app/desktop/video_panels.h"

#include <QIcon>
#include <QImage>
#include <QListWidget>
#include <QPixmap>

#include <algorithm>
#include <string>

#include "core/document/locator.h"

namespace sl::desktop {

namespace {

QString time_text(double s) { return QString::fromStdString(doc::format_time(s)); }

}  // namespace

int fill_frame_strip(QListWidget* list, const doc::Document& d) {
    list->clear();
    struct Frame {
        double t;
        const doc::Visual* v;
    };
    std::vector<Frame> frames;
    for (const auto& u : d.units)
        for (const auto& v : u.visuals)
            if (v.kind == doc::VisualKind::Frame && v.timestamp) frames.push_back({*v.timestamp, &v});
    std::stable_sort(frames.begin(), frames.end(), [](const Frame& a, const Frame& b) { return a.t < b.t; });
    for (const auto& f : frames) {
        auto* item = new QListWidgetItem(time_text(f.t), list);
        QImage img;
        if (!f.v->encoded.empty())
            img.loadFromData(f.v->encoded.data(), static_cast<int>(f.v->encoded.size()));
        item->setIcon(img.isNull() ? QIcon(QStringLiteral(":/icons/kind-video.svg")) : QIcon(QPixmap::fromImage(img)));
        item->setData(Qt::UserRole, f.t);
        item->setToolTip(QObject::tr("Frame at %1").arg(time_text(f.t)));
    }
    return list->count();
}

int fill_transcript(QListWidget* list, const doc::Document& d) {
    list->clear();
    struct Line {
        double t;
        std::string text;
    };
    std::vector<Line> lines;
    for (const auto& u : d.units)
        for (const auto& b : u.blocks)
            if ((b.role == doc::BlockRole::Transcript || b.role == doc::BlockRole::Subtitle) && b.time && !b.text.empty())
                lines.push_back({b.time->t0, b.text});
    std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) { return a.t < b.t; });
    for (const auto& l : lines) {
        auto* item = new QListWidgetItem(QStringLiteral("%1  %2").arg(time_text(l.t), QString::fromStdString(l.text)), list);
        item->setData(Qt::UserRole, l.t);
    }
    return list->count();
}

int row_at(const QListWidget* list, double seconds) {
    int row = -1;
    for (int i = 0; i < list->count(); ++i) {
        if (list->item(i)->data(Qt::UserRole).toDouble() > seconds + 1e-6) break;
        row = i;
    }
    return row;
}

double frame_interval(const doc::Document& d) {
    const auto it = d.metadata.find("fps");
    if (it != d.metadata.end()) {
        try {
            const double fps = std::stod(it->second);
            if (fps >= 1 && fps <= 1000) return 1.0 / fps;
        } catch (const std::exception&) {
        }
    }
    return 1.0 / 25;
}

}  // namespace sl::desktop
