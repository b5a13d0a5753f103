#include "app/desktop/main_window.h"

#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDirIterator>

#include <filesystem>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QSplitter>
#include <QStatusBar>
#include <QtConcurrent>

#include <algorithm>

#include "app/common/byte_args.h"
#include "app/common/version_report.h"
#include "app/desktop/answer_format.h"
#include "app/desktop/budget_dialog.h"
#include "app/desktop/chat_history.h"
#include "app/desktop/chat_pane.h"
#include "app/desktop/disk_usage.h"
#include "app/desktop/document_search.h"
#include "app/desktop/event_loop_probe.h"
#include "app/desktop/ingest_queue.h"
#include "app/desktop/library_answer_service.h"
#include "app/desktop/library_model.h"
#include "app/desktop/library_pane.h"
#include "app/desktop/plan_dialog.h"
#include "app/desktop/model_manager.h"
#include "app/desktop/prefill_gate.h"
#include "app/desktop/report_export.h"
#include "app/desktop/shared_model.h"
#include "app/desktop/viewer_pane.h"
#include "core/util/error.h"
#include "ingest/audio/whisper_speech.h"

namespace sl::desktop {

namespace {

// Tokens a ready document takes in the long context (~4 bytes of text a token, plus the unit
// markers), until the context builder reports exact counts.
// The settings' effort word; an unknown one is medium.
Effort effort_of(const QString& word) {
    try {
        return parse_effort(word.toStdString());
    } catch (const Error&) {
        return Effort::Medium;
    }
}

qint64 estimate_tokens(const doc::Document& d) {
    return static_cast<qint64>(d.text_chars() / 4 + d.units.size() * 8);
}

// The dropped local files. A file URL carries the name's bytes percent-encoded; toLocalFile()
// would decode them as UTF-8 and turn a Latin-1 name into U+FFFD, naming no file. The bytes are
// kept instead, as the command line keeps them (byte_args.h: stray bytes as U+DC80..U+DCFF).
QStringList local_files(const QMimeData* mime) {
    QStringList out;
    if (!mime || !mime->hasUrls()) return out;
    for (const QUrl& u : mime->urls()) {
        if (!u.isLocalFile()) continue;
        const QByteArray bytes = QByteArray::fromPercentEncoding(u.path(QUrl::FullyEncoded).toLatin1());
        out << (bytes.isEmpty() || bytes.contains('\0') ? u.toLocalFile() : decode_arg(bytes.constData()));
    }
    return out;
}

// Whether a path (with byte escapes) is a folder; QFileInfo would not find a name that is not UTF-8.
bool is_dir(const QString& path) {
    std::error_code ec;
    return std::filesystem::is_directory(arg_bytes(path), ec);
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : MainWindow(MainWindowOptions{}, parent) {}

MainWindow::MainWindow(MainWindowOptions options, QWidget* parent) : QMainWindow(parent), options_(std::move(options)) {
    settings_ = std::make_unique<AppSettings>(options_.settings_file);
    build();
}

MainWindow::~MainWindow() {
    // The panes' destructors stop their workers; the queue waits for a running reader.
    queue_->cancelAll();
}

void MainWindow::build() {
    setWindowTitle(QStringLiteral("Sightline"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/sightline.svg")));
    library_ = new LibraryModel(this);
    queue_ = new IngestQueue(library_, this);
    ingest::IngestOptions io = queue_->options();
    io.ocr = settings_->ocr();
    queue_->setOptions(io);
    if (!options_.library_dir.isEmpty()) queue_->setLibraryDir(options_.library_dir.toStdString());
    probe_ = new EventLoopProbe(10, this);
    // Another set of documents: the context kept in memory for the next question is not theirs
    // (and a prefill of theirs starts): its memory goes back now.
    connect(queue_, &IngestQueue::storeChanged, this, [this] {
        if (auto a = answers_.lock()) a->releaseWarm();
    });
    if (!options_.library_dir.isEmpty() && options_.background_prefill &&
        settings_->raw().value(QStringLiteral("prefill/background"), true).toBool()) {
        // On the device the settings choose (read at start: the prefill's session lives as long as it runs).
        PrefillControllerOptions po = options_.prefill;
        po.prefill.device = settings_->device() == Device::Gpu ? "auto" : "cpu";
        po.prefill.device_kv_budget_bytes = settings_->deviceKvBudget();
        po.prefill.kv_budget_bytes = settings_->kvBudget();
        prefill_ = new PrefillController(options_.library_dir.toStdString(), po, this);
        // At startup (the stored library loaded), after each ingest and each removal.
        connect(queue_, &IngestQueue::loaded, prefill_, &PrefillController::libraryChanged);
        connect(queue_, &IngestQueue::storeChanged, prefill_, &PrefillController::libraryChanged);
    }

    library_pane_ = new LibraryPane(library_, queue_, this);
    viewer_ = new ViewerPane(this);
    chat_ = new ChatPane(library_, this);
    splitter_ = new QSplitter(Qt::Horizontal, this);
    splitter_->setObjectName(QStringLiteral("mainSplitter"));
    splitter_->setAccessibleName(tr("Library, viewer and chat; drop files anywhere to add them"));
    splitter_->addWidget(library_pane_);
    splitter_->addWidget(viewer_);
    splitter_->addWidget(chat_);
    splitter_->setStretchFactor(0, 0);
    splitter_->setStretchFactor(1, 3);
    splitter_->setStretchFactor(2, 2);
    splitter_->setSizes({280, 560, 400});
    setCentralWidget(splitter_);
    createMenus();
    createStatusBar();

    // Drops anywhere: children that would take them (text fields) leave them to the window.
    for (QWidget* w : findChildren<QWidget*>()) w->setAcceptDrops(false);
    setAcceptDrops(true);

    connect(library_pane_, &LibraryPane::addRequested, this, &MainWindow::addFilesDialog);
    connect(library_pane_, &LibraryPane::openRequested, this, &MainWindow::openLibraryItem);
    connect(chat_, &ChatPane::citationActivated, this, [this](const Citation& c, int) { openCitation(c); });
    connect(library_, &LibraryModel::stateChanged, this, [this](quint64, ItemState) { updateStatus(); });
    connect(library_, &QAbstractItemModel::rowsRemoved, this, &MainWindow::updateStatus);
    connect(queue_, &IngestQueue::idle, this, [this] { probe_->stop(); });
    if (prefill_) connect(prefill_, &PrefillController::progressChanged, this, &MainWindow::showPrefill);

    connect(chat_, &ChatPane::clearRequested, this, &MainWindow::confirmClearChat);

    applyModel();
    queue_->loadStored();
    restoreChatHistory();
    const QByteArray geometry = settings_->windowGeometry();
    if (geometry.isEmpty() || !restoreGeometry(geometry)) resize(1280, 800);
    restoreState(settings_->windowState());
    statusBar()->showMessage(tr("Drop files or folders on the window, or use File → Add (Ctrl+O)."), 8000);
}

void MainWindow::createMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* add = file->addAction(QIcon(QStringLiteral(":/icons/action-add.svg")), tr("&Add Files…"));
    add->setShortcut(QKeySequence::Open);
    connect(add, &QAction::triggered, this, &MainWindow::addFilesDialog);
    QAction* folder = file->addAction(tr("Add &Folder…"));
    folder->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
    connect(folder, &QAction::triggered, this, &MainWindow::addFolderDialog);
    file->addSeparator();
    QAction* exp = file->addAction(QIcon(QStringLiteral(":/icons/action-export.svg")), tr("&Export Report…"));
    exp->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
    connect(exp, &QAction::triggered, this, &MainWindow::exportDialog);
    QAction* clear = file->addAction(QIcon(QStringLiteral(":/icons/action-remove.svg")), tr("&Clear Chat History…"));
    connect(clear, &QAction::triggered, this, &MainWindow::confirmClearChat);
    QAction* disk = file->addAction(tr("&Disk Use…"));
    disk->setEnabled(!options_.library_dir.isEmpty());
    connect(disk, &QAction::triggered, this, [this] {
        auto* dlg = new DiskDialog(options_.library_dir.toStdString(), settings_->kvCacheCap(),
                                   prefill_ ? prefill_->gate() : nullptr, this);
        dlg->setAttribute(Qt::WA_DeleteOnClose);
        dlg->open();
    });
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"));
    quit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Q));  // QKeySequence::Quit is empty on some platforms
    connect(quit, &QAction::triggered, this, &QWidget::close);

    QMenu* view = menuBar()->addMenu(tr("&View"));
    auto focus = [this, view](const QString& text, const QKeySequence& key, QWidget* target) {
        QAction* a = view->addAction(text);
        a->setShortcut(key);
        connect(a, &QAction::triggered, this, [target] { target->setFocus(Qt::ShortcutFocusReason); });
    };
    focus(tr("&Library"), QKeySequence(Qt::ALT | Qt::Key_1), library_pane_->view());
    focus(tr("&Viewer"), QKeySequence(Qt::ALT | Qt::Key_2), viewer_);
    focus(tr("&Question"), QKeySequence(Qt::CTRL | Qt::Key_L), chat_->questionEdit());

    QMenu* model = menuBar()->addMenu(tr("&Model"));
    QAction* manage = model->addAction(QIcon(QStringLiteral(":/icons/action-model.svg")), tr("&Manage Models…"));
    manage->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_M));
    connect(manage, &QAction::triggered, this, &MainWindow::manageModels);
    QAction* ocr = model->addAction(tr("&OCR Pages Without Text"));
    ocr->setCheckable(true);
    ocr->setChecked(settings_->ocr());
    connect(ocr, &QAction::toggled, this, [this](bool on) {
        settings_->setOcr(on);
        ingest::IngestOptions io = queue_->options();
        io.ocr = on;
        queue_->setOptions(io);
    });

