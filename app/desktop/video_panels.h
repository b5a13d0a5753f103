// The panels beside the video player: the strip of the frames ingest sampled (thumbnail and time)
// and the transcript (subtitles or speech, one row per timed block). Filled from the document;
// each row's Qt::UserRole holds its start in seconds. GUI thread only.
#pragma once

#include "core/document/document.h"

class QListWidget;

namespace sl::desktop {

// Rows of `list` cleared and refilled; returns how many. Frames without a kept thumbnail get a
// placeholder icon.
int fill_frame_strip(QListWidget* list, const doc::Document& d);
int fill_transcript(QListWidget* list, const doc::Document& d);

// The row whose [start, next start) holds `seconds`, or -1 (before the first).
int row_at(const QListWidget* list, double seconds);

// Seconds between frames from the document's "fps" metadata (1/25 when it has none).
double frame_interval(const doc::Document& d);

}  // namespace sl::desktop
