#include "app/desktop/plan_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QFormLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace sl::desktop {

PlanDialog::PlanDialog(const ChatAnswer& answer, Effort effort, int context_tokens, int model_context, QWidget* parent)
    : QDialog(parent) {
    setWindowTitle(tr("Context Plan"));
    setAccessibleName(tr("Context plan of the answer"));
    plan_ = QString::fromStdString(answer.plan);
    auto* question = new QLabel(tr("<b>%1</b>").arg(QString::fromStdString(answer.answer.question).toHtmlEscaped()), this);
    question->setWordWrap(true);
    auto* read = new QLabel(answer.read_summary.empty() ? tr("The answer read the whole context below.")
                                                        : tr("Read: %1").arg(QString::fromStdString(answer.read_summary)),
                            this);
    read->setWordWrap(true);
    auto* text = new QPlainTextEdit(plan_.isEmpty() ? tr("No plan was recorded for this answer (answers restored from an "
                                                         "earlier session keep only what they read).")
                                                    : plan_,
                                    this);
    text->setReadOnly(true);
    text->setAccessibleName(tr("Plan"));
    text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    text->setLineWrapMode(QPlainTextEdit::NoWrap);

    effort_ = new QComboBox(this);
    effort_->setAccessibleName(tr("Effort for the next questions"));
    for (Effort e : {Effort::Low, Effort::Medium, Effort::High}) {
        const EffortSettings s = effort_settings(e);
        effort_->addItem(tr("%1: top-k %2 blocks, %3 frames/min, answers up to %4 tokens")
                             .arg(QString::fromLatin1(to_string(e)))
                             .arg(s.top_k)
                             .arg(s.frames_per_minute)
                             .arg(s.answer_tokens),
                         static_cast<int>(e));
    }
    effort_->setCurrentIndex(std::max(0, effort_->findData(static_cast<int>(effort))));
    context_ = new QSpinBox(this);
    context_->setAccessibleName(tr("Context size for the next questions"));
    context_->setRange(0, 1 << 20);
    context_->setSingleStep(1024);
    context_->setSuffix(tr(" tokens"));
    context_->setSpecialValueText(model_context > 0 ? tr("the model's own (%1 tokens)").arg(model_context) : tr("the model's own"));
    context_->setValue(context_tokens);
    context_->setToolTip(tr("How many tokens of the library each question may read; larger reads more and takes longer."));

    auto* form = new QFormLayout;
    form->addRow(tr("Effort:"), effort_);
    form->addRow(tr("Context:"), context_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Apply | QDialogButtonBox::Close, this);
    buttons->button(QDialogButtonBox::Apply)->setToolTip(tr("Use this effort and context for the next questions"));
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(question);
    layout->addWidget(read);
    layout->addWidget(text, 1);
    layout->addWidget(new QLabel(tr("For the next questions:"), this));
    layout->addLayout(form);
    layout->addWidget(buttons);
    resize(720, 480);
    connect(buttons->button(QDialogButtonBox::Apply), &QPushButton::clicked, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

Effort PlanDialog::effort() const { return static_cast<Effort>(effort_->currentData().toInt()); }

int PlanDialog::contextTokens() const { return context_->value(); }

int parse_plan_link(const QString& url) {
    if (!url.startsWith(QLatin1String("plan:"))) return -1;
    bool ok = false;
    const int n = url.mid(5).toInt(&ok);
    return ok && n >= 0 ? n : -1;
}

}  // namespace sl::desktop
