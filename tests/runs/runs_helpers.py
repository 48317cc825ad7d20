"""Helpers and fixtures for the runner tests: buggy kernels written into temp
workspaces, and a real OpenSSH server on 127.0.0.1 (host key, client key and known_hosts
generated per session).

Imported by the test modules, not a conftest.py: a second `conftest` module
would shadow `from conftest import ...` in tests/engine."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
PYTHON = sys.executable

KERNELS = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

SHAPE = (8, 128)


def call(kernel, scratch):
    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(SHAPE)
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(SHAPE, jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=scratch)(x)


def array_to_dma(x_hbm, o_hbm, buf, sem):
    pltpu.sync_copy(x_hbm, buf)
    copy = pltpu.make_async_copy(buf[...], o_hbm, sem)  # BUG: an Array, not a Ref
    copy.start()
    copy.wait()


def vector_sem(x_hbm, o_hbm, buf, sems):
    copy = pltpu.make_async_copy(x_hbm, buf, sems)  # BUG: (2,) semaphores
    copy.start()
    copy.wait()
    pltpu.sync_copy(buf, o_hbm)


def racy(x_hbm, o_hbm, t_ref, sem):
    copy = pltpu.make_async_copy(x_hbm, t_ref, sem)
    copy.start()
    t_ref[...] = t_ref[...] + 1.0  # BUG: touches the DMA destination before wait()
    copy.wait()
    pltpu.sync_copy(t_ref, o_hbm)


def hangs(x_hbm, o_hbm, sem):
    copy = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    copy.wait()  # BUG: never started


def good(x_hbm, o_hbm, sem):
    copy = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    copy.start()
    copy.wait()
'''

TESTS = '''
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu

import kernels as k


def test_array_to_dma():
    k.call(k.array_to_dma, [pltpu.VMEM(k.SHAPE, jnp.float32), pltpu.SemaphoreType.DMA])


def test_vector_sem():
    k.call(k.vector_sem, [pltpu.VMEM(k.SHAPE, jnp.float32), pltpu.SemaphoreType.DMA((2,))])


def test_racy():
    k.call(k.racy, [pltpu.VMEM(k.SHAPE, jnp.float32), pltpu.SemaphoreType.DMA])


def test_hangs():
    k.call(k.hangs, [pltpu.SemaphoreType.DMA])


def test_good():
    out = k.call(k.good, [pltpu.SemaphoreType.DMA])
    np.testing.assert_array_equal(np.asarray(out), np.arange(8 * 128).reshape(8, 128))
'''


def line_of(path: Path, needle: str, nth: int = 0) -> int:
    """1-based line of the nth line containing `needle`."""
    hits = [i + 1 for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines())
            if needle in ln]
    return hits[nth]


def make_workspace(root: Path, test_name: str = "test_kernels.py") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'ws'\nversion = '0'\n")
    (root / "kernels.py").write_text(KERNELS.lstrip(), encoding="utf-8")
    (root / test_name).write_text(TESTS.lstrip(), encoding="utf-8")
    return root


@pytest.fixture
def workspace(tmp_path) -> Path:
    return make_workspace(tmp_path / "ws")


# ---------------------------------------------------------------- sshd


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



def ssh_profile(sshd, remote_dir: Path, **kw) -> dict:
    """An `ssh` profile for the `sshd` fixture's server, running in `remote_dir`."""
    return {"kind": "ssh", "host": sshd["host"], "port": sshd["port"], "user": sshd["user"],
            "identity_file": sshd["identity_file"], "known_hosts": sshd["known_hosts"],
            "remote_dir": str(remote_dir), "remote_python": PYTHON, **kw}


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A real sshd on 127.0.0.1:<free port>, stopped at the end."""
    if not os.path.exists(SSHD):
        pytest.skip(f"{SSHD} is missing: install Debian's openssh-server to run the SSH tests")
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("the OpenSSH client (ssh, ssh-keygen) is missing")
    d = tmp_path_factory.mktemp("sshd")
    os.chmod(d, 0o700)
    host_key, client_key = d / "host_ed25519", d / "client key"  # a space on purpose
    for key in (host_key, client_key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                       check=True)
    auth = d / "authorized_keys"
    auth.write_text(Path(f"{client_key}.pub").read_text())
    os.chmod(auth, 0o600)
    port = _free_port()
    known = d / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {Path(f'{host_key}.pub').read_text().strip()}\n")
    config = d / "sshd_config"
    config.write_text(textwrap.dedent(f"""\
        ListenAddress 127.0.0.1
        Port {port}
        HostKey {host_key}
        AuthorizedKeysFile {auth}
        PidFile {d / 'sshd.pid'}
        StrictModes no
        UsePAM no
        PasswordAuthentication no
        KbdInteractiveAuthentication no
        PubkeyAuthentication yes
        PermitRootLogin yes
        """))
    try:
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
    except OSError:
        pass  # not root: sshd says so in its log below if it needs it
    log = open(d / "sshd.log", "wb")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.close()
            pytest.fail("sshd exited: " + (d / "sshd.log").read_text())
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("sshd did not start listening")
    import getpass
    info = {"host": "127.0.0.1", "port": port, "user": getpass.getuser(),
            "identity_file": str(client_key), "known_hosts": str(known), "dir": d}
    yield info
    os.killpg(proc.pid, 15)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
    log.close()


def processes_in_group(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        state, pgrp = rest[0], int(rest[2])
        if pgrp == pgid and state != "Z":
            out.append(int(entry))
    return out


def processes_with_cwd(folder: Path) -> list[int]:
    real = os.path.realpath(folder)
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (cwd == real or cwd.startswith(real + "/")) and state != "Z":
            out.append(int(entry))
    return out
