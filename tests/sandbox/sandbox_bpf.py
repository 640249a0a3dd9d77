"""A tiny classic-BPF interpreter for seccomp programs, for tests only.

It implements exactly the instruction classes a seccomp filter may use (load
word absolute, ALU, jumps, return) over a ``struct seccomp_data`` built from
(nr, arch, args), so the tests can ask "what does our filter answer for
ioctl(fd, TIOCSTI | 1 << 32)?" without trusting the generator's own tables.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

BPF_CLASS = 0x07
BPF_LD, BPF_ALU, BPF_JMP, BPF_RET = 0x00, 0x04, 0x05, 0x06
BPF_OP = 0xF0
BPF_JA, BPF_JEQ, BPF_JGT, BPF_JGE, BPF_JSET = 0x00, 0x10, 0x20, 0x30, 0x40
BPF_AND = 0x50
BPF_W_ABS = 0x20


def decode(program: bytes) -> list[tuple[int, int, int, int]]:
    if len(program) % 8:
        raise ValueError("a BPF program is a whole number of 8-byte instructions")
    return [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]


def seccomp_data(nr: int, arch: int, args: Sequence[int] = ()) -> bytes:
    padded = [*args, *([0] * (6 - len(args)))]
    return struct.pack("<iIQ6Q", nr, arch, 0, *[a & (2**64 - 1) for a in padded])


def interpret(program: bytes, data: bytes) -> int:
    """Run ``program`` on ``data``; return the filter's 32-bit verdict."""
    insns = decode(program)
    acc = 0
    pc = 0
    steps = 0
    while True:
        steps += 1
        if steps > 10_000 or pc >= len(insns):
            raise RuntimeError(f"program ran off the end or looped (pc={pc})")
        code, jt, jf, k = insns[pc]
        cls = code & BPF_CLASS
        if cls == BPF_LD:
            if code != BPF_W_ABS:
                raise ValueError(f"unsupported load {code:#x}")
            if k % 4 or k + 4 > len(data):
                raise ValueError(f"misaligned or out-of-range load at {k}")
            (acc,) = struct.unpack_from("<I", data, k)
            pc += 1
        elif cls == BPF_ALU:
            if code & BPF_OP != BPF_AND:
                raise ValueError(f"unsupported alu {code:#x}")
            acc &= k
            pc += 1
        elif cls == BPF_JMP:
            op = code & BPF_OP
            if op == BPF_JA:
                pc += 1 + k
                continue
            taken = {
                BPF_JEQ: acc == k,
                BPF_JGT: acc > k,
                BPF_JGE: acc >= k,
                BPF_JSET: bool(acc & k),
            }[op]
            pc += 1 + (jt if taken else jf)
        elif cls == BPF_RET:
            return k
        else:
            raise ValueError(f"unsupported instruction class {code:#x}")