    QAction* cap = model->addAction(tr("Saved &Contexts Size…"));
    connect(cap, &QAction::triggered, this, [this] {
        bool ok = false;
        const double gib = QInputDialog::getDouble(
            this, tr("Saved Contexts Size"),
            tr("Prefilled contexts are kept on disk so that questions restore them instead of reading again.\n"
               "The library's own prefilled context is sized by itself and not counted.\n"
               "Keep at most (GiB; the least recently used go first):"),
            static_cast<double>(settings_->kvCacheCap()) / double(1 << 30), 0.25, 1024.0, 2, &ok);
        if (!ok) return;
        settings_->setKvCacheCap(static_cast<qint64>(gib * double(1 << 30)));
        applyModel();  // the answer service takes the new cap
    });

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    QAction* diag = help->addAction(tr("&Diagnostics"));
    connect(diag, &QAction::triggered, this, &MainWindow::showDiagnostics);
    QAction* about = help->addAction(tr("&About Sightline"));
    connect(about, &QAction::triggered, this, &MainWindow::showAbout);
}

void MainWindow::createStatusBar() {
    model_label_ = new QLabel(this);
    model_label_->setAccessibleName(tr("Model"));
    device_label_ = new QLabel(this);
    device_label_->setAccessibleName(tr("Device"));
    context_label_ = new QLabel(this);
    context_label_->setAccessibleName(tr("Context used and budget"));
    prefill_label_ = new QLabel(this);
    prefill_label_->setObjectName(QStringLiteral("prefillStatus"));
    prefill_label_->setAccessibleName(tr("Background prefill of the library's context"));
    prefill_label_->setVisible(false);
    effort_ = new QComboBox(this);
    effort_->setAccessibleName(tr("Effort"));
    effort_->setToolTip(tr("Effort: how many blocks of the context each step attends to and how long answers are"));
    effort_->addItem(tr("Effort: low"), QStringLiteral("low"));
    effort_->addItem(tr("Effort: medium"), QStringLiteral("medium"));
    effort_->addItem(tr("Effort: high"), QStringLiteral("high"));
    for (int i = 0; i < effort_->count(); ++i)  // what each level spends: top-k blocks, frames, answer length
        effort_->setItemData(i, QString::fromStdString(describe(effort_settings(effort_of(effort_->itemData(i).toString())))),
                             Qt::ToolTipRole);
    effort_->setCurrentIndex(std::max(0, effort_->findData(settings_->effort())));
    // The "context plan" link under an answer: its plan, and the effort and context for what follows.
    connect(chat_, &ChatPane::answerFinished, this, [this](int index) {
        const std::string& d = chat_->answers()[static_cast<size_t>(index)].device;
        if (d.empty()) return;
        last_device_ = QString::fromStdString(d);
        updateStatus();
    });
    connect(chat_, &ChatPane::planRequested, this, [this](int index) {
        auto* dlg = new PlanDialog(chat_->answers()[static_cast<size_t>(index)], chat_->effort(), settings_->answerContext(),
                                   model_context_, this);
        dlg->setAttribute(Qt::WA_DeleteOnClose);
        connect(dlg, &QDialog::accepted, this, [this, dlg] {
            effort_->setCurrentIndex(std::max(0, effort_->findData(QString::fromLatin1(to_string(dlg->effort())))));
            if (dlg->contextTokens() != settings_->answerContext()) {
                settings_->setAnswerContext(dlg->contextTokens());
                applyModel();  // the answer service takes the new context size
            }
        });
        dlg->open();
    });
    connect(effort_, &QComboBox::currentIndexChanged, this, [this] {
        settings_->setEffort(effort_->currentData().toString());
        chat_->setEffort(effort_of(settings_->effort()));
    });
    chat_->setEffort(effort_of(settings_->effort()));
    statusBar()->addPermanentWidget(model_label_);
    statusBar()->addPermanentWidget(device_label_);
    statusBar()->addPermanentWidget(context_label_);
    statusBar()->addPermanentWidget(prefill_label_);
    statusBar()->addPermanentWidget(effort_);
}

