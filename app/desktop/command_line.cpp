#include "app/desktop/command_line.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace sl::desktop {

namespace {

// QGuiApplication's and QApplication's own options (one dash or two), and whether each takes a
// value in the next argument ("-style fusion"; "-style=fusion" also works).
struct QtOption {
    std::string_view name;
    bool value;
};
constexpr std::array<QtOption, 21> kQtOptions{{
    {"platform", true},   {"platformpluginpath", true}, {"platformtheme", true}, {"plugin", true},
    {"qwindowgeometry", true}, {"qwindowicon", true},   {"qwindowtitle", true},  {"session", true},
    {"style", true},      {"stylesheet", true},         {"display", true},       {"geometry", true},
    {"title", true},      {"name", true},               {"visual", true},        {"reverse", false},
    {"widgetcount", false}, {"nograb", false},          {"dograb", false},       {"sync", false},
    {"qmljsdebugger", false},
}};

const QtOption* qt_option(std::string_view arg) {
    arg.remove_prefix(arg.rfind("--", 0) == 0 ? 2 : 1);
    if (const size_t eq = arg.find('='); eq != std::string_view::npos) arg = arg.substr(0, eq);
    for (const QtOption& o : kQtOptions)
        if (o.name == arg) return &o;
    return nullptr;
}

}  // namespace

std::string command_line_usage() {
    return "usage: sightline [FILE|FOLDER]...   open the window and add them to the library\n"
           "       sightline --help             this text\n"
           "       sightline --version          versions of the app and the libraries it links\n"
           "  --  ends the options: what follows is a file even when it starts with '-'\n"
           "Qt's options (-platform NAME, -style NAME, -reverse, ...) are accepted.\n"
           "The command line: sightline-cli --help\n";
}

CommandLine parse_command_line(const std::vector<std::string>& args) {
    CommandLine cl;
    bool options = true;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (!options || a.size() < 2 || a[0] != '-') {
            cl.paths.push_back(a);
            continue;
        }
        if (a == "--") {
            options = false;
        } else if (a == "--help" || a == "-h" || a == "-help") {
            cl.action = CommandLine::Action::Help;
            return cl;
        } else if (a == "--version" || a == "-v") {
            cl.action = CommandLine::Action::Version;
            return cl;
        } else if (const QtOption* o = qt_option(a)) {
            if (o->value && a.find('=') == std::string::npos) ++i;  // its value
        } else {
            cl.action = CommandLine::Action::Error;
            cl.message = "sightline: unknown option '" + a + "' (see sightline --help; to add a file whose name "
                         "starts with '-', put -- before it)";
            return cl;
        }
    }
    return cl;
}

}  // namespace sl::desktop
