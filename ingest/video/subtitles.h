// Timed text from subtitles: our own small parsers for sidecar SubRip (.srt) and WebVTT (.vtt)
// files, markup stripping for ASS/SSA events and HTML-like tags, and finding the sidecar files
// next to a media file. Pure functions, no FFmpeg; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/document/document.h"

namespace sl::ingest {

// Cues of a SubRip file ("1\n00:00:01,000 --> 00:00:04,000\ntext\n\n"), as Subtitle blocks with
// their time ranges, markup stripped. Lenient: skips cues it cannot read.
std::vector<doc::Block> parse_srt(std::string_view text);

// Cues of a WebVTT file ("WEBVTT" header, optional cue ids and settings, NOTE/STYLE/REGION blocks
// skipped), as Subtitle blocks, markup stripped.
std::vector<doc::Block> parse_vtt(std::string_view text);

// "hh:mm:ss,mmm", "hh:mm:ss.mmm" or "mm:ss.mmm" in seconds; -1 when not a timestamp.
double parse_timestamp(std::string_view s);

// The text of an ASS/SSA event as FFmpeg decoders give it ("ReadOrder,Layer,Style,Name,MarginL,
// MarginR,MarginV,Effect,Text") or as a script line ("Dialogue: Layer,Start,End,Style,..."), with
// override blocks ({\i1}) removed and \N, \n, \h turned into line breaks and spaces.
std::string ass_event_text(std::string_view event);

// Removes HTML-like tags (<i>, <font ...>, <c.x>, <v Name>, <00:01.000>) and ASS override blocks,
// decodes the common entities (&amp; &lt; &gt; &nbsp; &quot;), trims each line, drops empty lines.
std::string strip_markup(std::string_view text);

// Valid UTF-8 unchanged (a BOM removed); anything else taken as Latin-1 and converted.
std::string to_utf8(std::string_view bytes);

// Sidecar subtitle files of `media_path`: in the same folder, named like the media file's base
// name followed by ".srt"/".vtt" or ".<anything>.srt"/".vtt" (movie.srt, movie.en.srt), sorted.
std::vector<std::string> find_sidecar_subtitles(const std::string& media_path);

// Reads and parses one sidecar file (by its extension, or a WEBVTT header). Files over
// `max_bytes` are skipped (empty result). Throws nothing: an unreadable sidecar gives no blocks.
std::vector<doc::Block> read_sidecar_subtitles(const std::string& path, size_t max_bytes);

}  // namespace sl::ingest
