// Model → Manage models: the model in use (the default one preselected), open any GGUF file, its
// metadata (architecture, layers, heads, context, tensor types, chat template), its vision tower
// (an mmproj file: the visuals then enter answers as image tokens), speech (the Whisper model folder
// and its trade of speed and accuracy, for media added afterwards) and the device
// (CPU, or the GPU when a CUDA device is usable); and a remote engine (an OpenAI-compatible
// server's URL, its model and API key) that answers instead of the local model when set. Reading a file's metadata runs on a worker;
// widgets are touched on the GUI thread only.
#pragma once

#include <QDialog>
#include <QFutureWatcher>

#include <utility>
#include <vector>

#include "app/desktop/app_settings.h"

class QComboBox;
class QDoubleSpinBox;
class QSpinBox;
class QLabel;
class QLineEdit;
class QTableWidget;

namespace sl::desktop {

struct ModelInfo {
    QString path;
    QString error;                                    // non-empty when the file cannot be used
    std::vector<std::pair<QString, QString>> fields;  // (name, value) for the table
    QString summary;                                  // "SmolLM2 · llama · 30 layers · Q4_1"
    int context_train = 0;                            // trained context length (tokens)
};

// Reads a GGUF file's metadata. Thread-safe; never throws (errors land in ModelInfo::error).
ModelInfo read_model_info(const QString& path);

// Whether a CUDA device is usable, and a line saying why not (probes the driver once).
std::pair<bool, QString> gpu_status();

class ModelManagerDialog : public QDialog {
    Q_OBJECT

public:
    ModelManagerDialog(AppSettings* settings, QWidget* parent = nullptr);

    QString modelPath() const;
    Device device() const;
    // GPU memory for the context's K/V (AppSettings::deviceKvBudget; 0: all of it), chosen among
    // 2..64 GiB; a value not in the list is added to it.
    qint64 deviceKvBudget() const;
    void setDeviceKvBudget(qint64 bytes);
    // Host RAM for the context's K/V (AppSettings::kvBudget; 0: no bound), chosen among 1..32 GiB;
    // a value not in the list is added to it.
    qint64 kvBudget() const;
    void setKvBudget(qint64 bytes);
    QString engineUrl() const;
    QString visionTowerPath() const;
    void setVisionTowerPath(const QString& path);
    void setEngine(const QString& url, const QString& model, const QString& key);
    void setSampling(double temperature, int threads);
    // Speech in media files: the Whisper model folder (empty: the default) and its arithmetic
    // ("default", "q8", "float32", "int8").
    void setSpeech(const QString& model_dir, const QString& compute);
    const ModelInfo& info() const { return info_; }
    void loadInfo(const QString& path);  // asynchronous; infoLoaded() when done

    void accept() override;  // saves the model and device

Q_SIGNALS:
    void infoLoaded();

private:
    void browse();
    void showInfo(const ModelInfo& info);

    AppSettings* settings_;
    ModelInfo info_;
    QLineEdit* path_;
    QLabel* summary_;
    QTableWidget* table_;
    QComboBox* device_;
    QComboBox* device_kv_ = nullptr;
    QComboBox* host_kv_ = nullptr;
    QLineEdit* mmproj_ = nullptr;
    QLineEdit* speech_model_ = nullptr;
    QComboBox* speech_compute_ = nullptr;
    QLineEdit* engine_url_;
    QLineEdit* engine_model_;
    QLineEdit* engine_key_;
    QDoubleSpinBox* temperature_;
    QSpinBox* threads_;
    QFutureWatcher<ModelInfo>* watcher_ = nullptr;
};

}  // namespace sl::desktop
