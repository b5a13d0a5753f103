// The context plan of an answer (the "context plan" link under it): what the context read, per
// document — tokens of each and units kept of all, what was cut to fit — and, for the questions
// that follow, the effort and the context size to use. Accepting (Apply) leaves the choices in
// effort() / contextTokens(); the window applies them. GUI thread only.
#pragma once

#include <QDialog>

#include "app/desktop/chat_answer.h"
#include "core/context/effort.h"

class QComboBox;
class QSpinBox;

namespace sl::desktop {

class PlanDialog : public QDialog {
public:
    // `context_tokens`: the context size asked questions get now (0: the model's own, which is
    // `model_context` tokens; 0 when unknown).
    PlanDialog(const ChatAnswer& answer, Effort effort, int context_tokens, int model_context, QWidget* parent = nullptr);

    Effort effort() const;
    int contextTokens() const;  // 0: the model's own
    QString planText() const { return plan_; }

private:
    QString plan_;
    QComboBox* effort_;
    QSpinBox* context_;
};

// The answer index of a "plan:N" link, or -1.
int parse_plan_link(const QString& url);

}  // namespace sl::desktop
