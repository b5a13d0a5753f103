// The Sightline main window: the library (left), the viewer (centre) and the chat (right), a
// status bar (model, device, context used / budget, the background prefill's progress, effort), menus with shortcuts, drops of files
// and folders anywhere on the window, the model manager, the budget dialog and report export.
// Lives on the GUI thread; every method runs there. Ingest, answers, page renders, budget probes
// and report writing run on worker threads (QtConcurrent) and come back through watchers.
#pragma once

#include <QFutureWatcher>
#include <QMainWindow>
#include <QStringList>

#include <memory>

#include "app/desktop/app_settings.h"
#include "app/desktop/ask_service.h"
#include "app/desktop/prefill_controller.h"

class QComboBox;
class QLabel;
class QSplitter;

namespace sl::desktop {

class ChatPane;
class EventLoopProbe;
class IngestQueue;
class LibraryAnswerService;
class LibraryModel;
class LibraryPane;
class SharedModel;
class ViewerPane;

struct MainWindowOptions {
    QString settings_file;                   // empty: the platform's default QSettings
    // null: the library's own (LibraryAnswerService on the settings' model; see applyModel)
    std::shared_ptr<AskService> service;
    // The library store (sl::Library); empty: none (documents are read but not kept, and the
    // chat cannot answer unless `service` is given).
    QString library_dir;
    // Prefill the library's context in the background (prefill_controller.h) with the settings'
    // model; needs library_dir. The setting "prefill/background" (default true) can turn it off.
    bool background_prefill = true;
    PrefillControllerOptions prefill;        // its context size, save interval, report interval
};

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(QWidget* parent = nullptr);
    explicit MainWindow(MainWindowOptions options, QWidget* parent = nullptr);
    ~MainWindow() override;

    // Adds files, and the readable files inside folders (recursively); shows the budget dialog
    // first when the addition is heavy and the settings ask for it. Files of a folder in formats
    // Sightline does not read are left out and said in the status bar (lastSkipped() lists them:
    // "folder/name: why").
    void addPaths(const QStringList& paths);
    const QStringList& lastSkipped() const { return last_skipped_; }
    // Writes the chat as a report (format by extension); reportWritten() says how it went.
    void exportReport(const QString& path);
    // Opens a citation in the viewer (what clicking it in the chat does).
    void openCitation(const Citation& citation);
    // Empties the chat and removes its history from the library (File → Clear Chat History asks
    // first, then calls this); chatHistoryCleared() says how it went.
    void clearChatHistory();
    // Quitting: stops the answer, the background prefill and the ingest queue without waiting
    // for them (the destructor waits).
    void cancelWork();

    LibraryModel* library() const { return library_; }
    IngestQueue* ingestQueue() const { return queue_; }
    // The library's answer service when it is the one in use (null: another, or none).
    std::shared_ptr<LibraryAnswerService> libraryAnswers() const { return answers_.lock(); }
    LibraryPane* libraryPane() const { return library_pane_; }
    ViewerPane* viewer() const { return viewer_; }
    ChatPane* chat() const { return chat_; }
    AppSettings* settings() const { return settings_.get(); }
    EventLoopProbe* probe() const { return probe_; }
    PrefillController* prefill() const { return prefill_; }  // null without a library or when off
    QString statusModelText() const;
    QString statusContextText() const;
    QString statusPrefillText() const;  // "Context: prefilled 31,744 / 78,379 tokens (40%) · ETA 12:30"; empty when idle

Q_SIGNALS:
    void reportWritten(const QString& path, const QString& error);  // error empty on success
    // The library's earlier chats are in the chat (read on a worker at start-up).
    void chatHistoryRestored(int answers);
    void chatHistoryCleared(const QString& error);  // error empty on success

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dragMoveEvent(QDragMoveEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void dragLeaveEvent(QDragLeaveEvent* event) override;
    void closeEvent(QCloseEvent* event) override;
    void changeEvent(QEvent* event) override;

private:
    void build();
    void createMenus();
    void createStatusBar();
    void addFilesDialog();
    void addFolderDialog();
    void exportDialog();
    void manageModels();
    void showAbout();
    void showDiagnostics();
    void showError(const QString& title, const QString& text);
    void enqueueAll(const QList<quint64>& ids, double frames_per_minute);
    void applyModel();
    void updateStatus();
    void openLibraryItem(quint64 id);
    void showPrefill(const PrefillProgress& progress);
    void restoreChatHistory();
    void confirmClearChat();

    MainWindowOptions options_;
    std::unique_ptr<AppSettings> settings_;
    LibraryModel* library_ = nullptr;
    QStringList last_skipped_;  // of the last addPaths()
    IngestQueue* queue_ = nullptr;
    LibraryPane* library_pane_ = nullptr;
    ViewerPane* viewer_ = nullptr;
    ChatPane* chat_ = nullptr;
    QSplitter* splitter_ = nullptr;
    EventLoopProbe* probe_ = nullptr;
    QLabel* model_label_ = nullptr;
    QLabel* device_label_ = nullptr;
    QString last_device_;  // the last answer's ChatAnswer::device
    QLabel* context_label_ = nullptr;
    QLabel* prefill_label_ = nullptr;
    PrefillController* prefill_ = nullptr;
    std::shared_ptr<SharedModel> model_;  // the settings' model, shared by the answer service and the prefill
    // The library's answer service while it is the one in use: its warm session (the library
    // prefill kept between questions) is released when the library's documents change.
    std::weak_ptr<LibraryAnswerService> answers_;
    QComboBox* effort_ = nullptr;
    QObject* history_ = nullptr;  // the watcher of the chat history being read, if any
    QLabel* drop_zone_ = nullptr;  // shown over the window while files are dragged over it
    int model_context_ = 0;  // the model's trained context (tokens), 0 when unknown
};

}  // namespace sl::desktop