void MainWindow::applyModel() {
    // Speech settings for the media added from now on (ingest reads them when it transcribes).
    ingest::WhisperSpeech::set_settings(settings_->speechModel().toStdString(), settings_->speechCompute().toStdString());
    const QString path = settings_->modelPath();
    const bool exists = QFileInfo::exists(path);
    if (!exists) model_.reset();
    else if (!model_ || model_->path() != std::filesystem::path(path.toStdString()))
        model_ = std::make_shared<SharedModel>(path.toStdString());  // loaded on first use, on a worker
    std::shared_ptr<AskService> service;
    QString unavailable;
    answers_.reset();
    if (options_.service) {
        service = options_.service;
    } else if (!exists) {
        unavailable = tr("no model is loaded; choose one in Model → Manage models");
    } else if (options_.library_dir.isEmpty()) {
        unavailable = tr("answers need the library store, and there is none (no home folder to keep it in)");
    } else {
        // The library's long context with MSA citations (sl::ask), from the background prefill
        // when it has one.
        LibraryAnswerOptions lo;
        lo.kv_cap_bytes = settings_->kvCacheCap();
        lo.n_ctx = settings_->answerContext();
        lo.temperature = static_cast<float>(settings_->temperature());
        lo.threads = settings_->threads();
        lo.device = settings_->device() == Device::Gpu ? "auto" : "cpu";
        lo.device_kv_budget_bytes = settings_->deviceKvBudget();
        lo.kv_budget_bytes = settings_->kvBudget();
        lo.engine_url = settings_->remoteEngineUrl().toStdString();
        lo.mmproj_path = settings_->visionTowerPath().toStdString();
        lo.engine_model = settings_->remoteEngineModel().toStdString();
        lo.api_key = settings_->remoteApiKey().toStdString();
        auto answers = std::make_shared<LibraryAnswerService>(options_.library_dir.toStdString(), model_, lo);
        answers_ = answers;
        service = std::move(answers);
    }
    // The prefill stands still while a question is answered (the CPU is the bottleneck).
    if (service && prefill_) service = std::make_shared<PausingAnswerService>(service, prefill_->gate());
    chat_->setService(service, unavailable);
    if (prefill_) prefill_->setModel(model_);
    model_context_ = 0;
    const QString engine = settings_->remoteEngineUrl();
    model_label_->setText(!engine.isEmpty() && exists ? tr("Model: remote (%1)").arg(engine)
                          : exists                  ? tr("Model: %1").arg(QFileInfo(path).completeBaseName())
                                                    : tr("Model: none (Ctrl+M)"));
    model_label_->setToolTip(path);
    // The context length the model was trained on, read off the GUI thread.
    auto* w = new QFutureWatcher<ModelInfo>(this);
    connect(w, &QFutureWatcherBase::finished, this, [this, w] {
        w->deleteLater();
        model_context_ = w->result().context_train;
        updateStatus();
    });
    w->setFuture(QtConcurrent::run(read_model_info, path));
    updateStatus();
}

