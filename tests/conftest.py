"""Shared by every test folder: ``tests/`` itself is importable, for the few
helpers more than one folder needs (`toolchain_home`)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.append(HERE)
