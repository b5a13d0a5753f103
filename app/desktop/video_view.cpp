#include "app/desktop/video_view.h"

#include <QAudioOutput>
#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QListWidget>
#include <QMediaPlayer>
#include <QMouseEvent>
#include <QPainter>
#include <QShortcut>
#include <QSplitter>
#include <QStyle>
#include <QStyleOptionSlider>
#include <QToolButton>
#include <QToolTip>
#include <QUrl>
#include <QVBoxLayout>
#include <QVideoFrame>
#include <QVideoSink>

#include <cmath>

#include "app/desktop/video_panels.h"

#include "app/desktop/highlight_canvas.h"
#include "core/document/locator.h"

namespace sl::desktop {

MarkerSlider::MarkerSlider(QWidget* parent) : QSlider(Qt::Horizontal, parent) {
    setMinimumHeight(28);
}

void MarkerSlider::setMarkers(std::vector<TimelineMarker> markers) {
    markers_ = std::move(markers);
    update();
}

int MarkerSlider::xForValue(int value) const {
    QStyleOptionSlider opt;
    initStyleOption(&opt);
    const QRect groove = style()->subControlRect(QStyle::CC_Slider, &opt, QStyle::SC_SliderGroove, this);
    const QRect handle = style()->subControlRect(QStyle::CC_Slider, &opt, QStyle::SC_SliderHandle, this);
    const int span = groove.width() - handle.width();
    return groove.x() + handle.width() / 2 +
           QStyle::sliderPositionFromValue(minimum(), maximum(), value, std::max(1, span));
}

void MarkerSlider::paintEvent(QPaintEvent* event) {
    QSlider::paintEvent(event);
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    for (const auto& m : markers_) {
        const int x = xForValue(static_cast<int>(m.seconds * 1000));
        p.setPen(Qt::NoPen);
        p.setBrush(QColor(230, 126, 34));
        const QPointF tri[3] = {{x - 5.0, 0.0}, {x + 5.0, 0.0}, {static_cast<double>(x), 8.0}};
        p.drawPolygon(tri, 3);
        p.setPen(QPen(QColor(230, 126, 34), 2));
        p.drawLine(x, 8, x, height() - 2);
    }
}

void MarkerSlider::mousePressEvent(QMouseEvent* event) {
    // Jump to the click (snapping to a marker within 6 px) instead of paging.
    if (event->button() == Qt::LeftButton && maximum() > minimum()) {
        const int x = event->position().toPoint().x();
        for (const auto& m : markers_) {
            const int v = static_cast<int>(m.seconds * 1000);
            if (std::abs(xForValue(v) - x) <= 6) {
                setValue(v);
                Q_EMIT sliderMoved(v);
                event->accept();
                return;
            }
        }
        QStyleOptionSlider opt;
        initStyleOption(&opt);
        const QRect groove = style()->subControlRect(QStyle::CC_Slider, &opt, QStyle::SC_SliderGroove, this);
        const int v = QStyle::sliderValueFromPosition(minimum(), maximum(), x - groove.x(), groove.width());
        setValue(v);
        Q_EMIT sliderMoved(v);
    }
    QSlider::mousePressEvent(event);
}

bool MarkerSlider::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        for (const auto& m : markers_)
            if (std::abs(xForValue(static_cast<int>(m.seconds * 1000)) - help->pos().x()) <= 6) {
                QToolTip::showText(help->globalPos(), m.label, this);
                return true;
            }
        QToolTip::hideText();
        e->ignore();
        return true;
    }
    return QSlider::event(e);
}

