#include "ingest/video/video_reader.h"

#include <cstring>

#include "ingest/video/media_reader.h"

namespace sl::ingest {

namespace {

bool at(const std::string& head, size_t offset, const char* magic, size_t n) {
    return head.size() >= offset + n && std::memcmp(head.data() + offset, magic, n) == 0;
}

// ISO-BMFF brands that are still images (HEIF/AVIF) or audio (M4A/M4B): not ours to claim.
bool foreign_brand(const std::string& head) {
    static const char* const kBrands[] = {"heic", "heix", "heim", "heis", "hevc", "hevx", "mif1",
                                          "msf1", "avif", "avis", "M4A ", "M4B ", "M4P "};
    for (const char* b : kBrands)
        if (at(head, 8, b, 4)) return true;
    return false;
}

class VideoReader final : public Reader {
public:
    const char* name() const override { return "video"; }
    std::vector<std::string> extensions() const override {
        return {"mp4", "m4v",  "mov", "qt",   "mkv", "webm", "avi", "wmv", "asf", "flv",
                "mpg", "mpeg", "ts",  "m2ts", "mts", "3gp",  "3g2", "ogv", "vob", "mxf",
                "m3u8", "m3u"};  // playlists: refused by name (they point at other files)
    }
    bool sniff(const std::string& head) const override {
        if (at(head, 4, "ftyp", 4)) return !foreign_brand(head);
        return at(head, 4, "moov", 4) || at(head, 4, "mdat", 4) || at(head, 4, "wide", 4) ||
               at(head, 0, "\x1A\x45\xDF\xA3", 4) ||                  // Matroska/WebM
               (at(head, 0, "RIFF", 4) && at(head, 8, "AVI ", 4)) ||  // AVI
               at(head, 0, "\x30\x26\xB2\x75\x8E\x66\xCF\x11", 8) ||  // ASF/WMV
               at(head, 0, "FLV\x01", 4) ||                           // Flash video
               at(head, 0, "\x00\x00\x01\xBA", 4);                    // MPEG-PS
    }
    doc::Document read(const std::string& path, IngestContext& ctx) const override {
        return read_media_file(path, ctx);
    }
};

}  // namespace

std::unique_ptr<Reader> make_video_reader() {
    return std::make_unique<VideoReader>();
}

}  // namespace sl::ingest
