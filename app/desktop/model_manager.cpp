#include "app/desktop/model_manager.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTableWidget>
#include <QThread>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent>

#include <algorithm>
#include <map>

#include "app/common/version_report.h"
#include "core/gguf/gguf_reader.h"
#include "core/model/model_loader.h"
#include "core/util/paths.h"
#include "kernels/cpu/tensor_types.h"

namespace sl::desktop {

ModelInfo read_model_info(const QString& path) {
    ModelInfo info;
    info.path = path;
    try {
        const GgufFile f = GgufFile::open(path.toStdString());
        auto add = [&info](const QString& k, const QString& v) { info.fields.emplace_back(k, v); };
        const QString name = f.get_string("general.name") ? QString::fromStdString(std::string(*f.get_string("general.name")))
                                                          : QFileInfo(path).completeBaseName();
        add(QObject::tr("Name"), name);
        add(QObject::tr("File"), path);
        add(QObject::tr("Size"), QStringLiteral("%1 MiB").arg(static_cast<double>(f.file_size()) / 1048576.0, 0, 'f', 1));
        add(QObject::tr("GGUF version"), QString::number(f.version()));
        add(QObject::tr("Architecture"), QString::fromStdString(std::string(f.architecture())));
        std::map<std::string, size_t> types;
        for (const auto& t : f.tensors()) {
            const auto ti = kernels::tensor_type_info(t.type);
            ++types[ti.name ? ti.name : "type " + std::to_string(t.type)];
        }
        QStringList tt;
        for (const auto& [n, count] : types) tt << QStringLiteral("%1 × %2").arg(QString::fromStdString(n)).arg(count);
        add(QObject::tr("Tensors"), QStringLiteral("%1 (%2)").arg(f.tensors().size()).arg(tt.join(QStringLiteral(", "))));
        QString main_type;
        size_t most = 0;
        for (const auto& [n, count] : types)
            if (count > most && n != "f32") most = count, main_type = QString::fromStdString(n).toUpper();
        try {
            const LlamaConfig c = read_llama_config(f);
            add(QObject::tr("Layers"), QString::number(c.n_layer));
            add(QObject::tr("Model width"), QString::number(c.d_model));
            add(QObject::tr("Heads (query / key-value)"), QStringLiteral("%1 / %2, dim %3").arg(c.n_head).arg(c.n_kv_head).arg(c.head_dim));
            add(QObject::tr("Vocabulary"), QString::number(c.n_vocab));
            add(QObject::tr("Trained context"), QObject::tr("%1 tokens").arg(c.n_ctx_train));
            add(QObject::tr("RoPE base"), QString::number(static_cast<double>(c.rope_base)));
            info.context_train = c.n_ctx_train;
            info.summary = QStringLiteral("%1 · %2 · %3 layers · %4").arg(name, QString::fromStdString(c.arch)).arg(c.n_layer).arg(main_type);
        } catch (const std::exception& e) {
            info.error = QString::fromUtf8(e.what());
        }
        add(QObject::tr("Chat template"), f.get_string("tokenizer.chat_template") ? QObject::tr("yes") : QObject::tr("no (plain prompts)"));
    } catch (const std::exception& e) {
        info.error = QString::fromUtf8(e.what());
    }
    if (info.summary.isEmpty()) info.summary = QFileInfo(path).fileName();
    return info;
}

std::pair<bool, QString> gpu_status() {
    const app::VersionReport r = app::version_report();
    return {r.cuda_usable, QString::fromStdString(r.cuda)};
}

ModelManagerDialog::ModelManagerDialog(AppSettings* settings, QWidget* parent) : QDialog(parent), settings_(settings) {
    setWindowTitle(tr("Models"));
    setAccessibleName(tr("Model manager"));
    path_ = new QLineEdit(settings_->modelPath(), this);
    path_->setAccessibleName(tr("Model file"));
    auto* browse = new QPushButton(tr("&Open GGUF…"), this);
    browse->setAccessibleName(tr("Open a GGUF model file"));
    auto* def = new QPushButton(tr("&Default"), this);
    def->setAccessibleName(tr("Use the default model"));
    def->setToolTip(QString::fromStdString(paths::default_model().string()));
    summary_ = new QLabel(this);
    summary_->setWordWrap(true);
    table_ = new QTableWidget(0, 2, this);
    table_->setAccessibleName(tr("Model metadata"));
    table_->setHorizontalHeaderLabels({tr("Property"), tr("Value")});
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->verticalHeader()->hide();
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    device_ = new QComboBox(this);
    device_->setAccessibleName(tr("Device"));
    device_->addItem(tr("CPU"), QStringLiteral("cpu"));
    device_->addItem(tr("GPU (CUDA)"), QStringLiteral("gpu"));
    const auto [gpu_ok, gpu_line] = gpu_status();
    if (!gpu_ok) {
        // Greyed out, with the reason as its tooltip.
        if (auto* m = qobject_cast<QStandardItemModel*>(device_->model())) m->item(1)->setEnabled(false);
        device_->setItemData(1, gpu_line, Qt::ToolTipRole);
    }
    device_->setCurrentIndex(settings_->device() == Device::Gpu && gpu_ok ? 1 : 0);
    device_kv_ = new QComboBox(this);
    device_kv_->setAccessibleName(tr("GPU memory for the context"));
    device_kv_->addItem(tr("All of it"), qint64{0});
    for (const int gib : {2, 4, 8, 16, 32, 64}) device_kv_->addItem(tr("%1 GiB").arg(gib), qint64{gib} << 30);
    device_kv_->setToolTip(tr("How much of the context's keys and values stay in GPU memory; the rest waits in "
                              "host memory and comes over as the sparse attention selects it. Lower it when the "
                              "library's context does not fit the GPU."));
    setDeviceKvBudget(settings_->deviceKvBudget());
    device_kv_->setEnabled(gpu_ok);
    host_kv_ = new QComboBox(this);
    host_kv_->setAccessibleName(tr("Memory for the context"));
    host_kv_->addItem(tr("No limit"), qint64{0});
    for (const int gib : {1, 2, 4, 8, 16, 32}) host_kv_->addItem(tr("%1 GiB").arg(gib), qint64{gib} << 30);
    host_kv_->setToolTip(tr("How much RAM the context's keys and values may take; the rest is read from the saved "
                            "context on disk as the attention needs it. Lower it when a long library's context "
                            "does not fit this computer's memory."));
    setKvBudget(settings_->kvBudget());
    auto* gpu_label = new QLabel(gpu_line, this);
    gpu_label->setWordWrap(true);

    mmproj_ = new QLineEdit(settings_->visionTowerPath(), this);
    mmproj_->setAccessibleName(tr("Vision tower"));
    mmproj_->setPlaceholderText(tr("none: pictures, frames and scanned pages are read as their OCR text"));
    mmproj_->setToolTip(tr("The model's mmproj GGUF file (SmolVLM / Idefics3 or Gemma 3): pictures, video frames "
                           "and pages with little text then enter the context as image tokens."));
    auto* mmproj_browse = new QPushButton(tr("Browse…"), this);
    mmproj_browse->setAccessibleName(tr("Choose a vision tower"));

    speech_model_ = new QLineEdit(settings_->speechModel(), this);
    speech_model_->setAccessibleName(tr("Speech model"));
    speech_model_->setPlaceholderText(tr("the default Whisper tiny.en"));
    speech_model_->setToolTip(tr("A CTranslate2 Whisper model folder (model.bin, config.json, the vocabulary), as "
                                 "faster-whisper uses them: tiny.en by default, base or small for better "
                                 "transcripts; \"off\" hears speech with pocketsphinx."));
    auto* speech_browse = new QPushButton(tr("Browse…"), this);
    speech_browse->setAccessibleName(tr("Choose a speech model folder"));
    speech_compute_ = new QComboBox(this);
    speech_compute_->setAccessibleName(tr("Speech arithmetic"));
    speech_compute_->addItem(tr("Balanced (int8 encoder, 8-bit decoder)"), QStringLiteral("default"));
    speech_compute_->addItem(tr("More accurate (float32 encoder, 8-bit decoder)"), QStringLiteral("q8"));
    speech_compute_->addItem(tr("Most accurate (float32, slowest)"), QStringLiteral("float32"));
    speech_compute_->addItem(tr("Fastest (int8, as faster-whisper)"), QStringLiteral("int8"));
    speech_compute_->setToolTip(tr("How media added from now on is transcribed. On our evaluation (3,816 words): "
                                   "balanced 11.2 % word errors, more accurate 10.6 %, most accurate 10.5 % at "
                                   "~1.5x the time, fastest 12.3 % at ~0.85x."));
    speech_compute_->setCurrentIndex(std::max(0, speech_compute_->findData(settings_->speechCompute())));

    engine_url_ = new QLineEdit(settings_->remoteEngineUrl(), this);
    engine_url_->setAccessibleName(tr("Remote engine URL"));
    engine_url_->setPlaceholderText(tr("none: the local model answers (e.g. http://10.0.0.5:8000/v1)"));
    engine_url_->setToolTip(tr("An OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, another Sightline). "
                               "The context is planned here and sent there; citations are verified here."));
    engine_model_ = new QLineEdit(settings_->remoteEngineModel(), this);
    engine_model_->setAccessibleName(tr("Remote model"));
    engine_model_->setPlaceholderText(tr("the first model the server lists"));
    engine_key_ = new QLineEdit(QString::fromUtf8(settings_->remoteApiKey()), this);
    engine_key_->setAccessibleName(tr("API key"));
    engine_key_->setEchoMode(QLineEdit::Password);
    engine_key_->setPlaceholderText(tr("from $SIGHTLINE_API_KEY when empty"));

    temperature_ = new QDoubleSpinBox(this);
    temperature_->setAccessibleName(tr("Temperature"));
    temperature_->setRange(0.0, 2.0);
    temperature_->setSingleStep(0.1);
    temperature_->setDecimals(2);
    temperature_->setSpecialValueText(tr("0 (greedy: the same answer every time)"));
    temperature_->setValue(settings_->temperature());
    threads_ = new QSpinBox(this);
    threads_->setAccessibleName(tr("Threads"));
    threads_->setRange(0, 1024);
    threads_->setSpecialValueText(tr("all cores (%1)").arg(QThread::idealThreadCount()));
    threads_->setValue(settings_->threads());

    auto* row = new QHBoxLayout;
    row->addWidget(path_, 1);
    row->addWidget(browse);
    row->addWidget(def);
    auto* form = new QFormLayout;
    form->addRow(tr("Model:"), row);
    form->addRow(QString(), summary_);
    auto* mmproj_row = new QHBoxLayout;
    mmproj_row->addWidget(mmproj_, 1);
    mmproj_row->addWidget(mmproj_browse);
    form->addRow(tr("Vision tower:"), mmproj_row);
    auto* speech_row = new QHBoxLayout;
    speech_row->addWidget(speech_model_, 1);
    speech_row->addWidget(speech_browse);
    form->addRow(tr("Speech model:"), speech_row);
    form->addRow(tr("Speech:"), speech_compute_);
    form->addRow(tr("Device:"), device_);
    form->addRow(QString(), gpu_label);
    form->addRow(tr("GPU memory:"), device_kv_);
    form->addRow(tr("Context memory:"), host_kv_);
    form->addRow(tr("Temperature:"), temperature_);
    form->addRow(tr("Threads:"), threads_);
    form->addRow(tr("Remote engine:"), engine_url_);
    form->addRow(tr("Remote model:"), engine_model_);
    form->addRow(tr("API key:"), engine_key_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(table_, 1);
    layout->addWidget(buttons);
    resize(640, 480);

    connect(browse, &QPushButton::clicked, this, &ModelManagerDialog::browse);
    connect(def, &QPushButton::clicked, this, [this] {
        path_->setText(QString::fromStdString(paths::default_model().string()));
        loadInfo(path_->text());
    });
    connect(mmproj_browse, &QPushButton::clicked, this, [this] {
        const QString start = mmproj_->text().isEmpty() ? QFileInfo(path_->text()).absolutePath() : QFileInfo(mmproj_->text()).absolutePath();
        const QString f = QFileDialog::getOpenFileName(this, tr("Open a vision tower"), start,
                                                       tr("mmproj GGUF files (*.gguf);;All files (*)"));
        if (!f.isEmpty()) mmproj_->setText(f);
    });
    connect(speech_browse, &QPushButton::clicked, this, [this] {
        const QString d = QFileDialog::getExistingDirectory(this, tr("Open a Whisper model folder"), speech_model_->text());
        if (!d.isEmpty()) speech_model_->setText(d);
    });
    connect(path_, &QLineEdit::editingFinished, this, [this] { loadInfo(path_->text()); });
    connect(buttons, &QDialogButtonBox::accepted, this, &ModelManagerDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &ModelManagerDialog::reject);
    loadInfo(path_->text());
}

QString ModelManagerDialog::modelPath() const { return path_->text(); }

namespace {

// Selects `bytes` (0 or more) in a combo of byte sizes; a size set elsewhere (the settings file)
// is kept, listed as it is.
void select_bytes(QComboBox* box, qint64 bytes) {
    bytes = bytes > 0 ? bytes : 0;
    int at = box->findData(bytes);
    if (at < 0) {
        box->addItem(QObject::tr("%1 MiB").arg(bytes >> 20), bytes);
        at = box->count() - 1;
    }
    box->setCurrentIndex(at);
}

}  // namespace

qint64 ModelManagerDialog::deviceKvBudget() const { return device_kv_->currentData().toLongLong(); }

void ModelManagerDialog::setDeviceKvBudget(qint64 bytes) { select_bytes(device_kv_, bytes); }

qint64 ModelManagerDialog::kvBudget() const { return host_kv_->currentData().toLongLong(); }

void ModelManagerDialog::setKvBudget(qint64 bytes) { select_bytes(host_kv_, bytes); }

Device ModelManagerDialog::device() const {
    return device_->currentData().toString() == QLatin1String("gpu") ? Device::Gpu : Device::Cpu;
}

QString ModelManagerDialog::engineUrl() const { return engine_url_->text().trimmed(); }

QString ModelManagerDialog::visionTowerPath() const { return mmproj_->text().trimmed(); }
void ModelManagerDialog::setVisionTowerPath(const QString& path) { mmproj_->setText(path); }

void ModelManagerDialog::setEngine(const QString& url, const QString& model, const QString& key) {
    engine_url_->setText(url);
    engine_model_->setText(model);
    engine_key_->setText(key);
}

void ModelManagerDialog::setSampling(double temperature, int threads) {
    temperature_->setValue(temperature);
    threads_->setValue(threads);
}

void ModelManagerDialog::setSpeech(const QString& model_dir, const QString& compute) {
    speech_model_->setText(model_dir);
    speech_compute_->setCurrentIndex(std::max(0, speech_compute_->findData(compute)));
}

void ModelManagerDialog::browse() {
    const QString f = QFileDialog::getOpenFileName(this, tr("Open a model"), QFileInfo(path_->text()).absolutePath(),
                                                   tr("GGUF models (*.gguf);;All files (*)"));
    if (f.isEmpty()) return;
    path_->setText(f);
    loadInfo(f);
}

void ModelManagerDialog::loadInfo(const QString& path) {
    summary_->setText(tr("Reading %1 …").arg(QFileInfo(path).fileName()));
    if (watcher_) watcher_->disconnect(this);
    watcher_ = new QFutureWatcher<ModelInfo>(this);
    QFutureWatcher<ModelInfo>* w = watcher_;
    connect(w, &QFutureWatcherBase::finished, this, [this, w] {
        w->deleteLater();
        if (w != watcher_) return;
        watcher_ = nullptr;
        showInfo(w->result());
    });
    w->setFuture(QtConcurrent::run(read_model_info, path));
}

void ModelManagerDialog::showInfo(const ModelInfo& info) {
    info_ = info;
    summary_->setText(info.error.isEmpty() ? info.summary
                                           : QStringLiteral("<span style='color:#c0392b'>%1</span>").arg(info.error.toHtmlEscaped()));
    table_->setRowCount(static_cast<int>(info.fields.size()));
    for (int i = 0; i < static_cast<int>(info.fields.size()); ++i) {
        table_->setItem(i, 0, new QTableWidgetItem(info.fields[static_cast<size_t>(i)].first));
        table_->setItem(i, 1, new QTableWidgetItem(info.fields[static_cast<size_t>(i)].second));
    }
    table_->resizeColumnToContents(0);
    Q_EMIT infoLoaded();
}

void ModelManagerDialog::accept() {
    if (!info_.error.isEmpty() && info_.path == path_->text()) {
        QMessageBox::warning(this, tr("Model"), tr("This model cannot be used:\n%1").arg(info_.error));
        return;
    }
    const QString mmproj = visionTowerPath();
    if (!mmproj.isEmpty() && !QFileInfo(mmproj).isFile()) {
        QMessageBox::warning(this, tr("Vision tower"), tr("%1 is not a file.").arg(mmproj));
        return;
    }
    const QString speech = speech_model_->text().trimmed();
    if (!speech.isEmpty() && speech != QLatin1String("off") && !QFileInfo(QDir(speech).filePath(QStringLiteral("model.bin"))).isFile()) {
        QMessageBox::warning(this, tr("Speech model"),
                             tr("%1 has no model.bin: choose a CTranslate2 Whisper model folder.").arg(speech));
        return;
    }
    const QString url = engineUrl();
    if (!url.isEmpty()) {
        const QUrl u(url);
        if (!u.isValid() || (u.scheme() != QLatin1String("http") && u.scheme() != QLatin1String("https")) || u.host().isEmpty()) {
            QMessageBox::warning(this, tr("Remote engine"),
                                 tr("%1 is not an http:// or https:// address of a server.").arg(url));
            return;
        }
    }
    settings_->setModelPath(path_->text());
    settings_->setVisionTowerPath(mmproj);
    settings_->setSpeechModel(speech);
    settings_->setSpeechCompute(speech_compute_->currentData().toString());
    settings_->setDevice(device());
    settings_->setDeviceKvBudget(deviceKvBudget());
    settings_->setKvBudget(kvBudget());
    settings_->setTemperature(temperature_->value());
    settings_->setThreads(threads_->value());
    settings_->setRemoteEngineUrl(url);
    settings_->setRemoteEngineModel(engine_model_->text());
    settings_->setRemoteApiKey(engine_key_->text().toUtf8());
    QDialog::accept();
}

}  // namespace sl::desktop
