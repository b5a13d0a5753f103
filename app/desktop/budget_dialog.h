// The budget before a heavy ingest: for each file to add, what it is (pages, slides, duration),
// the tokens it will take in the long context, and what will be downsampled to fit the model's
// budget (video frames per minute, OCR instead of image patches for a text-only model). A quick
// estimate from cheap probes (page counts, media duration), until the context builder's planner
// (core/context) gives exact figures.
#pragma once

#include <QDialog>
#include <QString>
#include <QStringList>

#include <vector>

class QCheckBox;

namespace sl::desktop {

struct SourceEstimate {
    QString path;
    QString kind;           // "PDF", "Slides", "Video", ...
    QString size;           // "113 pages", "00:12:40"
    qint64 tokens = 0;      // estimated after downsampling
    QString downsampled;    // what is reduced to fit, or "nothing"
    QString error;          // a probe that failed (the file will likely fail to ingest too)
};

struct BudgetPlan {
    std::vector<SourceEstimate> sources;
    qint64 total_tokens = 0;
    qint64 budget = 0;
    double frames_per_minute = 0;  // chosen for videos
    bool heavy = false;            // worth asking before ingesting
};

// Probes `paths` (page counts, durations) and plans within `budget` tokens, starting from
// `frames_per_minute` for videos and lowering it when over budget. Runs on any thread.
BudgetPlan plan_budget(const QStringList& paths, qint64 budget, double frames_per_minute, qint64 already_used);

class BudgetDialog : public QDialog {
    Q_OBJECT

public:
    BudgetDialog(const BudgetPlan& plan, QWidget* parent = nullptr);
    bool dontAskAgain() const;

private:
    QCheckBox* dont_ask_;
};

}  // namespace sl::desktop
