// The desktop app's command line: `sightline [OPTION]... [FILE|FOLDER]...`. --help/-h and
// --version answer without a window; Qt's own options (-platform, -style, ...) are left to
// QApplication; any other option is refused with a message instead of being added to the library
// as a file ("--" ends the options: `sightline -- -odd-name.pdf`). Pure; any thread.
#pragma once

#include <string>
#include <vector>

namespace sl::desktop {

struct CommandLine {
    enum class Action { Run, Help, Version, Error };
    Action action = Action::Run;
    std::vector<std::string> paths;  // files and folders to add (Run)
    std::string message;             // Error: what is wrong, for stderr
};

// Reads argv[1..] (as bytes). Qt's options and their values are skipped, not listed in paths.
CommandLine parse_command_line(const std::vector<std::string>& args);

// The usage text --help prints.
std::string command_line_usage();

}  // namespace sl::desktop
