// OOXML package relationships (Open Packaging Conventions): the `_rels/*.rels` part next to every
// part, mapping relationship ids (r:id, r:embed) to target parts. Targets are resolved to package
// part names ("ppt/slides/slide1.xml"); targets that would leave the package ("../../x",
// external URLs) are dropped.
//
// Threading: plain data and pure functions.
#pragma once

#include <QByteArray>

#include <map>
#include <string>

namespace sl::ingest::ooxml {

struct Relationship {
    std::string type;    // the last segment of the type URI: "slide", "slideLayout", "image"...
    std::string target;  // resolved part name, '/'-separated, no leading '/'
};

// rId -> relationship (internal targets only).
using Relationships = std::map<std::string, Relationship>;

// "ppt/slides/slide1.xml" -> "ppt/slides/_rels/slide1.xml.rels"; "" -> "_rels/.rels".
std::string rels_part_for(const std::string& part);

// Resolves `target` (relative to the folder of `source_part`, or absolute from the package root
// when it starts with '/'), percent-decoded and normalized; "" when it leaves the package.
std::string resolve_target(const std::string& source_part, const std::string& target);

// Parses a .rels part of `source_part`. Throws IngestError(Corrupt) naming `path` and the rels part
// when the XML is malformed.
Relationships parse_relationships(const QByteArray& xml, const std::string& source_part,
                                  const std::string& path);

// The first relationship of `type` (last segment), or nullptr.
const Relationship* first_of_type(const Relationships& rels, const std::string& type);

}  // namespace sl::ingest::ooxml
