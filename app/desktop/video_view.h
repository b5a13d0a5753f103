// The video player: QMediaPlayer decoding into a QVideoSink whose frames are painted by a
// HighlightCanvas (so it works on every platform plugin, offscreen included), a timeline with a
// marker for every citation into this video, play/pause, frame steps (, and .), playback speed,
// volume and mute, full screen (F), the strip of sampled frames and the transcript beside the
// player (video_panels.h: both follow playback and seek on a click), and seekTo() that lands on
// the cited second and shows that frame even while paused. GUI thread only.
#pragma once

#include <QSlider>
#include <QString>
#include <QWidget>

#include <memory>
#include <vector>

#include "core/document/document.h"

class QAudioOutput;
class QComboBox;
class QLabel;
class QListWidget;
class QMediaPlayer;
class QToolButton;
class QVideoFrame;
class QVideoSink;

namespace sl::desktop {

class HighlightCanvas;

struct TimelineMarker {
    double seconds = 0;
    QString label;  // "[2] vtest.avi 00:00:30"
};

// A horizontal slider (milliseconds) that draws markers; clicking jumps to the click.
class MarkerSlider : public QSlider {
    Q_OBJECT

public:
    explicit MarkerSlider(QWidget* parent = nullptr);
    void setMarkers(std::vector<TimelineMarker> markers);
    const std::vector<TimelineMarker>& markers() const { return markers_; }
    int xForValue(int value) const;

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    bool event(QEvent* e) override;  // marker tooltips

private:
    std::vector<TimelineMarker> markers_;
};

class VideoView : public QWidget {
    Q_OBJECT

public:
    explicit VideoView(QWidget* parent = nullptr);
    ~VideoView() override;

    // Opens `document`'s media (when not already open) and seeks to `seconds`, showing that
    // frame; keeps playing when it was playing.
    void showAt(std::shared_ptr<const doc::Document> document, double seconds, std::vector<TimelineMarker> markers);
    void seekTo(double seconds);

    double position() const;          // seconds
    double shownFrameTime() const { return frame_time_; }  // of the frame on screen, < 0 before any
    bool playing() const;
    MarkerSlider* timeline() const { return timeline_; }
    HighlightCanvas* canvas() const { return canvas_; }
    QMediaPlayer* player();  // made on first use (the media backend loads then)
    QListWidget* frameStrip() const { return strip_; }
    QListWidget* transcriptList() const { return transcript_; }
    double rate() const;

public Q_SLOTS:
    void togglePlay();
    void stepFrames(int frames);  // pauses and moves that many frames (negative: back)
    void setRate(double rate);    // 0.25 .. 4
    void setVolume(int percent);  // 0 .. 100
    void toggleFullScreen();

Q_SIGNALS:
    void frameShown(double seconds);  // a frame from the media is on screen
    // The time the view stands at changed (a seek, playback, the frame of a seek arriving).
    void timeShown(double seconds);
    void mediaError(const QString& message);

private:
    void onFrame(const QVideoFrame& frame);
    void updateTime();
    void followPanels(double seconds);

    std::shared_ptr<const doc::Document> document_;
    QMediaPlayer* player_ = nullptr;
    QVideoSink* sink_ = nullptr;
    HighlightCanvas* canvas_;
    MarkerSlider* timeline_;
    QToolButton* play_;
    QLabel* time_;
    QComboBox* speed_;
    QToolButton* mute_;
    QSlider* volume_;
    QListWidget* strip_;
    QListWidget* transcript_;
    QAudioOutput* audio_ = nullptr;
    double rate_ = 1.0;
    double pending_seek_ = -1;    // a seek whose frame is still to come (seconds)
    bool pause_after_frame_ = false;
    double frame_time_ = -1;
    double shown_time_ = -1;      // the time last reported by timeShown
};

}  // namespace sl::desktop