QString MainWindow::statusModelText() const { return model_label_->text() + QStringLiteral(" · ") + device_label_->text(); }
QString MainWindow::statusContextText() const { return context_label_->text(); }
QString MainWindow::statusPrefillText() const { return prefill_label_->text(); }

void MainWindow::showPrefill(const PrefillProgress& p) {
    const QString text = prefill_status_text(p);
    prefill_label_->setText(text);
    prefill_label_->setVisible(!text.isEmpty());
    QStringList tip;
    if (p.state == PrefillState::Prefilling && p.tokens_per_second > 0)
        tip << tr("%1 tokens per second").arg(p.tokens_per_second, 0, 'f', 0);
    if (p.resumed_from > 0) tip << tr("resumed from %1 saved tokens").arg(QLocale().toString(p.resumed_from));
    if (p.documents > 0) tip << tr("%n document(s)", nullptr, p.documents);
    if (!p.file.isEmpty()) tip << p.file;
    prefill_label_->setToolTip(tr("The library's context is prefilled in the background and saved as it goes; "
                                  "questions asked before it finishes read what is prefilled so far.") +
                               (tip.isEmpty() ? QString() : QStringLiteral("\n") + tip.join(QStringLiteral(" · "))));
    prefill_label_->setStyleSheet(p.state == PrefillState::Failed ? QStringLiteral("color: #c0392b;") : QString());
}

