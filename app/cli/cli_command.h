// sightline-cli commands. Each command lives in its own cmd_<name>.cpp and registers itself with
// SIGHTLINE_CLI_COMMAND; main.cpp dispatches on the first argument.
#pragma once

#include <QStringList>

#include <cstdio>
#include <string>
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
void out(const std::string& text);
void err(const std::string& text);

}  // namespace sl::cli

#define SIGHTLINE_CLI_COMMAND(ident, name, summary, usage, fn) \
    static const bool sightline_cli_registered_##ident = ::sl::cli::register_command({name, summary, usage, fn})
