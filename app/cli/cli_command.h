// sightline-cli commands. Each command lives in its own cmd_<name>.cpp and registers itself with
// SIGHTLINE_CLI_COMMAND; main.cpp dispatches on the first argument.
#pragma once

#include <QStringList>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace sl::cli {

// A command gets its own arguments (without the program and command names) and returns the exit
// status. Runs on the main thread, inside a QCoreApplication.
using CommandFn = int (*)(const QStringList& args);

struct Command {
    const char* name;
    const char* summary;  // one line for `sightline-cli help`
    const char* usage;    // the full usage, printed (exit 0) for `COMMAND --help` / `help COMMAND`
    CommandFn run;
};

std::vector<Command>& commands();
bool register_command(const Command& command);

// Output helpers: UTF-8 to stdout/stderr, flushed per call so streaming output appears at once.
// Control characters other than newline, tab and carriage return (ESC, C1 controls, DEL: from file
// names, document text or a model) are written as "\xNN", so nothing reaches the terminal as a
// command.
void out(const std::string& text);
void err(const std::string& text);
std::string terminal_safe(std::string_view text);

// --device's values (core/runtime/backend.h): auto, cpu or cuda.
bool valid_device(std::string_view device);

}  // namespace sl::cli

#define SIGHTLINE_CLI_COMMAND(ident, name, summary, usage, fn) \
    static const bool sightline_cli_registered_##ident = ::sl::cli::register_command({name, summary, usage, fn})
