#include "app/desktop/budget_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include <cmath>

#include "app/desktop/library_model.h"
#include "core/document/locator.h"
#include "ingest/ingest_context.h"
#include "ingest/pdf/pdf_render.h"
#include "ingest/video/media_input.h"

namespace sl::desktop {

namespace {

// Rough token costs for the estimate (SmolLM2's tokenizer on English prose: ~1.3 tokens a word).
constexpr qint64 kTokensPerPdfPage = 550;
constexpr qint64 kTokensPerSlide = 120;
constexpr qint64 kTokensPerImage = 150;   // OCR text of a typical picture
constexpr double kTokensPerFrame = 60;    // marker + OCR text of a sampled frame
constexpr double kSpeechTokensPerMinute = 200;

}  // namespace

BudgetPlan plan_budget(const QStringList& paths, qint64 budget, double frames_per_minute, qint64 already_used) {
    BudgetPlan plan;
    plan.budget = budget;
    plan.frames_per_minute = frames_per_minute;
    struct Media {
        size_t index;
        double minutes;
    };
    std::vector<Media> media;
    for (const QString& p : paths) {
        SourceEstimate e;
        e.path = p;
        const FileKind k = guess_kind(p);
        e.kind = kind_name(k);
        e.downsampled = QObject::tr("nothing");
        try {
            switch (k) {
                case FileKind::Pdf: {
                    const int pages = ingest::PdfPageRenderer(p.toStdString()).page_count();
                    e.size = pages == 1 ? QObject::tr("1 page") : QObject::tr("%1 pages").arg(pages);
                    e.tokens = pages * kTokensPerPdfPage;
                    e.downsampled = QObject::tr("page images as OCR text (text-only model)");
                    break;
                }
                case FileKind::Slides: {
                    const qint64 slides = std::max<qint64>(1, QFileInfo(p).size() / 40000);
                    e.size = QObject::tr("about %1 slides").arg(slides);
                    e.tokens = slides * kTokensPerSlide;
                    e.downsampled = QObject::tr("pictures as OCR text");
                    break;
                }
                case FileKind::Image:
                    e.size = QObject::tr("1 image");
                    e.tokens = kTokensPerImage;
                    e.downsampled = QObject::tr("as OCR text");
                    break;
                case FileKind::Video:
                case FileKind::Audio: {
                    ingest::IngestContext ctx;
                    const double seconds = ingest::MediaInput::open_file(p.toStdString(), ctx)->duration();
                    e.size = QString::fromStdString(doc::format_time(seconds));
                    media.push_back({plan.sources.size(), seconds / 60.0});
                    e.tokens = static_cast<qint64>(seconds / 60.0 * kSpeechTokensPerMinute);
                    break;
                }
                case FileKind::Text: {
                    // About 4 bytes of text per token; zipped formats (DOCX, EPUB) hold ~3x more.
                    const QString ext = QFileInfo(p).suffix().toLower();
                    const bool zipped = ext == QLatin1String("docx") || ext == QLatin1String("epub");
                    const qint64 bytes = QFileInfo(p).size() * (zipped ? 3 : 1);
                    e.size = QObject::tr("%1 KiB").arg(QFileInfo(p).size() / 1024);
                    e.tokens = std::max<qint64>(1, bytes / 4);
                    break;
                }
                case FileKind::Unknown:
                    e.size = QObject::tr("%1 KiB").arg(QFileInfo(p).size() / 1024);
                    e.error = QObject::tr("not a format Sightline reads (by its name)");
                    break;
            }
        } catch (const std::exception& ex) {
            e.error = QString::fromUtf8(ex.what());
        }
        plan.sources.push_back(e);
    }
    // Frames: lower the rate until everything fits (down to one frame every 4 minutes).
    qint64 fixed = already_used;
    for (const auto& s : plan.sources) fixed += s.tokens;
    double minutes = 0;
    for (const auto& m : media) minutes += m.minutes;
    double fpm = frames_per_minute;
    while (fpm > 0.25 && fixed + static_cast<qint64>(minutes * fpm * kTokensPerFrame) > budget) fpm /= 2;
    plan.frames_per_minute = fpm;
    for (const auto& m : media) {
        SourceEstimate& e = plan.sources[m.index];
        if (plan.sources[m.index].kind == kind_name(FileKind::Video)) {
            e.tokens += static_cast<qint64>(m.minutes * fpm * kTokensPerFrame);
            e.downsampled = fpm < frames_per_minute
                                ? QObject::tr("frames: %1/min (from %2/min) to fit").arg(fpm, 0, 'g', 3).arg(frames_per_minute)
                                : QObject::tr("frames: %1/min, scene-aware").arg(fpm, 0, 'g', 3);
        } else {
            e.downsampled = QObject::tr("speech as transcript");
        }
    }
    plan.total_tokens = already_used;
    for (const auto& s : plan.sources) plan.total_tokens += s.tokens;
    plan.heavy = plan.total_tokens - already_used > 200000 || minutes > 20;
    return plan;
}

BudgetDialog::BudgetDialog(const BudgetPlan& plan, QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Context budget"));
    setAccessibleName(tr("Context budget"));
    auto* intro = new QLabel(tr("These files will take about <b>%1</b> tokens of the <b>%2</b>-token budget "
                                "(estimate).")
                                 .arg(QLocale().toString(plan.total_tokens), QLocale().toString(plan.budget)),
                             this);
    intro->setWordWrap(true);
    auto* table = new QTableWidget(static_cast<int>(plan.sources.size()), 5, this);
    table->setAccessibleName(tr("Tokens per source"));
    table->setHorizontalHeaderLabels({tr("Source"), tr("Kind"), tr("Size"), tr("Tokens"), tr("Downsampled")});
    table->verticalHeader()->hide();
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    for (int i = 0; i < static_cast<int>(plan.sources.size()); ++i) {
        const SourceEstimate& s = plan.sources[static_cast<size_t>(i)];
        table->setItem(i, 0, new QTableWidgetItem(QFileInfo(s.path).fileName()));
        table->setItem(i, 1, new QTableWidgetItem(s.kind));
        table->setItem(i, 2, new QTableWidgetItem(s.size));
        table->setItem(i, 3, new QTableWidgetItem(QLocale().toString(s.tokens)));
        table->setItem(i, 4, new QTableWidgetItem(s.error.isEmpty() ? s.downsampled : tr("problem: %1").arg(s.error)));
    }
    table->horizontalHeader()->setStretchLastSection(true);
    table->resizeColumnsToContents();
    dont_ask_ = new QCheckBox(tr("Don't ask again"), this);
    auto* buttons = new QDialogButtonBox(this);
    buttons->addButton(tr("&Ingest"), QDialogButtonBox::AcceptRole);
    buttons->addButton(QDialogButtonBox::Cancel);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(intro);
    if (plan.total_tokens > plan.budget) {
        auto* over = new QLabel(tr("Over the budget even after downsampling: the answers will read a preselection."), this);
        over->setStyleSheet(QStringLiteral("color:#c0392b"));
        layout->addWidget(over);
    }
    layout->addWidget(table, 1);
    layout->addWidget(dont_ask_);
    layout->addWidget(buttons);
    resize(720, 360);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

bool BudgetDialog::dontAskAgain() const { return dont_ask_->isChecked(); }

}  // namespace sl::desktop
