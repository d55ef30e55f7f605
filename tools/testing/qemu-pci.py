#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Boot the test guest on QEMU 11 with emulated Neuron PCI functions.

Starts one tools/nhbm-devmodel vfio-user server per function, runs QEMU from
the Debian 13 root (in a private mount namespace, chrooted, with the run's
files placed inside the root), copies the serial console to LOG and answers
the guest's "NHBM-HOST-REQUEST device_del <id>" lines with QMP device_del.

  qemu-pci.py --root R --devmodel BIN --kernel K --initrd I --log LOG
              [--functions v2,v3/1000,...] [--mem 512] [--timeout 900] [--append ARGS]
              [--qemu-args ARGS]

Each function is ARCH (v2, v3, v4), optionally /BOOT_MS: its firmware then
boots for that many milliseconds after the first BAR0 access.

Exits with QEMU's status, 124 on timeout.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

REQUEST = "NHBM-HOST-REQUEST device_del "


def qmp(path, command, arguments):
    """Sends one QMP command and returns its answer."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(path)
    f = s.makefile("rw")
    json.loads(f.readline())  # greeting
    for cmd in ({"execute": "qmp_capabilities"}, {"execute": command, "arguments": arguments}):
        f.write(json.dumps(cmd) + "\n")
        f.flush()
        while True:
            reply = json.loads(f.readline())
            if "return" in reply or "error" in reply:
                break
    s.close()
    return reply


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--devmodel", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--initrd", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--functions", default="v2,v2")
    ap.add_argument("--mem", type=int, default=512)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--append", default="")
    ap.add_argument("--cpu", default="max,-erms,-fsrm")
    ap.add_argument("--machine", default="pc", help="QEMU machine type (q35 for an emulated IOMMU)")
    ap.add_argument("--qemu-args", default="", help="more QEMU arguments (firmware), split at spaces")
    a = ap.parse_args()
    if "phys-bits" not in a.cpu:
        a.cpu += ",phys-bits=42"

    inside = f"/run/nhbm-{os.getpid()}"
    run = a.root + inside
    os.makedirs(run)
    models = []
    qemu = None
    try:
        shutil.copy(a.kernel, f"{run}/bzImage")
        shutil.copy(a.initrd, f"{run}/initrd")
        devices = []
        for i, spec in enumerate(a.functions.split(",")):
            arch, _, boot = spec.partition("/")
            sock = f"{run}/nhbm{i}.sock"
            cmd = [a.devmodel, "--socket", sock, "--arch", arch, "--boot-ms", boot or "0"]
            models.append(subprocess.Popen(cmd, stdout=sys.stderr))
            for _ in range(100):
                if os.path.exists(sock):
                    break
                time.sleep(0.05)
            else:
                raise SystemExit(f"qemu-pci: device model {i} did not create {sock}")
            devices += [
                "-device",
                json.dumps(
                    {
                        "driver": "vfio-user-pci",
                        "id": f"nhbm{i}",
                        "addr": hex(4 + i),
                        "socket": {"type": "unix", "path": f"{inside}/nhbm{i}.sock"},
                    }
                ),
            ]
        qemu_cmd = [
            "qemu-system-x86_64",
            "-m", str(a.mem), "-smp", "2", "-nographic", "-no-reboot", "-cpu", a.cpu,
            # Guest memory is shared with the device models (vfio-user DMA).
            "-object", f"memory-backend-memfd,id=mem,size={a.mem}M,share=on",
            "-machine", f"{a.machine},memory-backend=mem",
            "-kernel", f"{inside}/bzImage", "-initrd", f"{inside}/initrd",
            # pci=nocrs: the firmware's 64-bit window is sized to what it
            # placed itself and leaves no room to align a V2 function's
            # 32 GiB BAR4 beside two 256 GiB ones (V3, V4); the guest kernel
            # then places the BARs in the whole 42-bit space (--cpu).
            "-append", f"console=ttyS0 panic=-1 oops=panic loglevel=7 pci=nocrs {a.append}",
            "-qmp", f"unix:{inside}/qmp.sock,server=on,wait=off",
        ] + a.qemu_args.split() + devices
        # A private mount namespace: /proc for QEMU inside the root, gone
        # with the process.
        shell = 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"'
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", shell, a.root]
        qemu = subprocess.Popen(
            cmd + qemu_cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timer = threading.Timer(a.timeout, lambda: os.killpg(qemu.pid, signal.SIGKILL))
        timer.start()
        with open(a.log, "w", encoding="utf-8", errors="replace") as log:
            for raw in qemu.stdout:
                line = raw.decode("utf-8", "replace")
                log.write(line)
                log.flush()
                at = line.find(REQUEST)
                if at >= 0:
                    dev_id = line[at + len(REQUEST):].split()[0]
                    reply = qmp(f"{run}/qmp.sock", "device_del", {"id": dev_id})
                    log.write(f"qemu-pci: device_del {dev_id}: {json.dumps(reply)}\n")
        rc = qemu.wait()
        expired = not timer.is_alive()
        timer.cancel()
        return 124 if expired else rc
    finally:
        if qemu and qemu.poll() is None:
            os.killpg(qemu.pid, signal.SIGKILL)
            qemu.wait()
        for m in models:
            if m.poll() is None:
                m.terminate()
            m.wait()
        shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
