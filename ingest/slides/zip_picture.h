// An embedded picture of a zip-based document (PPTX media, ODP Pictures/) as a Visual: where it is
// ("zip:ppt/media/image1.png"), its pixel size from the image header, and a small thumbnail when
// IngestOptions::thumbnail_px > 0. Full images are never kept.
//
// Threading: uses the caller's ZipArchive; same thread rules as ZipArchive. QImageReader is used
// without a QGuiApplication (image plugins load on demand).
#pragma once

#include <optional>
#include <string>

#include "core/document/document.h"
#include "ingest/ingest_context.h"
#include "ingest/slides/zip_archive.h"

namespace sl::ingest {

// "image/png" for "x.png"..., "application/octet-stream" when unknown.
std::string mime_for_name(const std::string& name);

// The Visual for picture `entry` of `zip`. Undecodable or oversized images keep width/height 0 and
// no thumbnail; zip safety errors (TooLarge: bombs) propagate. `mime` is the thumbnail's type when
// one is kept (PNG, or JPEG for JPEG sources), else the type the entry's extension names.
doc::Visual picture_visual(ZipArchive& zip, const std::string& entry,
                           const std::optional<doc::BBox>& bbox, const IngestOptions& options);

}  // namespace sl::ingest