void MainWindow::updateStatus() {
    const bool gpu = settings_->device() == Device::Gpu;
    // Where the last answer ran and why (Session::device_reason): with the GPU chosen, an answer
    // runs there when the device can do what it needs (MSA and saved contexts run on the CPU for
    // now, and the reason says so).
    const bool ran_on_gpu = last_device_.startsWith(QLatin1String("CUDA"));
    device_label_->setText(ran_on_gpu ? tr("Device: GPU") : gpu ? tr("Device: CPU (GPU selected)") : tr("Device: CPU"));
    device_label_->setToolTip(!last_device_.isEmpty() ? tr("Last answer: %1").arg(last_device_)
                              : gpu ? tr("The GPU is selected; answers use it where the engine can run there")
                                    : QString());
    qint64 used = 0;
    for (const auto& d : library_->readyDocuments()) used += estimate_tokens(*d);
    const qint64 budget = settings_->contextBudget();
    QString text = tr("Context: %1 / %2 tokens").arg(QLocale().toString(used), QLocale().toString(budget));
    context_label_->setText(text);
    context_label_->setToolTip(model_context_ > 0 ? tr("The model was trained on %1-token contexts; the library's "
                                                       "long context is attended sparsely (MSA).")
                                                        .arg(QLocale().toString(model_context_))
                                                  : QString());
}

