"""The boundary: where what the agent made meets what we keep and show.

- `secrets`: masking, before anything is logged, recorded or shown;
- `display`: the agent's strings made inert for a terminal, a CI log, a summary;
- `folders`: walking a tree the agent shaped (a folder it made unreadable is
  opened, never taken for empty);
- `person_files`: the files the person names (``-o``, ``--events``, ``--log``,
  ``--prompt-file``, ``--policy``), written and read through no link an agent
  could have left.

Rules of this room: plain functions and values, no trio; nothing here decides
a request. May import: the standard library only (nothing of ours), so that
every other room can use it.
"""
