// streamrace: the command-line front end. Each subcommand lives in its own *_command.cpp.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <new>

#include "cli/command_registry.h"

namespace streamrace::cli {
std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> entries;
  return entries;
}

void group_advanced(CLI::App& sub, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (CLI::Option* o = sub.get_option_no_throw(n)) o->group("Advanced");
}
}  // namespace streamrace::cli

int main(int argc, char** argv) {
  using namespace streamrace::cli;
  CLI::App app{"streamrace: finds cross-stream races in CUDA programs that overlap NCCL collectives with compute"};
  app.set_version_flag("--version", "streamrace 0.1.0");
  app.require_subcommand(1);
  auto& entries = command_registry();
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  std::vector<std::pair<CLI::App*, std::function<int()>>> runners;
  for (auto& e : entries) {
    auto before = app.get_subcommands({}).size();
    auto run = e.setup(app);
    auto subs = app.get_subcommands({});
    if (subs.size() > before) runners.emplace_back(subs.back(), std::move(run));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  // The one error path: whatever a command's own checks missed reading its inputs ends here
  // as bad input (exit 2), never as an uncaught exception.
  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const std::bad_alloc&) {
      std::cerr << "streamrace " << sub->get_name() << ": error: out of memory reading the inputs\n";
    } catch (const std::exception& e) {
      std::cerr << "streamrace " << sub->get_name() << ": error: " << e.what() << "\n";
    }
    return kExitBadInput;
  }
  return kExitBadInput;
}