VideoView::VideoView(QWidget* parent) : QWidget(parent) {
    canvas_ = new HighlightCanvas(this);
    canvas_->setAccessibleName(tr("Video frame"));
    canvas_->setPlaceholder(tr("Loading the video ..."));
    timeline_ = new MarkerSlider(this);
    timeline_->setAccessibleName(tr("Video timeline with citation markers"));
    play_ = new QToolButton(this);
    play_->setIcon(QIcon(QStringLiteral(":/icons/action-play.svg")));
    play_->setAccessibleName(tr("Play or pause"));
    play_->setToolTip(tr("Play / pause (Space)"));
    play_->setShortcut(Qt::Key_Space);
    play_->setAutoRaise(true);
    time_ = new QLabel(this);
    time_->setAccessibleName(tr("Playback time"));
    auto button = [this](const QString& text, const QString& name, const QString& tip, const QKeySequence& key) {
        auto* b = new QToolButton(this);
        b->setText(text);
        b->setAccessibleName(name);
        b->setToolTip(tip + QStringLiteral(" (") + key.toString(QKeySequence::NativeText) + QLatin1Char(')'));
        b->setShortcut(key);
        b->setAutoRaise(true);
        return b;
    };
    auto* back = button(QStringLiteral("\u25C0|"), tr("Previous frame"), tr("One frame back"), QKeySequence(Qt::Key_Comma));
    auto* fwd = button(QStringLiteral("|\u25B6"), tr("Next frame"), tr("One frame on"), QKeySequence(Qt::Key_Period));
    auto* full = button(tr("Full screen"), tr("Full screen"), tr("Full screen"), QKeySequence(Qt::Key_F));
    speed_ = new QComboBox(this);
    speed_->setAccessibleName(tr("Playback speed"));
    for (double r : {0.5, 0.75, 1.0, 1.25, 1.5, 2.0}) speed_->addItem(QStringLiteral("%1\u00D7").arg(r), r);
    speed_->setCurrentIndex(speed_->findData(1.0));
    mute_ = new QToolButton(this);
    mute_->setText(tr("Mute"));
    mute_->setAccessibleName(tr("Mute"));
    mute_->setCheckable(true);
    mute_->setAutoRaise(true);
    volume_ = new QSlider(Qt::Horizontal, this);
    volume_->setAccessibleName(tr("Volume"));
    volume_->setRange(0, 100);
    volume_->setValue(80);
    volume_->setMaximumWidth(90);
    auto* bar = new QHBoxLayout;
    bar->setContentsMargins(4, 2, 4, 2);
    bar->addWidget(back);
    bar->addWidget(play_);
    bar->addWidget(fwd);
    bar->addWidget(timeline_, 1);
    bar->addWidget(time_);
    bar->addWidget(speed_);
    bar->addWidget(mute_);
    bar->addWidget(volume_);
    bar->addWidget(full);

    strip_ = new QListWidget(this);
    strip_->setAccessibleName(tr("Sampled frames"));
    strip_->setViewMode(QListView::IconMode);
    strip_->setFlow(QListView::LeftToRight);
    strip_->setWrapping(false);
    strip_->setIconSize(QSize(96, 54));
    strip_->setFixedHeight(96);
    strip_->setMovement(QListView::Static);
    strip_->hide();
    transcript_ = new QListWidget(this);
    transcript_->setAccessibleName(tr("Transcript"));
    transcript_->setWordWrap(true);
    transcript_->hide();
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(canvas_);
    split->addWidget(transcript_);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(split, 1);
    layout->addWidget(strip_);
    layout->addLayout(bar);
    connect(play_, &QToolButton::clicked, this, &VideoView::togglePlay);
    connect(back, &QToolButton::clicked, this, [this] { stepFrames(-1); });
    connect(fwd, &QToolButton::clicked, this, [this] { stepFrames(1); });
    connect(full, &QToolButton::clicked, this, &VideoView::toggleFullScreen);
    connect(speed_, &QComboBox::currentIndexChanged, this, [this] { setRate(speed_->currentData().toDouble()); });
    connect(volume_, &QSlider::valueChanged, this, &VideoView::setVolume);
    connect(mute_, &QToolButton::toggled, this, [this](bool on) {
        if (audio_) audio_->setMuted(on);
    });
    auto seek_row = [this](QListWidgetItem* item) {
        if (item) seekTo(item->data(Qt::UserRole).toDouble());
    };
    connect(strip_, &QListWidget::itemClicked, this, seek_row);
    connect(transcript_, &QListWidget::itemClicked, this, seek_row);
    connect(this, &VideoView::timeShown, this, &VideoView::followPanels);
    connect(timeline_, &QSlider::sliderMoved, this, [this](int ms) { seekTo(ms / 1000.0); });
}

