// The app's persistent settings (QSettings): the model, the device, a remote engine, the effort, OCR, speech, the budget,
// the saved contexts' size cap and whether to confirm heavy ingest. One instance per window; GUI thread only.
#pragma once

#include <QSettings>
#include <QString>

#include <memory>

namespace sl::desktop {

enum class Device { Cpu, Gpu };

class AppSettings {
public:
    // `file` empty: the platform's default (~/.config/Sightline/Sightline.conf); else that INI file.
    explicit AppSettings(const QString& file = {});

    QString modelPath() const;                 // default: the model scripts/setup.sh fetches
    void setModelPath(const QString& path);
    // The model's vision tower (an mmproj GGUF; empty: none, visuals are read as their OCR text).
    QString visionTowerPath() const;
    void setVisionTowerPath(const QString& path);
    Device device() const;
    void setDevice(Device d);
    // On the GPU: bytes of the context's K/V kept in GPU memory, the rest in pinned host memory
    // (AskOptions::device_kv_budget_bytes); 0 (the default, and what nonsense reads as): all of it.
    qint64 deviceKvBudget() const;
    void setDeviceKvBudget(qint64 bytes);
    // Host RAM for the context's K/V pages (AskOptions::kv_budget_bytes), the rest read from the
    // memory-mapped saved context or a spill file — on the GPU it also bounds the pinned host tier;
    // 0 (the default, and what nonsense reads as): no bound.
    qint64 kvBudget() const;
    void setKvBudget(qint64 bytes);
    QString effort() const;                    // "low", "medium", "high"
    void setEffort(const QString& e);
    int answerContext() const;                 // tokens a question's context may hold (0: the model's own)
    void setAnswerContext(int tokens);
    double temperature() const;                // answers' sampling temperature, 0 (greedy, the default) .. 2
    void setTemperature(double t);
    int threads() const;                       // the engine's threads (0: all cores)
    void setThreads(int n);
    bool ocr() const;
    void setOcr(bool on);
    // Speech in media files: the Whisper model folder (empty: $SIGHTLINE_WHISPER_MODEL or the
    // default tiny.en) and its arithmetic ("default", "q8", "float32", "int8":
    // ingest/audio/whisper_speech.h; anything else reads as "default").
    QString speechModel() const;
    void setSpeechModel(const QString& dir);
    QString speechCompute() const;
    void setSpeechCompute(const QString& compute);
    qint64 contextBudget() const;              // tokens the library may fill (default 1,000,000)
    void setContextBudget(qint64 tokens);
    qint64 kvCacheCap() const;                 // bytes the library's saved contexts (kv/) may take (default 2 GiB)
    void setKvCacheCap(qint64 bytes);
    // A remote OpenAI-compatible engine for answers (core/ask/remote_ask.h): its URL (empty: the
    // local model answers), the model there (empty: the server's first) and the API key (empty:
    // $SIGHTLINE_API_KEY). The key stays in these settings only: never in the library or logs.
    QString remoteEngineUrl() const;
    void setRemoteEngineUrl(const QString& url);
    QString remoteEngineModel() const;
    void setRemoteEngineModel(const QString& model);
    QByteArray remoteApiKey() const;
    void setRemoteApiKey(const QByteArray& key);
    bool confirmHeavyIngest() const;           // show the budget dialog before big ingests
    void setConfirmHeavyIngest(bool on);
    QString lastDirectory() const;
    void setLastDirectory(const QString& dir);
    QByteArray windowGeometry() const;
    void setWindowGeometry(const QByteArray& g);
    QByteArray windowState() const;
    void setWindowState(const QByteArray& s);

    QSettings& raw() { return *settings_; }
    void sync() { settings_->sync(); }

private:
    std::unique_ptr<QSettings> settings_;
};

}  // namespace sl::desktop
