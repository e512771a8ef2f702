"""Ninja: escaping for build.ninja and its shell, a run's report, compile_commands.json from its commands, and the timeline a build wrote read back for people."""
