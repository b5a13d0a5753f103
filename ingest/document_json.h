// The Document as JSON (`sightline-cli ingest --json`, the library store, tests).
// Shape: {path, id, kind, title, metadata{}, duration?, units: [{kind, index, label, t0?, t1?,
// width, height, rotation?, blocks: [{role, text, bbox?: [x0,y0,x1,y1], t0?, t1?, confidence?,
// lines?: [{text, bbox}]}], visuals: [{kind, bbox?, timestamp?, width, height, locator, mime?}]}],
// outline: [{title, level, unit?, time?}], links: [{unit, bbox, uri?, target_unit?}]}.
// Encoded visual bytes are not included.
#pragma once

#include <QByteArray>
#include <QJsonObject>

#include "core/document/document.h"

namespace sl::ingest {

QJsonObject to_json(const doc::Document& d, bool with_lines = false);
QByteArray to_json_bytes(const doc::Document& d, bool with_lines = false);

}  // namespace sl::ingest