QMediaPlayer* VideoView::player() {
    if (player_) return player_;
    // Qt 6.4's GStreamer backend crashes without the optional Debian plugins; the FFmpeg backend
    // reads every format the ingest readers do. An explicit choice in the environment wins. The
    // backend is chosen when the first player is made, so this must come before it.
    if (qEnvironmentVariableIsEmpty("QT_MEDIA_BACKEND")) qputenv("QT_MEDIA_BACKEND", "ffmpeg");
    player_ = new QMediaPlayer(this);
    sink_ = new QVideoSink(this);
    player_->setVideoSink(sink_);
    audio_ = new QAudioOutput(this);
    audio_->setVolume(static_cast<float>(volume_->value()) / 100.0f);
    audio_->setMuted(mute_->isChecked());
    player_->setAudioOutput(audio_);
    player_->setPlaybackRate(rate_);
    connect(sink_, &QVideoSink::videoFrameChanged, this, &VideoView::onFrame);
    connect(player_, &QMediaPlayer::durationChanged, this, [this](qint64 ms) {
        timeline_->setRange(0, static_cast<int>(ms));
        updateTime();
    });
    connect(player_, &QMediaPlayer::positionChanged, this, [this](qint64 ms) {
        if (!timeline_->isSliderDown()) timeline_->setValue(static_cast<int>(ms));
        updateTime();
    });
    connect(player_, &QMediaPlayer::playbackStateChanged, this, [this](QMediaPlayer::PlaybackState s) {
        play_->setIcon(QIcon(s == QMediaPlayer::PlayingState ? QStringLiteral(":/icons/action-pause.svg")
                                                             : QStringLiteral(":/icons/action-play.svg")));
    });
    connect(player_, &QMediaPlayer::errorOccurred, this, [this](QMediaPlayer::Error, const QString& text) {
        const QString msg = (document_ ? QString::fromStdString(document_->path) + QStringLiteral(": ") : QString()) + text;
        canvas_->setPlaceholder(msg);
        Q_EMIT mediaError(msg);
    });
    connect(player_, &QMediaPlayer::mediaStatusChanged, this, [this](QMediaPlayer::MediaStatus s) {
        // Once loaded, a seek requested before the media was ready is applied.
        if ((s == QMediaPlayer::LoadedMedia || s == QMediaPlayer::BufferedMedia) && pending_seek_ >= 0)
            player_->setPosition(static_cast<qint64>(pending_seek_ * 1000));
    });
    return player_;
}

VideoView::~VideoView() {
    if (player_) player_->stop();
}

double VideoView::position() const { return player_ ? static_cast<double>(player_->position()) / 1000.0 : 0.0; }

bool VideoView::playing() const { return player_ && player_->playbackState() == QMediaPlayer::PlayingState; }

void VideoView::showAt(std::shared_ptr<const doc::Document> document, double seconds,
                       std::vector<TimelineMarker> markers) {
    if (!document) return;
    const bool same = document_ && document_->path == document->path;
    document_ = std::move(document);
    if (document_->duration > 0 && timeline_->maximum() <= 0)
        timeline_->setRange(0, static_cast<int>(document_->duration * 1000));
    timeline_->setMarkers(std::move(markers));
    if (!same) {
        strip_->setVisible(fill_frame_strip(strip_, *document_) > 0);
        transcript_->setVisible(fill_transcript(transcript_, *document_) > 0);
        frame_time_ = -1;
        canvas_->setImage({});
        canvas_->setPlaceholder(tr("Loading the video ..."));
        player()->setSource(QUrl::fromLocalFile(QString::fromStdString(document_->path)));
    }
    seekTo(seconds);
}