void MainWindow::addPaths(const QStringList& paths) {
    QStringList files;
    last_skipped_.clear();
    for (const QString& p : paths) {
        const QFileInfo fi(p);
        if (is_dir(p)) {
            // Walked by bytes: names that are not UTF-8 stay findable (byte escapes).
            QStringList inside;
            std::error_code ec;
            const std::filesystem::path root = arg_bytes(fi.absoluteFilePath());
            for (auto it = std::filesystem::recursive_directory_iterator(
                     root, std::filesystem::directory_options::skip_permission_denied, ec);
                 !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
                std::error_code fe;
                if (!it->is_regular_file(fe)) continue;
                const QString f = decode_arg(it->path().c_str());
                if (guess_kind(f) != FileKind::Unknown) {
                    inside << f;
                    continue;
                }
                const QString shown = fi.fileName() + QLatin1Char('/') +
                                      decode_arg(it->path().lexically_relative(root).c_str());
                const QString ext = QFileInfo(f).suffix().toLower();
                last_skipped_ << (ext.isEmpty() ? tr("%1: no extension, not a format Sightline reads").arg(shown)
                                                : tr("%1: not a format Sightline reads (.%2)").arg(shown, ext));
            }
            if (ec) last_skipped_ << tr("%1: %2").arg(fi.fileName(), QString::fromStdString(ec.message()));
            inside.sort();
            files << inside;
        } else {
            files << fi.absoluteFilePath();  // unknown kinds too: the reader says why it fails
        }
    }
    last_skipped_.sort();
    if (!last_skipped_.isEmpty()) {
        // The first few by name, the rest counted (lastSkipped() has them all).
        QStringList names;
        for (qsizetype i = 0; i < last_skipped_.size() && i < 3; ++i)
            names << last_skipped_[i].section(QLatin1Char(':'), 0, 0);
        QString msg = (last_skipped_.size() == 1 ? tr("Skipped 1 file Sightline does not read: ")
                                                  : tr("Skipped %1 files Sightline does not read: ").arg(last_skipped_.size())) +
                      names.join(QStringLiteral(", "));
        if (last_skipped_.size() > 3) msg += tr(" and %1 more").arg(last_skipped_.size() - 3);
        statusBar()->showMessage(msg, 15000);
    }
    if (files.isEmpty()) {
        if (last_skipped_.isEmpty())
            statusBar()->showMessage(tr("Nothing to add: no documents, decks, images or media there."), 5000);
        return;
    }
    QList<quint64> ids;
    for (const QString& f : files) ids << library_->add(f);
    const double fpm = queue_->options().max_frames_per_minute;
    if (!settings_->confirmHeavyIngest()) {
        enqueueAll(ids, fpm);
        return;
    }
    // Probe the files (page counts, durations) off the GUI thread, then ask when it is heavy.
    qint64 used = 0;
    for (const auto& d : library_->readyDocuments()) used += estimate_tokens(*d);
    auto* w = new QFutureWatcher<BudgetPlan>(this);
    connect(w, &QFutureWatcherBase::finished, this, [this, w, ids, fpm] {
        w->deleteLater();
        const BudgetPlan plan = w->result();
        if (!plan.heavy && plan.total_tokens <= plan.budget) {
            enqueueAll(ids, fpm);
            return;
        }
        auto* dlg = new BudgetDialog(plan, this);
        dlg->setAttribute(Qt::WA_DeleteOnClose);
        connect(dlg, &QDialog::finished, this, [this, dlg, ids, plan](int result) {
            if (dlg->dontAskAgain()) settings_->setConfirmHeavyIngest(false);
            if (result == QDialog::Accepted) {
                enqueueAll(ids, plan.frames_per_minute);
            } else {
                for (quint64 id : ids) library_->remove(id);
            }
        });
        dlg->open();
    });
    w->setFuture(QtConcurrent::run(plan_budget, files, settings_->contextBudget(), fpm, used));
}

void MainWindow::enqueueAll(const QList<quint64>& ids, double frames_per_minute) {
    ingest::IngestOptions io = queue_->options();
    io.max_frames_per_minute = frames_per_minute;
    queue_->setOptions(io);
    probe_->start();
    for (quint64 id : ids) queue_->enqueue(id);
}

void MainWindow::addFilesDialog() {
    const QStringList files = QFileDialog::getOpenFileNames(
        this, tr("Add files"), settings_->lastDirectory(),
        tr("Documents and media (*.pdf *.pptx *.docx *.txt *.md *.markdown *.html *.htm *.xhtml *.epub *.png *.jpg "
           "*.jpeg *.webp *.tif *.tiff *.bmp *.gif *.mp4 *.mkv *.webm *.avi *.mov *.m4v *.wav *.mp3 *.flac *.ogg "
           "*.m4a *.opus);;All files (*)"));
    if (files.isEmpty()) return;
    settings_->setLastDirectory(QFileInfo(files.front()).absolutePath());
    addPaths(files);
}

void MainWindow::addFolderDialog() {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Add a folder"), settings_->lastDirectory());
    if (dir.isEmpty()) return;
    settings_->setLastDirectory(dir);
    addPaths({dir});
}

void MainWindow::exportDialog() {
    if (chat_->answers().empty()) {
        statusBar()->showMessage(tr("Nothing to export yet: ask a question first."), 5000);
        return;
    }
    QString filter;
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export report"), QDir(settings_->lastDirectory()).filePath(QStringLiteral("sightline-report.md")),
        tr("Markdown (*.md);;HTML (*.html);;PDF (*.pdf)"), &filter);
    if (path.isEmpty()) return;
    exportReport(path);
}

