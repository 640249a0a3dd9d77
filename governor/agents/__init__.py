"""Which program is which agent.

- `presets`: the agent presets (`presets.toml`): program, install, login, the
  home folders its sandbox keeps;
- `preset_values`: the checker of each key of a preset, and the kinds only
  presets hold (`KeyHosts`, `Relocation`);
- `npm_installs`: the agents the governor installs itself (``governor agents install``);
- `demo`, `stdio_peer`: the bundled agents, run by path (standard library only;
  they import each other by their own names, never ``governor``).

May import: `policies` and `sandbox` (a PATH lookup, the host's processes).
"""
