// topk-tune: the command-line front end of the tuner. Each subcommand lives
// in a tools/cli_*.cpp file; this file wires them into one CLI11 app and
// turns every error into a message and an exit code (docs/CLI.md).
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli_common.hpp"

#ifndef TOPK_VERSION
#define TOPK_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  using namespace topk::cli;
  CLI::App app{
      "topk-tune: tune GPU top-k kernels for your problem shapes, keep the winners in a cache, and "
      "report what was found.",
      "topk-tune"};
  app.set_version_flag("--version", std::string("topk-tune ") + TOPK_VERSION);
  AddGlobalFlags(&app);
  // Before parsing: a parse error must come out as JSON too.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) Global().json = true;
    if (std::strcmp(argv[i], "--quiet") == 0 || std::strcmp(argv[i], "-q") == 0) Global().quiet = true;
  }

  app.require_subcommand(0, 1);
  app.footer(std::string("Start with `topk-tune tune` (the dsa preset on GPU 0), then `topk-tune report`.\n"
                         "Run `topk-tune COMMAND --help` for the options of one command.\n\n") +
             kExitCodeHelp);
  const std::vector<Command> commands = {AddDevices(app), AddSpace(app),  AddEmit(app),   AddTune(app),
                                         AddShow(app),    AddReport(app), AddVerify(app), AddExport(app),
                                         AddImport(app),  AddMerge(app)};
  for (const auto& c : commands) AddGlobalFlags(c.app);
  // The command named on the line, for the hint of a usage error.
  for (int i = 1; i < argc && Global().command.empty(); ++i)
    for (const auto& c : commands)
      if (c.app->get_name() == argv[i]) Global().command = argv[i];

  // CLI11 calls an unknown command an unexpected argument; say what it is.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const auto& c : commands) {
      known |= c.app->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + c.app->get_name();
    }
    if (!known) {
      Global().command.clear();
      return Fail(kExitUsage, "unknown command '" + Clip(argv[1]) + "'",
                  "commands: " + names + ". Run `topk-tune --help` for what each does.");
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string where = "topk-tune";
    for (const auto& c : commands)
      if (c.app->parsed()) where += " " + c.app->get_name();
    return Fail(kExitUsage, e.what(), "run `" + where + " --help` for the options");
  }
  for (const auto& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const std::exception& e) {
      return Fail(kExitError, std::string("internal error in ") + c.app->get_name() + ": " + e.what(),
                  "please report it with the command line that caused it");
    }
  }
  if (!Global().json) std::cout << app.help();
  return Fail(kExitUsage, "no command given", "choose one of the commands above, e.g. `topk-tune tune --help`");
}
