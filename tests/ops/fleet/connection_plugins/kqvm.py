# Ansible connection to a kupdate QEMU test guest: commands go through the
# harness's agent channel (qemu-kexec/vm run), which survives the kexec: a
# command that runs across it ends with status 252, and the next one waits
# for the new boot's agent.  Test fleets only (tests/ops/fleet.sh); real
# fleets use SSH.  No file transfer: the play runs raw tasks on the guest.
from __future__ import annotations

import subprocess

from ansible.errors import AnsibleError
from ansible.plugins.connection import ConnectionBase

DOCUMENTATION = """
name: kqvm
short_description: run commands in a kupdate QEMU test guest
description:
  - Runs each command with C(qemu-kexec/vm run NAME -- COMMAND).
options:
  vm_name:
    description: the guest's name for the vm harness
    vars:
      - name: kqvm_name
  vm_tool:
    description: path of qemu-kexec/vm
    vars:
      - name: kqvm_tool
  vm_timeout:
    description: seconds a command may run (not Ansible's connection timeout)
    default: 900
    vars:
      - name: kqvm_timeout
"""


class Connection(ConnectionBase):
    transport = "kqvm"
    has_pipelining = False

    def _connect(self):
        self._connected = True
        return self

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        if in_data:
            raise AnsibleError("kqvm: no stdin for commands")
        argv = [self.get_option("vm_tool"), "run", self.get_option("vm_name"),
                "-t", str(self.get_option("vm_timeout")), "--", cmd]
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        return p.returncode, p.stdout, p.stderr

    def put_file(self, in_path, out_path):
        raise AnsibleError("kqvm: no file transfer (use raw tasks)")

    def fetch_file(self, in_path, out_path):
        raise AnsibleError("kqvm: no file transfer (use raw tasks)")

    def close(self):
        self._connected = False
