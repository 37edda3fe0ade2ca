// build/bin/vqserve: dispatches to the registered subcommands.
#include <cstdio>
#include <cstring>

#include "tools/vqserve/command.h"

namespace vqserve::cli {
std::map<std::string, Command>& Commands() {
  static std::map<std::string, Command> commands;
  return commands;
}
}  // namespace vqserve::cli

int main(int argc, char** argv) {
  auto& commands = vqserve::cli::Commands();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    std::fprintf(stderr, "usage: vqserve COMMAND [flags]\n\ncommands:\n");
    for (const auto& [name, cmd] : commands) {
      std::fprintf(stderr, "  %-10s %s\n", name.c_str(), cmd.help.c_str());
    }
    return argc < 2 ? 2 : 0;
  }
  auto it = commands.find(argv[1]);
  if (it == commands.end()) {
    std::fprintf(stderr, "vqserve: unknown command '%s' (try 'vqserve help')\n", argv[1]);
    return 2;
  }
  return it->second.run(argc - 2, argv + 2);
}
