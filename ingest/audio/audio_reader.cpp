#include "ingest/audio/audio_reader.h"

#include <cstring>

#include "ingest/video/media_reader.h"

namespace sl::ingest {

namespace {

bool at(const std::string& head, size_t offset, const char* magic, size_t n) {
    return head.size() >= offset + n && std::memcmp(head.data() + offset, magic, n) == 0;
}

class AudioReader final : public Reader {
public:
    const char* name() const override { return "audio"; }
    std::vector<std::string> extensions() const override {
        return {"wav", "mp3", "flac", "ogg",  "oga", "opus", "m4a",
                "m4b", "aac", "wma",  "aiff", "aif", "amr"};
    }
    bool sniff(const std::string& head) const override {
        if (head.size() < 4) return false;
        const auto b0 = static_cast<unsigned char>(head[0]);
        const auto b1 = static_cast<unsigned char>(head[1]);
        return (at(head, 0, "RIFF", 4) && at(head, 8, "WAVE", 4)) || at(head, 0, "ID3", 3) ||
               at(head, 0, "fLaC", 4) || at(head, 0, "OggS", 4) ||
               (at(head, 4, "ftyp", 4) &&
                (at(head, 8, "M4A ", 4) || at(head, 8, "M4B ", 4) || at(head, 8, "M4P ", 4))) ||
               (at(head, 0, "FORM", 4) && (at(head, 8, "AIFF", 4) || at(head, 8, "AIFC", 4))) ||
               at(head, 0, "#!AMR", 5) || (b0 == 0xFF && (b1 & 0xE0) == 0xE0);  // MPEG audio, ADTS
    }
    doc::Document read(const std::string& path, IngestContext& ctx) const override {
        return read_media_file(path, ctx);
    }
};

}  // namespace

std::unique_ptr<Reader> make_audio_reader() {
    return std::make_unique<AudioReader>();
}

}  // namespace sl::ingest
