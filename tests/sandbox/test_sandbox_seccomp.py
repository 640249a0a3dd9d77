"""The seccomp generator, checked by interpreting its own BPF (no kernel involved).

The live counterpart (the same syscalls refused inside a real sandbox) is in
test_sandbox_seccomp_live.py.
"""

from __future__ import annotations

import errno
import re
from pathlib import Path

import pytest
from sandbox_bpf import interpret, seccomp_data

from governor.sandbox.plan import seccomp
from governor.sandbox.plan.seccomp import (
    AARCH64,
    AF_UNIX,
    ENOSYS_SYSCALLS,
    EPERM_SYSCALLS,
    SECCOMP_RET_ALLOW,
    SECCOMP_RET_ERRNO,
    SECCOMP_RET_KILL_PROCESS,
    TIOCLINUX,
    TIOCSTI,
    X86_64,
    Arch,
    Insn,
    Label,
    SeccompError,
)

ARCHES = [X86_64, AARCH64]
EPERM = SECCOMP_RET_ERRNO | errno.EPERM
ENOSYS = SECCOMP_RET_ERRNO | errno.ENOSYS
AUDIT_ARCH_I386 = 0x40000003
TIOCGWINSZ = 0x5413
AF_INET = 2
CLONE_NEWUSER = 0x10000000
THREAD_FLAGS = 0x3D0F00  # what glibc passes for pthread_create


def verdict(arch: Arch, name: str, *args: int, allow_unix: bool = False) -> int:
    program = seccomp.build(arch, allow_unix_sockets=allow_unix)
    return interpret(program, seccomp_data(arch.syscalls[name], arch.audit_arch, args))


@pytest.mark.parametrize("arch", ARCHES, ids=lambda a: a.name)
@pytest.mark.parametrize("name", EPERM_SYSCALLS)
def test_sandbox_rearranging_syscalls_are_refused_with_eperm(arch: Arch, name: str) -> None:
    assert verdict(arch, name) == EPERM


@pytest.mark.parametrize("arch", ARCHES, ids=lambda a: a.name)
@pytest.mark.parametrize("name", ENOSYS_SYSCALLS)
def test_clone3_the_new_mount_api_and_io_uring_answer_enosys(arch: Arch, name: str) -> None:
    assert verdict(arch, name) == ENOSYS


@pytest.mark.parametrize("arch", ARCHES, ids=lambda a: a.name)
def test_terminal_injection_ioctls_are_refused_but_other_ioctls_pass(arch: Arch) -> None:
    assert verdict(arch, "ioctl", 0, TIOCSTI) == EPERM
    assert verdict(arch, "ioctl", 0, TIOCLINUX) == EPERM
    assert verdict(arch, "ioctl", 0, TIOCGWINSZ) == SECCOMP_RET_ALLOW


@pytest.mark.parametrize("arch", ARCHES, ids=lambda a: a.name)
def test_tiocsti_with_high_bits_set_is_still_refused_cve_2019_10063(arch: Arch) -> None:
    assert verdict(arch, "ioctl", 0, TIOCSTI | 1 << 32) == EPERM
    assert verdict(arch, "ioctl", 0, TIOCSTI | 0xFFFFFFFF00000000) == EPERM


@pytest.mark.parametrize("arch", ARCHES, ids=lambda a: a.name)
def test_unix_sockets_are_refused_unless_opted_out(arch: Arch) -> None:
    assert verdict(arch, "socket", AF_UNIX, 1, 0) == EPERM
    assert verdict(arch, "socket", AF_INET, 1, 0) == SECCOMP_RET_ALLOW
    assert verdict(arch, "socket", AF_UNIX, 1, 0, allow_unix=True) == SECCOMP_RET_ALLOW


@pytest.mark.parametrize("arch", ARCHES, ids=lambda a: a.name)
def test_clone_with_a_namespace_flag_is_refused_but_threads_and_forks_pass(arch: Arch) -> None:
    assert verdict(arch, "clone", CLONE_NEWUSER | 17) == EPERM
    assert verdict(arch, "clone", 0x20000 | 17) == EPERM  # CLONE_NEWNS
    assert verdict(arch, "clone", THREAD_FLAGS) == SECCOMP_RET_ALLOW
    assert verdict(arch, "clone", 17) == SECCOMP_RET_ALLOW  # fork(): SIGCHLD only


@pytest.mark.parametrize("arch", ARCHES, ids=lambda a: a.name)
def test_ordinary_syscalls_are_allowed(arch: Arch) -> None:
    program = seccomp.build(arch)
    for nr in range(0, 300):
        if nr in arch.syscalls.values():
            continue
        assert interpret(program, seccomp_data(nr, arch.audit_arch)) == SECCOMP_RET_ALLOW, nr


def test_a_foreign_architecture_is_killed() -> None:
    program = seccomp.build(X86_64)
    assert interpret(program, seccomp_data(0, AUDIT_ARCH_I386)) == SECCOMP_RET_KILL_PROCESS
    assert interpret(program, seccomp_data(0, AARCH64.audit_arch)) == SECCOMP_RET_KILL_PROCESS
    assert interpret(program, seccomp_data(0, X86_64.audit_arch)) == SECCOMP_RET_ALLOW


def test_x32_syscalls_on_x86_64_are_refused() -> None:
    program = seccomp.build(X86_64)
    x32_ioctl = 0x40000000 | 514
    assert interpret(program, seccomp_data(x32_ioctl, X86_64.audit_arch, (0, TIOCSTI))) == EPERM
    assert interpret(program, seccomp_data(0x40000000, X86_64.audit_arch)) == EPERM


def test_x86_64_numbers_match_the_kernel_headers() -> None:
    header = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
    if not header.exists():
        pytest.skip("no x86_64 kernel headers on this machine")
    numbers = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)", header.read_text())
    }
    checked = [name for name in X86_64.syscalls if name in numbers]
    assert len(checked) >= len(X86_64.syscalls) - 1  # open_tree_attr is newer than most headers
    for name in checked:
        assert X86_64.syscalls[name] == numbers[name], name


def test_aarch64_numbers_match_the_generic_kernel_headers() -> None:
    header = Path("/usr/include/asm-generic/unistd.h")
    if not header.exists():
        pytest.skip("no asm-generic kernel headers on this machine")
    numbers = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)", header.read_text())
    }
    numbers.setdefault("umount2", numbers.get("umount", -1))  # spelled __NR_umount2 via a macro
    checked = [name for name in AARCH64.syscalls if name in numbers]
    assert len(checked) >= len(AARCH64.syscalls) - 1
    for name in checked:
        assert AARCH64.syscalls[name] == numbers[name], name


def test_every_rule_names_a_syscall_both_tables_know() -> None:
    for arch in ARCHES:
        for name in (*EPERM_SYSCALLS, *ENOSYS_SYSCALLS, "ioctl", "socket", "clone"):
            assert name in arch.syscalls, (arch.name, name)


def test_assemble_refuses_a_jump_beyond_255_instructions() -> None:
    items = [Insn(0x15, 1, jt="far"), *[Insn(0x06, 0)] * 300, Label("far"), Insn(0x06, 0)]
    with pytest.raises(SeccompError, match="out of range"):
        seccomp.assemble(items)


def test_the_program_is_small_and_a_whole_number_of_instructions() -> None:
    program = seccomp.build(X86_64)
    assert len(program) % 8 == 0
    assert len(program) // 8 < 100