void MainWindow::exportReport(const QString& path) {
    ReportInput in;
    in.answers = chat_->answers();
    in.documents = library_->readyDocuments();
    const ReportFormat format = report_format_for(path);
    auto* w = new QFutureWatcher<QString>(this);
    connect(w, &QFutureWatcherBase::finished, this, [this, w, path] {
        w->deleteLater();
        const QString error = w->result();
        if (error.isEmpty()) statusBar()->showMessage(tr("Report written to %1").arg(path), 8000);
        else showError(tr("Export report"), error);
        Q_EMIT reportWritten(path, error);
    });
    // Runs on a worker thread: renders cited pages and writes the file.
    w->setFuture(QtConcurrent::run([path, format, in]() -> QString {
        try {
            write_report(path, format, in);
            return {};
        } catch (const std::exception& e) {
            return QString::fromUtf8(e.what());
        }
    }));
}

void MainWindow::cancelWork() {
    chat_->stop();
    if (prefill_) prefill_->pause();  // holds the gate: the running chunk is cancelled
    queue_->cancelAll();
}

void MainWindow::restoreChatHistory() {
    if (options_.library_dir.isEmpty()) return;
    auto* w = new QFutureWatcher<ChatHistory>(this);
    connect(w, &QFutureWatcherBase::finished, this, [this, w] {
        w->deleteLater();
        if (history_ != w) return;  // cleared meanwhile
        history_ = nullptr;
        ChatHistory h = w->result();
        const int n = static_cast<int>(h.answers.size());
        chat_->restoreAnswers(std::move(h.answers));
        if (!h.error.isEmpty())
            statusBar()->showMessage(tr("Cannot read the chat history: %1").arg(h.error), 8000);
        else if (h.skipped > 0)
            statusBar()->showMessage(tr("%n earlier answer(s) could not be read and are not shown.", nullptr, h.skipped), 8000);
        Q_EMIT chatHistoryRestored(n);
    });
    history_ = w;
    // Runs on a worker thread: reads the library's chats table.
    const std::filesystem::path dir = options_.library_dir.toStdString();
    w->setFuture(QtConcurrent::run([dir] { return load_chat_history(dir); }));
}

void MainWindow::confirmClearChat() {
    if (chat_->answers().empty()) return;
    if (chat_->busy()) {
        statusBar()->showMessage(tr("Stop the answer first (Esc), then clear the chat."), 5000);
        return;
    }
    auto* box = new QMessageBox(QMessageBox::Question, tr("Clear Chat History"),
                                tr("Remove all %n answer(s) from the chat and from the library? Reports already "
                                   "exported are kept.", nullptr, static_cast<int>(chat_->answers().size())),
                                QMessageBox::Yes | QMessageBox::Cancel, this);
    box->setDefaultButton(QMessageBox::Cancel);
    box->setAttribute(Qt::WA_DeleteOnClose);
    connect(box, &QMessageBox::finished, this, [this, box] {
        if (box->clickedButton() == box->button(QMessageBox::Yes)) clearChatHistory();
    });
    box->open();
}

void MainWindow::clearChatHistory() {
    if (!chat_->clearAnswers()) {
        Q_EMIT chatHistoryCleared(tr("an answer is running"));
        return;
    }
    history_ = nullptr;  // a restore still on its way is dropped
    if (options_.library_dir.isEmpty()) {
        Q_EMIT chatHistoryCleared({});
        return;
    }
    auto* w = new QFutureWatcher<QString>(this);
    connect(w, &QFutureWatcherBase::finished, this, [this, w] {
        w->deleteLater();
        const QString error = w->result();
        if (error.isEmpty()) statusBar()->showMessage(tr("Chat history cleared."), 5000);
        else showError(tr("Clear Chat History"), error);
        Q_EMIT chatHistoryCleared(error);
    });
    // Runs on a worker thread: deletes the library's chats.
    const std::filesystem::path dir = options_.library_dir.toStdString();
    w->setFuture(QtConcurrent::run([dir] { return clear_chat_history(dir); }));
}

