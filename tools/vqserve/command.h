#ifndef VQSERVE_TOOLS_VQSERVE_COMMAND_H_
#define VQSERVE_TOOLS_VQSERVE_COMMAND_H_

#include <functional>
#include <map>
#include <string>

namespace vqserve::cli {

// a subcommand of build/bin/vqserve: gets argv after the command name, returns the exit code.
using CommandFn = std::function<int(int argc, char** argv)>;

struct Command {
  std::string help;
  CommandFn run;
};

// all registered subcommands by name.
std::map<std::string, Command>& Commands();

// registers a subcommand at static-initialisation time (one per tools/vqserve/*_command.cc).
struct CommandRegistrar {
  CommandRegistrar(const std::string& name, const std::string& help, CommandFn fn) {
    Commands()[name] = Command{help, std::move(fn)};
  }
};

}  // namespace vqserve::cli

#endif  // VQSERVE_TOOLS_VQSERVE_COMMAND_H_
