// Subcommands register themselves here, one file each (cli/<name>_command.cpp), so adding a
// command never touches main.cpp.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace streamrace::cli {

// Exit statuses shared by every subcommand, as in compute-sanitizer and TSan.
inline constexpr int kExitClean = 0;
inline constexpr int kExitRaces = 1;     // default of --error-exitcode
inline constexpr int kExitBadInput = 2;

struct CommandEntry {
  std::string name;
  int order;  // position in --help
  // Adds the subcommand to `app`; returns the function that runs it and gives the exit status.
  std::function<std::function<int()>(CLI::App& app)> setup;
};

std::vector<CommandEntry>& command_registry();

// Moves the named options of `sub` into a second section of its --help, after the everyday
// ones: switches that change the analysis' semantics or the tracer's internals.
void group_advanced(CLI::App& sub, std::initializer_list<const char*> names);

struct RegisterCommand {
  RegisterCommand(std::string name, int order, std::function<std::function<int()>(CLI::App&)> setup) {
    command_registry().push_back(CommandEntry{std::move(name), order, std::move(setup)});
  }
};

}  // namespace streamrace::cli