void VideoView::seekTo(double seconds) {
    pending_seek_ = std::max(0.0, seconds);
    player()->setPosition(static_cast<qint64>(pending_seek_ * 1000));
    updateTime();
    if (!playing()) {
        // Decoding a frame needs the pipeline running: play until the frame at the target
        // arrives, then pause on it.
        pause_after_frame_ = true;
        player_->play();
    }
}

double VideoView::rate() const { return rate_; }

void VideoView::setRate(double rate) {
    rate_ = std::clamp(rate, 0.25, 4.0);
    if (player_) player_->setPlaybackRate(rate_);
    const int i = speed_->findData(rate_);
    if (i >= 0 && i != speed_->currentIndex()) speed_->setCurrentIndex(i);
}

void VideoView::setVolume(int percent) {
    percent = std::clamp(percent, 0, 100);
    if (volume_->value() != percent) volume_->setValue(percent);
    if (audio_) audio_->setVolume(static_cast<float>(percent) / 100.0f);
}

void VideoView::stepFrames(int frames) {
    if (!document_ || frames == 0) return;
    if (playing()) player()->pause();
    const double from = pending_seek_ >= 0 ? pending_seek_ : frame_time_ >= 0 ? frame_time_ : position();
    const double step = frame_interval(*document_);
    const double end = document_->duration > 0 ? document_->duration : std::max(from, 0.0) + step * std::abs(frames);
    seekTo(std::clamp(from + step * frames, 0.0, std::max(0.0, end - step / 2)));
}

void VideoView::toggleFullScreen() {
    QWidget* w = window();
    if (w->isFullScreen()) w->showNormal();
    else w->showFullScreen();
}

void VideoView::followPanels(double seconds) {
    for (QListWidget* list : {transcript_, strip_}) {
        if (!list->isVisible() && list->count() == 0) continue;
        const int row = row_at(list, seconds);
        if (row >= 0 && row != list->currentRow()) {
            const QSignalBlocker block(list);
            list->setCurrentRow(row);
            list->scrollToItem(list->item(row));
        }
    }
}

void VideoView::togglePlay() {
    pause_after_frame_ = false;
    if (playing()) player()->pause();
    else player()->play();
}

void VideoView::onFrame(const QVideoFrame& frame) {
    if (!frame.isValid()) return;
    const double t = static_cast<double>(frame.startTime()) / 1e6;
    if (pending_seek_ >= 0) {
        // Frames decoded before the seek took effect are skipped (one frame interval of slack).
        if (t < pending_seek_ - 0.25 || t > pending_seek_ + 2.0) return;
        pending_seek_ = -1;
        if (pause_after_frame_) {
            pause_after_frame_ = false;
            player_->pause();
        }
    }
    const QImage img = frame.toImage();
    if (img.isNull()) return;
    canvas_->setImage(img);
    frame_time_ = t;
    updateTime();
    Q_EMIT frameShown(t);
}

void VideoView::updateTime() {
    // A seek whose frame is still to come stands at its target, not where the player was.
    const double pos = pending_seek_ >= 0 ? pending_seek_ : frame_time_ >= 0 && !playing() ? frame_time_ : position();
    time_->setText(QString::fromStdString(doc::format_time(pos)) + QStringLiteral(" / ") +
                   QString::fromStdString(doc::format_time(player_ ? static_cast<double>(player_->duration()) / 1000.0 : 0.0)));
    if (pos != shown_time_) {
        shown_time_ = pos;
        Q_EMIT timeShown(pos);
    }
}

}  // namespace sl::desktop