void MainWindow::openCitation(const Citation& c) {
    auto d = library_->documentById(c.ref.document);
    if (!d) {
        showError(tr("Citation"), tr("%1 is no longer in the library.").arg(QString::fromStdString(c.locator)));
        return;
    }
    std::vector<TimelineMarker> markers;
    for (const auto& a : chat_->answers())
        for (const auto& other : a.answer.citations)
            if (other.ref.document == c.ref.document && other.ref.time)
                markers.push_back({other.ref.time->t0, QStringLiteral("[%1] %2").arg(other.number).arg(citation_place(other))});
    // A PDF citation lights up the lines its snippet quotes within the cited region, not the whole
    // region (document_search.h); the region when no line matches.
    doc::SourceRef ref = c.ref;
    if (c.kind == doc::DocumentKind::Pdf && ref.bbox && ref.unit >= 0 && ref.unit < static_cast<int>(d->units.size()))
        if (auto lines = cited_lines(d->units[static_cast<size_t>(ref.unit)], *ref.bbox, c.snippet)) ref.bbox = lines;
    viewer_->open(d, ref, std::move(markers));
}

void MainWindow::openLibraryItem(quint64 id) {
    const LibraryItem* it = library_->item(id);
    if (!it) return;
    if (it->state == ItemState::Failed) {
        showError(tr("Cannot read %1").arg(it->name), it->error);
        return;
    }
    if (it->document) viewer_->open(it->document, doc::SourceRef{it->document->id, 0, std::nullopt, std::nullopt});
}

void MainWindow::manageModels() {
    auto* dlg = new ModelManagerDialog(settings_.get(), this);
    dlg->setAttribute(Qt::WA_DeleteOnClose);
    connect(dlg, &QDialog::accepted, this, &MainWindow::applyModel);
    dlg->open();
}

void MainWindow::showError(const QString& title, const QString& text) {
    auto* box = new QMessageBox(QMessageBox::Warning, title, text, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

void MainWindow::showAbout() {
    const std::string text = app::format_version_report(app::version_report());
    QMessageBox box(this);
    box.setWindowTitle(tr("About Sightline"));
    box.setIconPixmap(QIcon(QStringLiteral(":/icons/sightline.svg")).pixmap(64, 64));
    box.setText(tr("Sightline reads your documents and videos locally and answers with citations."));
    box.setDetailedText(QString::fromStdString(text));
    box.exec();
}

void MainWindow::showDiagnostics() {
    QMessageBox::information(this, tr("Diagnostics"),
                             tr("Event loop during the last ingest: %1 ticks, worst delay %2 ms, 99th percentile %3 ms.")
                                 .arg(probe_->ticks())
                                 .arg(probe_->maxDelayMs(), 0, 'f', 1)
                                 .arg(probe_->percentileDelayMs(99), 0, 'f', 1));
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
    const QStringList files = local_files(event->mimeData());
    if (files.isEmpty()) return;
    event->acceptProposedAction();
    // The drop zone: the whole window, saying what a drop does.
    if (!drop_zone_) {
        drop_zone_ = new QLabel(this);
        drop_zone_->setObjectName(QStringLiteral("dropZone"));
        drop_zone_->setAccessibleName(tr("Drop zone"));
        drop_zone_->setAlignment(Qt::AlignCenter);
        drop_zone_->setWordWrap(true);
        drop_zone_->setAttribute(Qt::WA_TransparentForMouseEvents);
        drop_zone_->setStyleSheet(QStringLiteral("QLabel#dropZone { background: rgba(52, 120, 246, 40); border: 3px dashed "
                                                 "rgba(52, 120, 246, 200); border-radius: 12px; font-size: 20px; }"));
    }
    drop_zone_->setText(tr("Drop to add %n item(s) to the library", nullptr, static_cast<int>(files.size())));
    drop_zone_->setGeometry(rect().adjusted(12, 12, -12, -12));
    drop_zone_->raise();
    drop_zone_->show();
}

void MainWindow::dragLeaveEvent(QDragLeaveEvent* event) {
    if (drop_zone_) drop_zone_->hide();
    QMainWindow::dragLeaveEvent(event);
}

void MainWindow::dragMoveEvent(QDragMoveEvent* event) {
    if (!local_files(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
    if (drop_zone_) drop_zone_->hide();
    const QStringList files = local_files(event->mimeData());
    if (files.isEmpty()) return;
    event->acceptProposedAction();
    addPaths(files);
}

void MainWindow::closeEvent(QCloseEvent* event) {
    settings_->setWindowGeometry(saveGeometry());
    settings_->setWindowState(saveState());
    settings_->sync();
    QMainWindow::closeEvent(event);
}

void MainWindow::changeEvent(QEvent* event) {
    QMainWindow::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) updateStatus();
}

}  // namespace sl::desktop
